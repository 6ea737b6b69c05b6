"""Policy models and tokenizers for every profile and stage, and the tiny model's architecture.

``load_policy(profile)`` returns ``(model, tokenizer, lora_config | None)``:

- ``smoke``: a random-weight tiny Qwen3 built in memory (``build_random_tiny``);
- ``tiny``: the project's pretrained tiny Qwen3 shipped in ``data/tiny-base``;
- ``colab`` / ``paper``: a Qwen3 base model from the hub (or a local copy), 4-bit NF4 on request.

A training stage loads through ``stage_model_config`` (the profile's model with the stage's LoRA,
4-bit and checkpointing choices, from a run folder's ``merged/`` when it starts from one) and
``load_training_policy`` (the six tags added, 4-bit kept differentiable, LoRA + tag rows).

The tiny tokenizer is a byte-level BPE trained on TinyGSM text with every digit its own token,
so words are short and arithmetic stays digit by digit; it can encode any text. It has no
parallel tags: ``pr1lib.decoding.tokens`` adds them to it exactly as to Qwen's tokenizer.

>>> ModelNotAvailableError.__mro__[1].__name__
'OSError'
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

import torch
from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
from tokenizers.models import BPE
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    BitsAndBytesConfig,
    PreTrainedTokenizerFast,
    Qwen3Config,
)

from pr1lib import worlds
from pr1lib.config import PROMPTS, ModelConfig, PretrainConfig
from pr1lib.config.checks import check_model
from pr1lib.config.runtime import set_seed
from pr1lib.decoding.tokens import add_parallel_tags, lora_kwargs_for_tags
from pr1lib.format.prompts import linear_solution, prompt_text
from pr1lib.store.paths import REPO_ROOT

EOS_TOKEN = "<|endoftext|>"  # Qwen's end-of-text string; eos and pad, as in Qwen3 base models
TINY_MODEL_DIR = "data/tiny-base"  # the tiny profile's model, pretrained on TinyGSM
TOKENIZER_EXTRA_CORPUS = (  # words later stages write (teacher traces, answers); tokenizer only
    "Final Answer: 42\nLet us check this another way.\nBoth paths agree, so the answer is 42.\n"
    "Path Summary Parallel First path: Second path: Check: The two results agree.\n"
    "So the total is 42. Another way: count again. Both give 42. We compute step by step.\n"
)


class ModelNotAvailableError(OSError):
    """A model that is neither a local folder nor loadable from the hub (e.g. offline, uncached)."""


def base_model_dir(world: str = "tinygsm") -> str:
    """The shipped base model folder (relative to the repo root) pretrained on ``world``
    (``pr1lib.worlds``).

    >>> base_model_dir(), base_model_dir("tinyworld")
    ('data/tiny-base', 'data/tinyworld-base')
    """
    folder = worlds.get(world).checkpoints.get("base")
    if folder is None:
        raise ValueError(f"no shipped base model for world {world!r}")
    return folder


def resolve_model_name(name: str) -> str:
    """A local folder for ``name`` if there is one (relative paths: from the repo root), else
    ``name``.

    >>> resolve_model_name("Qwen/Qwen3-0.6B-Base")
    'Qwen/Qwen3-0.6B-Base'
    """
    path = Path(name).expanduser()
    for candidate in (path, REPO_ROOT / path):
        if candidate.is_dir():
            return str(candidate.resolve())
    return name


def _not_available(name: str, err: Exception) -> ModelNotAvailableError:
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False")
    why = (
        "HF_HUB_OFFLINE=1 is set and it is not in the local cache"
        if offline
        else str(err).splitlines()[0]
    )
    return ModelNotAvailableError(
        f"Model {name!r} is not available: it is not a local folder and could not be loaded "
        f"from the "
        f"Hugging Face hub ({why}). Download it once where there is network "
        f"(`hf download {name} --local-dir DIR`), then point at the folder: "
        f"`--model DIR` on the command line (sft, grpo, eval; coldstart's hf teacher) or "
        f"`ModelConfig(name=DIR)` in Python."
    )


def _from_pretrained(cls: Any, name: str, **kwargs: Any) -> Any:
    """``cls.from_pretrained`` that turns any 'cannot get it' error into
    ``ModelNotAvailableError``."""
    try:
        source = resolve_model_name(check_model(name))  # a path-like name is never a hub id
    except ValueError as err:
        raise ModelNotAvailableError(str(err)) from None
    try:
        return cls.from_pretrained(source, **kwargs)
    except OSError as err:  # transformers and huggingface_hub raise OSError subclasses for misses
        raise _not_available(name, err) from None  # its message has the first line of err
    except Exception as err:  # a folder the checks passed but that will not load: one line
        first = (str(err).strip().splitlines() or [""])[0][:300]
        raise ValueError(
            f"model {name} could not be loaded ({type(err).__name__}: {first}): a damaged or "
            "incompatible model folder; pass a folder saved with save_pretrained"
        ) from err


def train_tiny_tokenizer(texts: Iterable[str], vocab_size: int = 512):
    """A byte-level BPE fast tokenizer (digits split one by one) trained on ``texts``; eos = pad.

    >>> tok = train_tiny_tokenizer(["Tom has 12 apples."] * 20, vocab_size=300)
    >>> tok.decode(tok("Tom has 123 pears!")["input_ids"])
    'Tom has 123 pears!'
    """
    tok = Tokenizer(BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN],
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        pad_token=EOS_TOKEN,
        clean_up_tokenization_spaces=False,
    )


def tiny_tokenizer_corpus(seed: int = 0, n: int = 4000, world: str = "tinygsm") -> list[str]:
    """Prompts + linear solutions of both tiers of ``world`` (``pr1lib.worlds``), plus a few words
    later stages use."""
    generate = worlds.get(world).generate
    records = generate(n, "easy", "train", seed) + generate(n, "hard", "train", seed)
    texts = [prompt_text(r["question"], "tiny") + linear_solution(r["answer"]) for r in records]
    return texts + [TOKENIZER_EXTRA_CORPUS] * 200


def tiny_qwen3_config(cfg: PretrainConfig, tokenizer):
    """The ``Qwen3Config`` of the tiny model: sizes from ``cfg``, vocabulary and ids from
    ``tokenizer``.

    >>> from pr1lib.config import PretrainConfig
    >>> tok = train_tiny_tokenizer(["a b c"] * 5, vocab_size=270)
    >>> tiny_qwen3_config(PretrainConfig(), tok).model_type
    'qwen3'
    """
    return Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.hidden_size // cfg.num_heads,
        max_position_embeddings=cfg.max_position_embeddings,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def load_tiny_tokenizer(seed: int = 0):
    """The shipped tiny tokenizer from ``data/tiny-base``, or (if it is missing) one trained now."""
    folder = REPO_ROOT / TINY_MODEL_DIR
    if (folder / "tokenizer.json").exists():
        return AutoTokenizer.from_pretrained(str(folder))
    return train_tiny_tokenizer(tiny_tokenizer_corpus(seed), PretrainConfig().vocab_size)


def build_random_tiny(seed: int = 0, tokenizer=None, cfg: PretrainConfig | None = None):
    """A random-weight tiny Qwen3 (the ``smoke`` policy) and its tokenizer, built in memory.

    >>> model, tok = build_random_tiny(seed=0)
    >>> model.config.model_type, model.config.vocab_size == len(tok)
    ('qwen3', True)
    """
    tokenizer = tokenizer if tokenizer is not None else load_tiny_tokenizer(seed)
    set_seed(seed)
    config = tiny_qwen3_config(cfg or PretrainConfig(), tokenizer)
    return AutoModelForCausalLM.from_config(config), tokenizer


def lora_config(config: ModelConfig):
    """A ``peft.LoraConfig`` from the ``lora_*`` fields when ``use_lora`` is set, else ``None``.

    >>> lora_config(ModelConfig(use_lora=True)).target_modules
    'all-linear'
    >>> lora_config(ModelConfig()) is None
    True
    """
    if not config.use_lora:
        return None
    from peft import LoraConfig  # here: importing peft takes seconds, which eval never needs

    targets = config.lora_target_modules
    targets = targets[0] if tuple(targets) == ("all-linear",) else list(targets)
    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=targets,
        task_type="CAUSAL_LM",
    )


def model_kwargs(config: ModelConfig) -> dict[str, Any]:
    """``from_pretrained`` keyword arguments: dtype, attention, device and (optionally) NF4
    4-bit."""
    dtype = getattr(torch, config.dtype)
    kwargs: dict[str, Any] = {"dtype": dtype, "attn_implementation": config.attn_implementation}
    if torch.cuda.is_available() and os.environ.get("ACCELERATE_USE_DEEPSPEED") != "true":
        # one GPU per process: under accelerate/torchrun each rank loads onto its own device
        kwargs["device_map"] = {"": int(os.environ.get("LOCAL_RANK", 0))}
    if config.load_in_4bit:
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_compute_dtype=dtype,
            bnb_4bit_use_double_quant=True,
        )
    return kwargs


def load_policy(profile: str | None = None, config: ModelConfig | None = None):
    """``(model, tokenizer, lora_config | None)`` for a profile (or an explicit ``ModelConfig``).

    >>> model, tok, lora = load_policy("smoke")
    >>> type(model).__name__, lora is None
    ('Qwen3ForCausalLM', True)
    """
    config = config or ModelConfig.for_profile(profile)
    if config.random_init:
        model, tokenizer = build_random_tiny(seed=config.seed)
    else:
        tokenizer = _from_pretrained(AutoTokenizer, config.name)
        model = _from_pretrained(AutoModelForCausalLM, config.name, **model_kwargs(config))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer, lora_config(config)


# ----------------------------------------------------------------------------- training stages
def checkpoint_folder(path: str | Path) -> str:
    """A run folder's ``merged/`` model when it has one, else ``path`` (a model folder or hub id).

    >>> checkpoint_folder("Qwen/Qwen3-4B-Base")
    'Qwen/Qwen3-4B-Base'
    """
    merged = Path(path) / "merged"
    return str(merged) if merged.is_dir() else str(path)


def gpu_dtype(dtype: str) -> str:
    """The training precision on this machine: ``float16`` becomes ``bfloat16`` on a GPU that has
    it (L4, A100: no overflow, no loss scaling); a T4 keeps ``float16``, a CPU what was asked.

    >>> gpu_dtype("float32")
    'float32'
    """
    if (
        dtype == "float16"
        and torch.cuda.is_available()
        and torch.cuda.is_bf16_supported(including_emulation=False)
    ):
        return "bfloat16"
    return dtype


def stage_model_config(cfg: Any, init: str | Path | None = None) -> ModelConfig:
    """The ``ModelConfig`` of a training stage (``SFTStageConfig`` or ``GRPOStageConfig``): the
    profile's model, or ``init`` (``--model`` / ``--init``: a run folder means its ``merged/``;
    else a model folder or hub id), with the stage's LoRA, 4-bit and checkpointing choices
    (``None`` fields keep the profile's; checkpointing defaults to CUDA).

    >>> from pr1lib.config import SFTStageConfig
    >>> stage_model_config(SFTStageConfig.for_profile("smoke", load_in_4bit=True)).load_in_4bit
    True
    """
    base = ModelConfig.for_profile(cfg.profile)
    # plain: the baseline prompt
    base = base.replace(prompt_style=PROMPTS[cfg.profile][cfg.variant])
    if init is not None:
        base = base.replace(name=checkpoint_folder(init), random_init=False)
    four_bit = base.load_in_4bit if cfg.load_in_4bit is None else cfg.load_in_4bit
    ckpt = cfg.gradient_checkpointing
    lora = {k: getattr(cfg, k) for k in ("lora_r", "lora_alpha") if getattr(cfg, k) is not None}
    return base.replace(
        use_lora=cfg.use_lora,
        load_in_4bit=four_bit,
        seed=cfg.seed,
        **lora,
        dtype=gpu_dtype(base.dtype),
        gradient_checkpointing=torch.cuda.is_available() if ckpt is None else ckpt,
    )


def quantize_4bit(model, model_cfg: ModelConfig):
    """An in-memory model reloaded with NF4 4-bit linear layers (for the random ``smoke`` model)."""
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        return AutoModelForCausalLM.from_pretrained(folder, **model_kwargs(model_cfg))


def keep_4bit_differentiable(model) -> int:
    """Stop bitsandbytes from repacking NF4 weights for its fast CPU inference kernel, and undo it
    where it already happened; returns how many layers were undone.

    The repacking happens the first time a 4-bit layer runs on CPU in eval mode without gradients
    (a "before" evaluation, say). The repacked kernel has no backward, so LoRA gradients that flow
    through it afterwards are silently wrong (PyTorch only warns that ``bitsandbytes::gemv_4bit``
    has no autograd kernel).
    """
    try:
        from bitsandbytes.nn.modules import Linear4bit, _convert_weight_packed_for_cpu_inverse
    except ImportError:  # no bitsandbytes: nothing is 4-bit
        return 0
    undone = 0
    for module in model.modules():
        if isinstance(module, Linear4bit):
            module.support_avx512bf16_for_cpu = False
            w = module.weight
            if getattr(w.quant_state, "packing_format_for_cpu", False):
                w.data, w.quant_state = _convert_weight_packed_for_cpu_inverse(
                    w.data, w.quant_state
                )
                undone += 1
    return undone


def trainable_precision(model, dtype: str) -> int:
    """Put trainable parameters in float32 unless training runs in bfloat16; returns how many
    were cast. TRL 1.16 turns QLoRA adapters (and the tag rows) into bfloat16 whatever the
    precision: a T4 has no bfloat16, and float16 mixed precision needs float32 weights to scale."""
    if dtype == "bfloat16":
        return 0
    cast = [p for p in model.parameters() if p.requires_grad and p.dtype != torch.float32]
    for param in cast:
        param.data = param.data.float()
    return len(cast)


def load_training_policy(model_cfg: ModelConfig, train_tag_rows: bool = True):
    """``(model, tokenizer, peft_config | None)``: the policy with the six tags added (rows
    initialised as the mean of their pieces), 4-bit when asked, LoRA config with the tag rows."""
    set_seed(model_cfg.seed)
    model, tokenizer, lora = load_policy(config=model_cfg)
    add_parallel_tags(tokenizer, model)
    if model_cfg.load_in_4bit and not getattr(model, "is_loaded_in_4bit", False):
        model = quantize_4bit(model, model_cfg)
    keep_4bit_differentiable(model)
    if model_cfg.load_in_4bit and lora is None:
        raise ValueError("4-bit weights cannot be trained directly: set use_lora=True (QLoRA)")
    if lora is not None and train_tag_rows:
        lora.trainable_token_indices = lora_kwargs_for_tags(tokenizer, model)[
            "trainable_token_indices"
        ]
    return model, tokenizer, lora


def expose_head_bias(model) -> None:
    """TRL's fused LM head reads ``lm_head.weight`` and ``lm_head.bias``. PEFT's wrapper for
    trainable
    tag rows serves ``weight`` (base rows + trained tag rows) but not ``bias``: hand it the
    head's."""
    head = model.get_output_embeddings()
    if type(head).__name__ == "TrainableTokensWrapper" and "bias" not in head.__dict__:
        # a plain attribute, not a new parameter
        object.__setattr__(head, "bias", head.original_module.bias)


# ----------------------------------------------------------------------------- memory budget
# Shapes of the Qwen3 base models the GPU profiles use (their config.json files).
QWEN3_SHAPES = {
    "Qwen/Qwen3-0.6B-Base": dict(
        hidden=1024, layers=28, heads=16, kv_heads=8, head_dim=128, mlp=3072, vocab=151936
    ),
    "Qwen/Qwen3-1.7B-Base": dict(
        hidden=2048, layers=28, heads=16, kv_heads=8, head_dim=128, mlp=6144, vocab=151936
    ),
    "Qwen/Qwen3-4B-Base": dict(
        hidden=2560, layers=36, heads=32, kv_heads=8, head_dim=128, mlp=9728, vocab=151936
    ),
}


def memory_estimate(
    shape: dict[str, int],
    batch: int,
    length: int,
    four_bit: bool,
    lora_r: int | None,
    checkpointing: bool = True,
) -> dict[str, float]:
    """A computed (not measured) GPU memory budget in GiB for one SFT micro-batch.

    Weights (NF4 ~0.53 byte/param with double quantization, else 2 bytes), trainable parameters at
    16 bytes (fp32 weight + grad + two AdamW moments), activations (checkpointed layer inputs plus
    one layer recomputed, ~34 bytes per token per hidden unit), the bool 4D mask, and ~0.6 GiB of
    CUDA context and workspace. The fused LM head never builds ``(B, L, vocab)`` logits.

    >>> m = memory_estimate(QWEN3_SHAPES["Qwen/Qwen3-0.6B-Base"], 4, 2048, True, 16)
    >>> 1.0 < m["total_gib"] < 4.0
    True
    """
    h, n_layers = shape["hidden"], shape["layers"]
    q, kv = shape["heads"] * shape["head_dim"], shape["kv_heads"] * shape["head_dim"]
    shapes = [
        (h, q),
        (h, kv),
        (h, kv),
        (q, h),
        (h, shape["mlp"]),
        (h, shape["mlp"]),
        (shape["mlp"], h),
    ]
    linear = n_layers * sum(a * b for a, b in shapes)
    embed = shape["vocab"] * h  # tied: one matrix
    weights = linear * (0.53 if four_bit else 2.0) + embed * 2.0
    trainable = (
        n_layers * sum(lora_r * (a + b) for a, b in shapes) + 6 * h if lora_r else linear + embed
    )
    tokens = batch * length
    acts = (
        (n_layers * tokens * h * 2 + 34 * tokens * h)
        if checkpointing
        else n_layers * 34 * tokens * h
    )
    gib = 2.0**30
    parts = {
        "weights_gib": weights / gib,
        "trainable_gib": 16 * trainable / gib,
        "activations_gib": acts / gib,
        "mask_gib": batch * length * length / gib,
        "context_gib": 0.6,
    }
    return {
        **{k: round(v, 2) for k, v in parts.items()},
        "total_gib": round(sum(parts.values()), 2),
        "trainable_params_m": round(trainable / 1e6, 1),
    }

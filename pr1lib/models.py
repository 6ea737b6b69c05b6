"""Policy models and tokenizers for every profile, and the tiny model's architecture.

``load_policy(profile)`` returns ``(model, tokenizer, lora_config | None)``:

- ``smoke``: a random-weight tiny Qwen3 built in memory (``build_random_tiny``);
- ``tiny``: the project's pretrained tiny Qwen3 shipped in ``data/tiny-base``;
- ``colab`` / ``paper``: a Qwen3 base model from the hub (or a local copy), 4-bit NF4 on request.

The tiny tokenizer is a byte-level BPE trained on TinyGSM text with every digit its own token,
so words are short and arithmetic stays digit by digit; it can encode any text. It has no
parallel tags: ``pr1lib.tokens`` adds them to it exactly as to Qwen's tokenizer.

>>> ModelNotAvailableError.__mro__[1].__name__
'OSError'
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from pr1lib.config import REPO_ROOT, ModelConfig, PretrainConfig, set_seed

EOS_TOKEN = "<|endoftext|>"  # Qwen's end-of-text string; eos and pad, as in Qwen3 base models
TINY_MODEL_DIR = "data/tiny-base"
TOKENIZER_EXTRA_CORPUS = (  # words later stages write (teacher traces, answers); tokenizer only
    "Final Answer: 42\nLet us check this another way.\nBoth paths agree, so the answer is 42.\n"
    "Path Summary Parallel First path: Second path: Check: The two results agree.\n"
    "So the total is 42. Another way: count again. Both give 42. We compute step by step.\n"
)


class ModelNotAvailableError(OSError):
    """A model that is neither a local folder nor loadable from the hub (e.g. offline, uncached)."""


def resolve_model_name(name: str) -> str:
    """A local folder for ``name`` if there is one (relative paths: from the repo root), else ``name``.

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
    why = "HF_HUB_OFFLINE=1 is set and it is not in the local cache" if offline else str(err).splitlines()[0]
    return ModelNotAvailableError(
        f"Model {name!r} is not available: it is not a local folder and could not be loaded from the "
        f"Hugging Face hub ({why}). Download it once where there is network "
        f"(`hf download {name} --local-dir DIR`), then point at the folder: "
        f"`--set name=DIR` on the command line or `ModelConfig(name=DIR)` in Python."
    )


def _from_pretrained(cls: Any, name: str, **kwargs: Any) -> Any:
    """``cls.from_pretrained`` that turns any 'cannot get it' error into ``ModelNotAvailableError``."""
    source = resolve_model_name(name)
    try:
        return cls.from_pretrained(source, **kwargs)
    except OSError as err:  # transformers and huggingface_hub raise OSError subclasses for misses
        raise _not_available(name, err) from err


def train_tiny_tokenizer(texts: Iterable[str], vocab_size: int = 512):
    """A byte-level BPE fast tokenizer (digits split one by one) trained on ``texts``; eos = pad.

    >>> tok = train_tiny_tokenizer(["Tom has 12 apples."] * 20, vocab_size=300)
    >>> tok.decode(tok("Tom has 123 pears!")["input_ids"])
    'Tom has 123 pears!'
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[EOS_TOKEN], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS_TOKEN, pad_token=EOS_TOKEN,
                                   clean_up_tokenization_spaces=False)


def tiny_tokenizer_corpus(seed: int = 0, n: int = 4000) -> list[str]:
    """TinyGSM prompts + linear solutions of both tiers, plus a few words later stages use."""
    from pr1lib.prompts import linear_solution, prompt_text
    from pr1lib.tasks import generate

    records = generate(n, "easy", "train", seed) + generate(n, "hard", "train", seed)
    texts = [prompt_text(r["question"], "tiny") + linear_solution(r["answer"]) for r in records]
    return texts + [TOKENIZER_EXTRA_CORPUS] * 200


def tiny_qwen3_config(cfg: PretrainConfig, tokenizer):
    """The ``Qwen3Config`` of the tiny model: sizes from ``cfg``, vocabulary and ids from ``tokenizer``.

    >>> from pr1lib.config import PretrainConfig
    >>> tok = train_tiny_tokenizer(["a b c"] * 5, vocab_size=270)
    >>> tiny_qwen3_config(PretrainConfig(), tok).model_type
    'qwen3'
    """
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads, head_dim=cfg.hidden_size // cfg.num_heads,
        max_position_embeddings=cfg.max_position_embeddings, rope_theta=10000.0,
        tie_word_embeddings=True, bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )


def load_tiny_tokenizer(seed: int = 0):
    """The shipped tiny tokenizer from ``data/tiny-base``, or (if it is missing) one trained now."""
    from transformers import AutoTokenizer

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
    from transformers import AutoModelForCausalLM

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
    from peft import LoraConfig

    targets = config.lora_target_modules
    targets = targets[0] if tuple(targets) == ("all-linear",) else list(targets)
    return LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=targets, task_type="CAUSAL_LM")


def model_kwargs(config: ModelConfig) -> dict[str, Any]:
    """``from_pretrained`` keyword arguments: dtype, attention, device and (optionally) NF4 4-bit."""
    import torch

    dtype = getattr(torch, config.dtype)
    kwargs: dict[str, Any] = {"dtype": dtype, "attn_implementation": config.attn_implementation}
    if torch.cuda.is_available() and os.environ.get("ACCELERATE_USE_DEEPSPEED") != "true":
        # one GPU per process: under accelerate/torchrun each rank loads onto its own device
        kwargs["device_map"] = {"": int(os.environ.get("LOCAL_RANK", 0))}
    if config.load_in_4bit:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=dtype,
            bnb_4bit_use_double_quant=True,
        )
    return kwargs


def load_policy(profile: str | None = None, config: ModelConfig | None = None):
    """``(model, tokenizer, lora_config | None)`` for a profile (or an explicit ``ModelConfig``).

    >>> model, tok, lora = load_policy("smoke")
    >>> type(model).__name__, lora is None
    ('Qwen3ForCausalLM', True)
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = config or ModelConfig.for_profile(profile)
    if config.random_init:
        model, tokenizer = build_random_tiny(seed=config.seed)
    else:
        tokenizer = _from_pretrained(AutoTokenizer, config.name)
        model = _from_pretrained(AutoModelForCausalLM, config.name, **model_kwargs(config))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer, lora_config(config)

"""Stage 1, cold-start SFT: TRL's ``SFTTrainer`` on the prompt-completion set, seen or unseen.

The recipe (reference/paper-spec.md §3, §11):

* loss on the completion only (TRL's ``completion_only_loss``; TRL appends eos to each completion),
  averaged per sample and then over samples (``loss_reduction="sample"``), as the official trainer
  does with micro-batches of one; ``"token"`` is TRL's token mean over the whole batch;
* LoRA through PEFT on every linear layer, with the six tag rows trainable through
  ``trainable_token_indices`` (a tied LM head follows the embedding), optionally on an NF4 4-bit
  base (QLoRA; bitsandbytes >= 0.45 also runs it on CPU); ``use_lora=False`` is full fine-tuning;
* ``seen`` trains plain causal with TRL's own collator; ``unseen`` swaps in ``ParallelCollator``,
  which adds the path-isolating 4D mask and restarted position ids (``pr1lib.structure``) parsed
  from the **response only**: the official data set also parsed the tags of the prompt and put 47
  prompt tokens at position 0 (§9.1). The mask always travels with the positions (a restarted
  position without a mask trips transformers' packed-sequence detection).

A run folder holds ``config.json``, ``model_config.json``, ``adapter/`` (LoRA + tag rows),
``merged/`` (a plain model for ``from_pretrained``), ``loss.csv`` and ``run_card.json``.

>>> loss_figure({"seen": [{"step": 1, "loss": 2.0}]}).layout.xaxis.title.text
'optimizer step'
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from transformers import TrainerCallback
from trl import SFTConfig, SFTTrainer

from pr1lib.config import (
    ModelConfig, SFTStageConfig, check_profile, environment_report, is_main_process, runs_dir, set_seed, variant_mode,
)

VARIANTS = ("seen", "unseen")


# ----------------------------------------------------------------------------- model
def sft_model_config(cfg: SFTStageConfig, profile: str | None = None) -> ModelConfig:
    """The profile's ``ModelConfig`` with the SFT stage's LoRA / 4-bit / checkpointing choices.

    >>> sft_model_config(SFTStageConfig(load_in_4bit=True), "smoke").load_in_4bit
    True
    """
    base = ModelConfig.for_profile(profile)
    four_bit = base.load_in_4bit if cfg.load_in_4bit is None else cfg.load_in_4bit
    checkpointing = torch.cuda.is_available() if cfg.gradient_checkpointing is None else cfg.gradient_checkpointing
    lora = {k: getattr(cfg, k) for k in ("lora_r", "lora_alpha") if getattr(cfg, k) is not None}
    return base.replace(use_lora=cfg.use_lora, load_in_4bit=four_bit, gradient_checkpointing=checkpointing,
                        seed=cfg.seed, **lora)


def quantize_4bit(model, model_cfg: ModelConfig):
    """An in-memory model reloaded with NF4 4-bit linear layers (for the random ``smoke`` model)."""
    from transformers import AutoModelForCausalLM

    from pr1lib.models import model_kwargs

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
                w.data, w.quant_state = _convert_weight_packed_for_cpu_inverse(w.data, w.quant_state)
                undone += 1
    return undone


def load_sft_policy(model_cfg: ModelConfig, train_tag_rows: bool = True):
    """``(model, tokenizer, peft_config | None)``: the base policy with the six tags added (rows
    initialised as the mean of their pieces), 4-bit when asked, LoRA config with the tag rows."""
    from pr1lib.models import load_policy
    from pr1lib.tokens import add_parallel_tags, lora_kwargs_for_tags

    set_seed(model_cfg.seed)
    model, tokenizer, lora = load_policy(config=model_cfg)
    add_parallel_tags(tokenizer, model)
    if model_cfg.load_in_4bit and not getattr(model, "is_loaded_in_4bit", False):
        model = quantize_4bit(model, model_cfg)
    keep_4bit_differentiable(model)
    if model_cfg.load_in_4bit and lora is None:
        raise ValueError("4-bit weights cannot be trained directly: set use_lora=True (QLoRA)")
    if lora is not None and train_tag_rows:
        lora.trainable_token_indices = lora_kwargs_for_tags(tokenizer, model)["trainable_token_indices"]
    return model, tokenizer, lora


# ----------------------------------------------------------------------------- data
def load_coldstart(data: str | Path | None, cfg: SFTStageConfig, prompt_style: str, work_dir: Path):
    """The first ``cfg.train_n`` rows of the cold-start set saved by notebook 02 / ``coldstart`` (a
    folder, or its ``dataset/``); without one, build them with the rule teacher from ``cfg.source``."""
    from datasets import load_from_disk

    if data is not None:
        folder = Path(data)
        dataset = load_from_disk(str(folder / "dataset" if (folder / "dataset").is_dir() else folder))
        return dataset.select(range(min(cfg.train_n, len(dataset))))
    # Under accelerate, rank 0 builds and saves the set; the other ranks (same launcher, so the
    # same parent pid) wait for its marker and read what it saved.
    marker = work_dir / "coldstart" / f".built-by-{os.getppid()}"
    if is_main_process():
        dataset = build_coldstart(cfg, prompt_style, work_dir / "coldstart")
        marker.write_text("done")
        return dataset
    deadline = time.monotonic() + 1800
    while not marker.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank 0 did not build the cold-start set in {work_dir / 'coldstart'}")
        time.sleep(0.5)
    return load_from_disk(str(work_dir / "coldstart" / "dataset"))


def source_shares(source: str, n: int) -> dict[str, int]:
    """``cfg.source`` split into its parts, ``n`` rows shared as evenly as possible.

    >>> source_shares("tinygsm-easy+tinygsm-hard", 5)
    {'tinygsm-easy': 3, 'tinygsm-hard': 2}
    """
    from pr1lib.data import SOURCES

    parts = [p.strip() for p in source.split("+")]
    unknown = [p for p in parts if p not in SOURCES]
    if unknown or len(set(parts)) != len(parts):
        raise ValueError(f"source must be distinct names from {SOURCES} joined by '+', got {source!r}")
    return {p: n // len(parts) + (i < n % len(parts)) for i, p in enumerate(parts)}


def build_coldstart(cfg: SFTStageConfig, prompt_style: str, folder: Path):
    """The rule teacher's cold-start set from each part of ``cfg.source`` (``folder/<part>/`` when
    there are several), shuffled together with ``cfg.seed`` and saved in ``folder/dataset``."""
    from datasets import concatenate_datasets

    from pr1lib.coldstart import run_coldstart, save_dataset
    from pr1lib.config import ColdStartConfig

    shares = source_shares(cfg.source, cfg.train_n)
    config = ColdStartConfig(prompt_style=prompt_style, seed=cfg.seed)
    if len(shares) == 1:
        (name, n), = shares.items()
        return run_coldstart(config.replace(source=name, limit=n), folder).dataset
    parts = [run_coldstart(config.replace(source=name, limit=n), folder / name).dataset for name, n in shares.items()]
    dataset = concatenate_datasets(parts).shuffle(seed=cfg.seed)
    save_dataset(dataset, folder)
    return dataset


def with_plain_share(dataset, share: float, seed: int = 0):
    """``dataset`` with ``round(share * len)`` rows, drawn with ``seed``, turned into plain
    solutions (``format.linearize``); a ``parallel`` column says which rows kept their block
    (none is added when ``share`` is 0).

    >>> from datasets import Dataset
    >>> d = Dataset.from_dict({"completion": ["<Parallel><Path>a</Path><Path>b</Path></Parallel>"
    ...                                       "<Summary>s</Summary> end"] * 4})
    >>> with_plain_share(d, 0.5)["parallel"].count(False)
    2
    """
    from pr1lib.format import linearize

    if not 0.0 <= share <= 1.0:
        raise ValueError(f"plain_share must be within [0, 1], got {share}")
    if share == 0.0:
        return dataset
    plain = set(random.Random(seed).sample(range(len(dataset)), round(share * len(dataset))))

    def convert(row: dict, index: int) -> dict:
        keep = index not in plain
        return {"completion": row["completion"] if keep else linearize(row["completion"]), "parallel": keep}

    return dataset.map(convert, with_indices=True, keep_in_memory=True)


def sft_rows(dataset, tokenizer, max_length: int):
    """``(Dataset[prompt, completion], dropped)``: prompts rendered as the model sees them
    (``chat_prompt``), rows longer than ``max_length`` tokens (eos included) dropped, never cut."""
    from datasets import Dataset

    from pr1lib.prompts import chat_prompt

    rows, dropped = {"prompt": [], "completion": []}, 0
    for row in dataset:
        prompt = chat_prompt(row["question"], tokenizer, row.get("prompt_style") or "tiny")
        n = len(tokenizer(prompt + row["completion"], add_special_tokens=False)["input_ids"]) + 1
        if n > max_length:
            dropped += 1
            continue
        rows["prompt"].append(prompt)
        rows["completion"].append(row["completion"])
    return Dataset.from_dict(rows), dropped


def data_hash(dataset) -> str:
    """A short SHA-256 of the prompt-completion pairs, in order (goes on the run card).

    >>> from datasets import Dataset
    >>> len(data_hash(Dataset.from_dict({"prompt": ["a"], "completion": ["b"]})))
    16
    """
    digest = hashlib.sha256()
    for row in dataset:
        digest.update(json.dumps([row["prompt"], row["completion"]]).encode())
    return digest.hexdigest()[:16]


# ----------------------------------------------------------------------------- the unseen collator
def response_starts(labels: torch.Tensor) -> torch.Tensor:
    """Index of the first trained token per row: where the response begins (``L`` if none).

    >>> response_starts(torch.tensor([[-100, -100, 5, 6], [-100, -100, -100, -100]])).tolist()
    [2, 4]
    """
    trained = labels != -100  # (B, L)
    first = trained.int().argmax(dim=1)  # (B,) 0 when no token is trained
    return torch.where(trained.any(dim=1), first, labels.shape[1])  # (B,)


@dataclass
class ParallelCollator:
    """Right-pads TRL-prepared rows (``input_ids``, ``labels`` = -100 on the prompt) and adds the
    4D ``attention_mask`` and ``position_ids`` of ``mode``, structure read from the response on."""

    tokenizer: Any
    mode: str = "unseen"
    attn_implementation: str = "sdpa"
    dtype: torch.dtype = torch.float32  # eager's additive mask dtype (the model's compute dtype)

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        from torch.nn.utils.rnn import pad_sequence

        from pr1lib.structure import attention_inputs

        ids = [torch.as_tensor(e["input_ids"]) for e in examples]
        labels = [torch.as_tensor(e.get("labels", e["input_ids"])) for e in examples]
        input_ids = pad_sequence(ids, batch_first=True, padding_value=self.tokenizer.pad_token_id)  # (B, L)
        labels = pad_sequence(labels, batch_first=True, padding_value=-100)  # (B, L)
        real = pad_sequence([torch.ones(len(i), dtype=torch.bool) for i in ids], batch_first=True)  # (B, L)
        extra = attention_inputs(input_ids, self.tokenizer, self.mode, response_starts(labels),
                                 self.attn_implementation, padding_mask=real, dtype=self.dtype)
        return {"input_ids": input_ids, "labels": labels, **extra}  # mask (B, 1, L, L), positions (B, L)


# ----------------------------------------------------------------------------- trainer
class ParallelSFTTrainer(SFTTrainer):
    """``SFTTrainer`` whose loss is a per-sample token mean (``"sample"``) or TRL's token mean
    (``"token"``), computed from the fused LM head; works with a 4D mask (never sums it)."""

    loss_is_scaled_for_ga = True  # compute_loss divides by the accumulation steps itself

    def __init__(self, *args: Any, loss_reduction: str = "sample", **kwargs: Any):
        if loss_reduction not in ("sample", "token"):
            raise ValueError(f"loss_reduction must be 'sample' or 'token', got {loss_reduction!r}")
        self.loss_reduction = loss_reduction
        super().__init__(*args, **kwargs)
        expose_head_bias(self.model)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        out = model(**inputs, use_cache=False, fused_lm_head=True)
        nll, mask = -out.log_probs, out.label_mask.float()  # (B, L-1) each, 0 where label is -100
        steps = self.current_gradient_accumulation_steps if model.training else 1
        if self.loss_reduction == "sample":
            loss = (nll.sum(-1) / mask.sum(-1).clamp(min=1)).mean() / steps
        elif num_items_in_batch is not None and model.training:
            loss = nll.sum() / torch.as_tensor(num_items_in_batch).clamp(min=1)
        else:
            loss = nll.sum() / mask.sum().clamp(min=1)
        metrics = self._metrics["train" if model.training else "eval"]
        metrics["mean_token_accuracy"].append((out.is_top1.sum() / mask.sum().clamp(min=1)).item())
        metrics["num_tokens"].append(mask.sum().item())
        return (loss, out) if return_outputs else loss


def expose_head_bias(model) -> None:
    """TRL's fused LM head reads ``lm_head.weight`` and ``lm_head.bias``. PEFT's wrapper for trainable
    tag rows serves ``weight`` (base rows + trained tag rows) but not ``bias``: hand it the head's."""
    head = model.get_output_embeddings()
    if type(head).__name__ == "TrainableTokensWrapper" and "bias" not in head.__dict__:
        object.__setattr__(head, "bias", head.original_module.bias)  # a plain attribute, not a new parameter


def trl_args(cfg: SFTStageConfig, out_dir: str | Path, model_cfg: ModelConfig) -> SFTConfig:
    """TRL's ``SFTConfig`` from the stage config: no packing, no padding-free, completion-only."""
    cuda = torch.cuda.is_available()
    return SFTConfig(
        output_dir=str(out_dir), learning_rate=cfg.learning_rate, lr_scheduler_type=cfg.lr_scheduler_type,
        warmup_steps=cfg.warmup_ratio, num_train_epochs=cfg.num_train_epochs, max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps, max_length=cfg.max_length,
        weight_decay=cfg.weight_decay, adam_beta2=cfg.adam_beta2, max_grad_norm=cfg.max_grad_norm,
        logging_steps=cfg.logging_steps, seed=cfg.seed, data_seed=cfg.seed, save_strategy="no",
        report_to="none", completion_only_loss=True, packing=False, padding_free=False,
        remove_unused_columns=True, activation_checkpointing=model_cfg.gradient_checkpointing,
        bf16=cuda and model_cfg.dtype == "bfloat16", fp16=cuda and model_cfg.dtype == "float16",
        use_cpu=not cuda, disable_tqdm=True,
    )


def build_trainer(cfg: SFTStageConfig, model, tokenizer, peft_config, dataset, out_dir: str | Path,
                  model_cfg: ModelConfig, callbacks: Sequence[TrainerCallback] = ()) -> ParallelSFTTrainer:
    """The trainer for ``cfg.variant``: TRL's collator for ``seen``, ``ParallelCollator`` for ``unseen``."""
    if cfg.variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {cfg.variant!r}")
    keep_4bit_differentiable(model)
    collator = None
    if cfg.variant == "unseen":
        attn = getattr(model.config, "_attn_implementation", None) or "sdpa"
        collator = ParallelCollator(tokenizer, "unseen", attn, getattr(torch, model_cfg.dtype))
    return ParallelSFTTrainer(
        model=model, args=trl_args(cfg, out_dir, model_cfg), data_collator=collator, train_dataset=dataset,
        processing_class=tokenizer, peft_config=peft_config, callbacks=list(callbacks),
        loss_reduction=cfg.loss_reduction,
    )


# ----------------------------------------------------------------------------- live loss
class LossLog(TrainerCallback):
    """Keeps one row per logging step and calls ``on_update(rows)`` after each (live plots)."""

    def __init__(self, on_update: Callable[[list[dict]], None] | None = None):
        self.rows: list[dict[str, Any]] = []
        self.on_update = on_update

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            keep = ("loss", "learning_rate", "mean_token_accuracy", "grad_norm")
            self.rows.append({"step": state.global_step, **{k: logs[k] for k in keep if k in logs}})
            if self.on_update is not None:
                self.on_update(self.rows)


def loss_figure(curves: dict[str, list[dict]], title: str = "SFT loss (completion tokens)"):
    """A plotly line per run: training loss against the optimizer step."""
    import plotly.graph_objects as go

    fig = go.Figure(layout=dict(title=title, height=320, margin=dict(t=40, b=40)))
    for name, rows in curves.items():
        fig.add_scatter(x=[r["step"] for r in rows], y=[r["loss"] for r in rows], mode="lines+markers", name=name)
    fig.update_xaxes(title="optimizer step")
    fig.update_yaxes(title="loss")
    return fig


class LiveLossPlot:
    """One notebook figure, redrawn as runs log: ``trainer callbacks=[plot.callback("seen")]``."""

    def __init__(self, title: str = "SFT loss (completion tokens)"):
        from IPython.display import display

        self.title, self.curves = title, {}
        self.handle = display(loss_figure(self.curves, title), display_id=True)

    def callback(self, name: str) -> LossLog:
        def redraw(rows: list[dict]) -> None:
            self.curves[name] = list(rows)
            self.handle.update(loss_figure(self.curves, self.title))

        return _PlotLog(redraw)


class _PlotLog(LossLog):
    """A ``LossLog`` of its own class, so a trainer keeps it next to the run's own ``LossLog``."""


def mask_figure(batches: dict[str, dict], tokenizer, start: int = 0):
    """Side-by-side heatmaps of each collated batch's first mask, from token ``start`` on
    (rows = queries, columns = keys, dark = may attend)."""
    from plotly.subplots import make_subplots

    ids = next(iter(batches.values()))["input_ids"][0, start:].tolist()
    labels = [f"{i}:{tokenizer.decode([t])}" for i, t in enumerate(ids, start)]
    fig = make_subplots(1, len(batches), subplot_titles=list(batches), horizontal_spacing=0.08)
    for col, batch in enumerate(batches.values(), 1):
        allowed = batch["attention_mask"][0, 0, start:, start:].int().tolist()  # (L', L')
        fig.add_heatmap(z=allowed, x=labels, y=labels, colorscale=[[0, "#f4f4f4"], [1, "#1f4e79"]],
                        showscale=False, row=1, col=col)
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    fig.update_layout(height=420, width=880, margin=dict(t=40, b=10, l=10, r=10))
    return fig


# ----------------------------------------------------------------------------- evaluation
def held_out_problems(n: int, seed: int = 0) -> list[dict]:
    """``n`` TinyGSM-easy *test* problems (disjoint from every training split)."""
    from pr1lib.tasks import generate

    return generate(n, "easy", "test", seed)


def eval_mode(cfg: SFTStageConfig) -> str:
    """``cfg.eval_mode``, else the mode that matches how ``cfg.variant`` trains (``variant_mode``).

    >>> eval_mode(SFTStageConfig(variant="unseen")), eval_mode(SFTStageConfig(variant="seen"))
    ('forked', 'seen')
    """
    return cfg.eval_mode or variant_mode(cfg.variant)


def rollout_completions(model, tokenizer, prompts: list[str], profile: str | None, mode: str = "forked",
                        max_new_tokens: int = 256, batch_size: int = 32) -> list[tuple[str, int]]:
    """``(text, n_tokens)`` per prompt, greedy, from ``pr1lib.rollout`` (the engine GRPO samples with)."""
    from pr1lib.config import RolloutConfig
    from pr1lib.rollout import generate

    rcfg = RolloutConfig.for_profile(profile, mode=mode, temperature=0.0, max_completion_length=max_new_tokens)
    rcfg = rcfg.replace(max_path_length=min(rcfg.max_path_length, max_new_tokens))
    was_training, out = model.training, []
    model.eval()
    try:
        for i in range(0, len(prompts), batch_size):
            done = generate(model, tokenizer, prompts[i:i + batch_size], rcfg)
            out += [(r.text, len(r.completion_ids)) for r in done]
    finally:
        model.train(was_training)
    return out


def score_completions(texts: list[str], answers: list[str], lengths: list[int]) -> dict[str, float]:
    """Validity, parallel ratio, accuracy and mean length, parsed exactly as the rewards parse them.

    >>> s = score_completions(["<Parallel><Path>1</Path><Path>1</Path></Parallel>\\n<Summary>1</Summary>\\n"
    ...                        "Final Answer: 1", "Final Answer: 3"], ["#### 1", "#### 2"], [9, 3])
    >>> s["valid_block_rate"], s["valid_ratio"], s["parallel_ratio"], s["accuracy"], s["mean_length"]
    (0.5, 1.0, 0.5, 0.5, 6.0)
    """
    from pr1lib.rewards import terms

    parsed = [terms(t, a) for t, a in zip(texts, answers)]
    n = max(len(parsed), 1)
    return {
        "valid_block_rate": sum(t.valid and t.blocks > 0 for t in parsed) / n,  # >= 1 block, strictly valid
        "valid_ratio": sum(t.valid for t in parsed) / n,  # strictly valid, with or without blocks
        "parallel_ratio": sum(t.blocks > 0 for t in parsed) / n,  # >= 1 <Parallel>, valid or not
        "accuracy": sum(t.correct for t in parsed) / n,
        "mean_length": sum(lengths) / n,  # completion tokens
        "n": len(parsed),
    }


def evaluate_policy(model, tokenizer, problems: list[dict], prompt_style: str = "tiny", profile: str | None = None,
                    mode: str = "forked", max_new_tokens: int = 256) -> tuple[dict[str, float], list[dict]]:
    """``(metrics, samples)`` of greedy rollouts on ``problems`` (prompts as the SFT data renders them)."""
    from pr1lib.prompts import chat_prompt

    prompts = [chat_prompt(p["question"], tokenizer, prompt_style) for p in problems]
    done = rollout_completions(model, tokenizer, prompts, profile, mode, max_new_tokens)
    texts, lengths = [t for t, _ in done], [n for _, n in done]
    answers = [p["answer"] for p in problems]
    samples = [{"question": p["question"], "completion": t, "gold": p["answer"].rsplit("####", 1)[-1].strip()}
               for p, t in zip(problems, texts)]
    return score_completions(texts, answers, lengths), samples


# ----------------------------------------------------------------------------- checkpoints
def save_run(trainer, tokenizer, run_dir: Path, model_cfg: ModelConfig) -> dict[str, str]:
    """``adapter/`` (LoRA + tag rows) and ``merged/`` (adapter merged into a full-precision base).

    With a 4-bit base the merge goes into the unquantized base weights (the usual QLoRA export).
    """
    model, paths = trainer.model, {}
    if hasattr(model, "peft_config"):
        model.save_pretrained(run_dir / "adapter", save_embedding_layers=False)
        tokenizer.save_pretrained(run_dir / "adapter")
        paths["adapter"] = str(run_dir / "adapter")
        merged = merge_adapter(run_dir / "adapter", model_cfg)
    else:
        merged = model
    merged.save_pretrained(run_dir / "merged")
    tokenizer.save_pretrained(run_dir / "merged")
    paths["merged"] = str(run_dir / "merged")
    return paths


def merge_adapter(adapter_dir: Path, model_cfg: ModelConfig):
    """A fresh full-precision base with the tags, the saved adapter loaded on it, then merged."""
    from peft import PeftModel

    base, _, _ = load_sft_policy(model_cfg.replace(load_in_4bit=False, use_lora=False), train_tag_rows=False)
    return PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()


def load_run(run_dir: str | Path, merged: bool = True):
    """``(model, tokenizer)`` from a run folder, offline: the merged copy, or base + adapter."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run_dir = Path(run_dir)
    if not ((run_dir / "merged").is_dir() or (run_dir / "adapter").is_dir()):
        raise FileNotFoundError(f"{run_dir} is not a finished run folder: it has neither merged/ nor adapter/ "
                                "(pass the folder `sft` or `grpo` wrote, e.g. runs/sft-tiny-seen)")
    if merged or not (run_dir / "adapter").is_dir():
        folder = run_dir / "merged"
        return AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    model_cfg = ModelConfig(**_tuples(json.loads((run_dir / "model_config.json").read_text())))
    from peft import PeftModel

    base, _, _ = load_sft_policy(model_cfg.replace(use_lora=False), train_tag_rows=False)
    return PeftModel.from_pretrained(base, str(run_dir / "adapter")), AutoTokenizer.from_pretrained(run_dir / "adapter")


def _tuples(saved: dict[str, Any]) -> dict[str, Any]:
    saved = {k: v for k, v in saved.items() if k != "type"}
    return {k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()}


def write_loss_csv(rows: list[dict], path: Path) -> None:
    import pandas as pd

    pd.DataFrame(rows).to_csv(path, index=False)


# ----------------------------------------------------------------------------- one run
@dataclass
class SFTRun:
    """What ``run_sft`` made: the JSON-able ``result``, the trained model and the logs."""

    result: dict[str, Any]
    run_dir: Path
    model: Any = field(repr=False)
    tokenizer: Any = field(repr=False)
    loss: list[dict] = field(default_factory=list, repr=False)
    samples: dict[str, list[dict]] = field(default_factory=dict, repr=False)


def train_timed(trainer, quiet: bool = False) -> tuple[Any, float]:
    """``(TrainOutput, seconds)``; ``quiet`` drops the trainer's printed log lines (notebooks plot)."""
    if quiet:
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
    start, cpu = time.perf_counter(), time.process_time()
    out = trainer.train()
    out.metrics["train_cpu_seconds"] = time.process_time() - cpu  # all threads: shared cores inflate wall time
    return out, time.perf_counter() - start


def write_run_card(run_dir: Path, result: dict, cfg: SFTStageConfig, model_cfg: ModelConfig,
                   loss: list[dict]) -> None:
    """``run_card.json``: the result plus both configs, library versions and the loss log."""
    card = {**result, "config": cfg.to_dict(), "model_config": model_cfg.to_dict(),
            "environment": environment_report(result["profile"], cfg.seed).versions, "loss": loss}
    (run_dir / "run_card.json").write_text(json.dumps(card, indent=2, default=str))
    write_loss_csv(loss, run_dir / "loss.csv")


def run_sft(cfg: SFTStageConfig, profile: str | None = None, data: str | Path | None = None,
            out: str | Path | None = None, evaluate: bool = True,
            callbacks: Sequence[TrainerCallback] = (), before: dict | None = None,
            model_cfg: ModelConfig | None = None, quiet: bool = False) -> SFTRun:
    """Load, (evaluate), train, evaluate, save adapter + merged copy + run card. ``before`` reuses
    an earlier base-model evaluation (the base is the same for seen and unseen); ``model_cfg``
    replaces the profile's model (e.g. a local folder); ``quiet`` drops the printed log lines."""
    profile, start = check_profile(profile), time.perf_counter()
    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)  # small matrices: more threads only wait on each other
    run_dir = Path(out or runs_dir() / f"sft-{profile}-{cfg.variant}")
    run_dir.mkdir(parents=True, exist_ok=True)
    model_cfg = model_cfg or sft_model_config(cfg, profile)
    if is_main_process():
        cfg.save(run_dir / "config.json")
        model_cfg.save(run_dir / "model_config.json")
    model, tokenizer, peft_config = load_sft_policy(model_cfg, cfg.train_tag_rows)
    coldstart = with_plain_share(load_coldstart(data, cfg, model_cfg.prompt_style, run_dir), cfg.plain_share, cfg.seed)
    rows, dropped = sft_rows(coldstart, tokenizer, cfg.max_length)
    problems, samples = (held_out_problems(cfg.eval_n, cfg.seed) if evaluate else []), {}
    judge = dict(prompt_style=model_cfg.prompt_style, profile=profile, mode=eval_mode(cfg),
                 max_new_tokens=cfg.eval_max_new_tokens)
    if evaluate and before is None:
        before, samples["before"] = evaluate_policy(model, tokenizer, problems, **judge)
    log = LossLog()
    trainer = build_trainer(cfg, model, tokenizer, peft_config, rows, run_dir / "trainer", model_cfg,
                            [log, *callbacks])
    train_out, train_seconds = train_timed(trainer, quiet)
    after = None
    if evaluate:
        after, samples["after"] = evaluate_policy(trainer.model, tokenizer, problems, **judge)
    paths = save_run(trainer, tokenizer, run_dir, model_cfg)
    result = {
        "profile": profile, "variant": cfg.variant, "model": model_cfg.name, "load_in_4bit": model_cfg.load_in_4bit,
        "use_lora": model_cfg.use_lora, "train_rows": len(rows), "dropped_too_long": dropped,
        "data_hash": data_hash(rows), "steps": trainer.state.global_step, "train_loss": train_out.training_loss,
        "train_seconds": round(train_seconds, 1), "train_cpu_seconds": round(train_out.metrics["train_cpu_seconds"], 1),
        "seconds": round(time.perf_counter() - start, 1),
        "threads": torch.get_num_threads(), "before": before, "after": after, "run_dir": str(run_dir), **paths,
    }
    if is_main_process():
        write_run_card(run_dir, result, cfg, model_cfg, log.rows)
    return SFTRun(result, run_dir, trainer.model, tokenizer, log.rows, samples)


# ----------------------------------------------------------------------------- memory budget
# Shapes of the Qwen3 base models the GPU profiles use (their config.json files).
QWEN3_SHAPES = {
    "Qwen/Qwen3-0.6B-Base": dict(hidden=1024, layers=28, heads=16, kv_heads=8, head_dim=128, mlp=3072, vocab=151936),
    "Qwen/Qwen3-1.7B-Base": dict(hidden=2048, layers=28, heads=16, kv_heads=8, head_dim=128, mlp=6144, vocab=151936),
    "Qwen/Qwen3-4B-Base": dict(hidden=2560, layers=36, heads=32, kv_heads=8, head_dim=128, mlp=9728, vocab=151936),
}


def memory_estimate(shape: dict[str, int], batch: int, length: int, four_bit: bool, lora_r: int | None,
                    checkpointing: bool = True) -> dict[str, float]:
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
    shapes = [(h, q), (h, kv), (h, kv), (q, h), (h, shape["mlp"]), (h, shape["mlp"]), (shape["mlp"], h)]
    linear = n_layers * sum(a * b for a, b in shapes)
    embed = shape["vocab"] * h  # tied: one matrix
    weights = linear * (0.53 if four_bit else 2.0) + embed * 2.0
    trainable = n_layers * sum(lora_r * (a + b) for a, b in shapes) + 6 * h if lora_r else linear + embed
    tokens = batch * length
    acts = (n_layers * tokens * h * 2 + 34 * tokens * h) if checkpointing else n_layers * 34 * tokens * h
    gib = 2.0 ** 30
    parts = {"weights_gib": weights / gib, "trainable_gib": 16 * trainable / gib, "activations_gib": acts / gib,
             "mask_gib": batch * length * length / gib, "context_gib": 0.6}
    return {**{k: round(v, 2) for k, v in parts.items()}, "total_gib": round(sum(parts.values()), 2),
            "trainable_params_m": round(trainable / 1e6, 1)}


# ----------------------------------------------------------------------------- command line
def _cli(args) -> int:
    from pr1lib.cli import parse_overrides, print_json

    overrides = parse_overrides(args.overrides)
    if args.seed is not None:
        overrides["seed"] = args.seed
    if args.variant and args.variant != "both":
        overrides["variant"] = args.variant
    cfg = SFTStageConfig.for_profile(args.profile, **overrides)
    variants = VARIANTS if args.variant == "both" else (cfg.variant,)
    results, before = {}, None
    for variant in variants:
        cfg = cfg.replace(variant=variant)
        print(cfg, flush=True)
        out = Path(args.out) / variant if args.out and len(variants) > 1 else args.out
        run = run_sft(cfg, args.profile, args.data, out, before=before)
        before, results[variant] = run.result["before"], run.result
        print(f"{variant}: {json.dumps(run.result, default=str)}", flush=True)
    print_json(results[variants[0]] if len(variants) == 1 else results)
    return 0


def cli_register(sub) -> None:
    """``python -m pr1lib sft --profile tiny [--variant seen|unseen|both] [--data DIR] [--out DIR]``."""
    from pr1lib.cli import add_common

    p = sub.add_parser("sft", help="stage 1: cold-start SFT (LoRA, 4-bit where asked), seen or unseen",
                       description=__doc__.split("\n\n")[0])
    add_common(p)
    p.add_argument("--variant", choices=(*VARIANTS, "both"), default=None,
                   help="seen (plain causal), unseen (path-isolating mask), or both (default: the config's)")
    p.add_argument("--data", default=None,
                   help="cold-start set folder from `coldstart` (default: build one with the rule teacher)")
    p.set_defaults(func=_cli)

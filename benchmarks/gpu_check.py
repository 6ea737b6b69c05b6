"""GPU check: step time and peak memory of every stage on Qwen3-shaped 4-bit models; prints JSON.

    bash benchmarks/gpu_check.sh                       # one NVIDIA GPU, no network, < 8 minutes
    .venv/bin/python benchmarks/gpu_check.py --models qwen3-0.6b --budget-s 120
    .venv/bin/python benchmarks/gpu_check.py --tiny-shapes   # the same code on CPU with toy shapes

For each of Qwen3-0.6B, -1.7B and -4B the model is built from its config with random weights (no
download), its linear layers are quantized to NF4 4-bit in place (bitsandbytes; the tied
embedding / LM head stay bf16), and then it measures, each in its own ``try`` so that one
failure (say, out of memory) is recorded and the rest still runs:

- ``forked``: ``pr1lib.decoding.rollout.generate`` in forked mode (2 paths per block), a batch of
  prompts; the logits are steered (a fixed bias) so that a random model opens blocks and never ends
  early;
- ``sft``: a LoRA (r=16, all linear layers) + gradient-checkpointing step on one batch of
  prompt + completion tokens, loss on the completion (forward, backward, AdamW step);
- ``grpo_seen`` / ``grpo_unseen``: the GRPO policy update for one group of completions that hold
  two parallel blocks each: per-token log-probs under the causal (seen) or path-isolating (unseen,
  ``pr1lib.decoding.structure``) mask, a clipped policy-gradient loss, backward and an AdamW step.

Log-probs come from TRL's fused LM head (``trl.trainer.utils.add_fused_lm_head``), as in
``pr1lib.training.sft`` and ``pr1lib.training.grpo``: the ``(batch, length, vocab)`` logits are
never built.

Each entry has the median step time (``step_s``) and the peak CUDA memory of the step
(``peak_gib``, ``torch.cuda.max_memory_allocated``). Without CUDA the script prints
``{"skipped": true, ...}`` and exits 0, unless ``--tiny-shapes`` asks for the CPU dry run with
toy shapes (what the test runs). A time guard (``--budget-s``, default 400 s) skips what would
not fit and a hard alarm stops a step that overruns; both are recorded in the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the network
# run from a checkout without installing
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from pr1lib.config.arguments import Parser, out_file, seconds

STARTED = time.monotonic()  # the budget counts from here, imports included

# config.json of the Qwen3 base models (tied embeddings, head_dim 128, vocab 151936)
SHAPES: dict[str, dict[str, int]] = {
    "qwen3-0.6b": dict(
        hidden=1024, layers=28, heads=16, kv_heads=8, head_dim=128, mlp=3072, vocab=151936
    ),
    "qwen3-1.7b": dict(
        hidden=2048, layers=28, heads=16, kv_heads=8, head_dim=128, mlp=6144, vocab=151936
    ),
    "qwen3-4b": dict(
        hidden=2560, layers=36, heads=32, kv_heads=8, head_dim=128, mlp=9728, vocab=151936
    ),
}
# vocab: tokenizer's
TINY_SHAPE = dict(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, mlp=128, vocab=0)
MEASUREMENTS = ("forked", "sft", "grpo_seen", "grpo_unseen")


@dataclass(frozen=True)
class Sizes:
    """Batch shapes of the measurements (GPU defaults: the colab profile's SFT and a G=8 group)."""

    sft_batch: int = 4
    sft_len: int = 1024
    grpo_group: int = 8
    grpo_prompt: int = 256
    grpo_completion: int = 768
    rollout_prompts: int = 8
    path_len: int = 128
    completion_len: int = 384
    lora_r: int = 16
    repeats: int = 2  # timed steps after one warm-up step

    @classmethod
    def tiny(cls) -> "Sizes":
        return cls(
            sft_batch=2,
            sft_len=64,
            grpo_group=4,
            grpo_prompt=16,
            grpo_completion=64,
            rollout_prompts=2,
            path_len=8,
            completion_len=40,
            lora_r=4,
            repeats=1,
        )


# ---------------------------------------------------------------- time guard
class Budget:
    """Wall-clock budget: ``left()`` seconds remain; a SIGALRM stops a step that runs past the
    end."""

    def __init__(self, seconds: float, grace: float = 30.0, start: float | None = None):
        self.end = (time.monotonic() if start is None else start) + seconds
        self.grace = grace

    def left(self) -> float:
        return self.end - time.monotonic()

    def arm(self) -> None:
        if hasattr(signal, "SIGALRM"):
            signal.signal(signal.SIGALRM, _on_alarm)
            signal.alarm(max(1, int(self.left() + self.grace)))


def _on_alarm(signum: int, frame: Any) -> None:
    raise TimeoutError("hard time limit reached inside a step")


def guarded(name: str, fn: Callable[[], dict], budget: Budget, min_left: float) -> dict[str, Any]:
    """``fn()``'s dict, or ``{"skipped": why}`` / ``{"error": …}``: a failure never stops the
    run."""
    if budget.left() < min_left:
        return {
            "skipped": f"time budget: {budget.left():.0f} s left, {name} needs ~{min_left:.0f} s"
        }
    try:
        return fn()
    except Exception as err:  # recorded, then the next measurement runs
        return {
            "error": f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}",
            "where": traceback.format_exc(limit=-2).strip().splitlines()[-1][:200],
        }
    finally:
        free_memory()


# ---------------------------------------------------------------- device helpers
def cuda() -> bool:
    return torch.cuda.is_available()


def free_memory() -> None:
    import gc

    gc.collect()
    if cuda():
        torch.cuda.empty_cache()


def gib(n_bytes: float) -> float:
    return round(n_bytes / 2**30, 3)


def timed(
    step: Callable[[], Any], repeats: int, warmup: bool = True
) -> tuple[float, float | None, Any]:
    """(median seconds of ``repeats`` steps after one warm-up, peak GiB over them or None on CPU,
    last result)."""
    out = step() if warmup else None
    if cuda():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = step()
        if cuda():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    peak = gib(torch.cuda.max_memory_allocated()) if cuda() else None
    return statistics.median(times), peak, out


# ---------------------------------------------------------------- model
def tokenizer_with_tags():
    """The project's tiny tokenizer (offline) with the six tags: it names the tag ids, decodes
    rollouts, and bounds the ids the random model may sample."""
    from pr1lib.decoding.models import load_tiny_tokenizer
    from pr1lib.decoding.tokens import add_parallel_tags

    tok = load_tiny_tokenizer()
    add_parallel_tags(tok)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def qwen3_config(shape: dict[str, int], vocab: int):
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=vocab,
        hidden_size=shape["hidden"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"],
        head_dim=shape["head_dim"],
        intermediate_size=shape["mlp"],
        tie_word_embeddings=True,
        max_position_embeddings=4096,
        attn_implementation="sdpa",
    )


def quantize_in_place(model: Any, compute_dtype: torch.dtype) -> int:
    """Swap every ``nn.Linear`` but the LM head for an NF4 ``bnb.nn.Linear4bit`` holding the same
    (quantized) weights; returns how many layers were swapped. Layer by layer, so the peak is one
    bf16 model, not two."""
    import bitsandbytes as bnb

    device, swapped = next(model.parameters()).device, 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if not isinstance(child, torch.nn.Linear) or child is model.get_output_embeddings():
                continue
            new = bnb.nn.Linear4bit(
                child.in_features,
                child.out_features,
                bias=child.bias is not None,
                compute_dtype=compute_dtype,
                quant_type="nf4",
                device="meta",
            )
            new.weight = bnb.nn.Params4bit(
                child.weight.data, requires_grad=False, quant_type="nf4", compress_statistics=True
            ).to(device)
            if child.bias is not None:
                new.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
            setattr(parent, name, new)
            swapped += 1
    model.is_loaded_in_4bit = True  # PEFT reads this to wrap the 4-bit layers with its bnb LoRA
    try:  # CPU only: stop bitsandbytes from repacking weights into its inference-only layout
        from pr1lib.training.sft import keep_4bit_differentiable

        keep_4bit_differentiable(model)
    except ImportError:
        pass
    return swapped


def build_model(
    shape: dict[str, int], vocab: int, four_bit: bool = True
) -> tuple[Any, dict[str, Any]]:
    """A random-weight Qwen3 of ``shape`` on the device (bf16 on CUDA, fp32 on CPU), then NF4."""
    from transformers import AutoModelForCausalLM

    start, dtype = time.perf_counter(), torch.bfloat16 if cuda() else torch.float32
    torch.manual_seed(0)
    device = torch.device("cuda" if cuda() else "cpu")
    with device:
        model = AutoModelForCausalLM.from_config(qwen3_config(shape, vocab), dtype=dtype)
    model.to(device)  # a no-op unless from_config ignored the device context
    params = sum(p.numel() for p in model.parameters())
    info: dict[str, Any] = {
        "params_m": round(params / 1e6, 1),
        "dtype": str(dtype).replace("torch.", ""),
        "four_bit": False,
    }
    if four_bit:
        try:
            info["quantized_layers"] = quantize_in_place(model, dtype)
            info["four_bit"] = True
        except Exception as err:  # no bitsandbytes / no kernel: measure unquantized, say so
            info["quantization_error"] = f"{type(err).__name__}: {err}"[:300]
    free_memory()
    info["weights_gib"] = gib(torch.cuda.memory_allocated()) if cuda() else None
    info["build_s"] = round(time.perf_counter() - start, 2)
    return model, info


def add_lora(model: Any, r: int) -> tuple[Any, int]:
    """TRL's fused LM head (as the SFT and GRPO trainers add it), then PEFT LoRA on all linear
    layers and gradient checkpointing; returns (model, trainable params)."""
    from peft import LoraConfig, get_peft_model
    from trl.trainer.utils import add_fused_lm_head

    add_fused_lm_head(model)  # before PEFT, as TRL requires
    model.config.use_cache = False
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model = get_peft_model(
        model, LoraConfig(r=r, lora_alpha=2 * r, target_modules="all-linear", task_type="CAUSAL_LM")
    )
    model.train()
    return model, sum(p.numel() for p in model.parameters() if p.requires_grad)


def lora_param_count(shape: dict[str, int], r: int) -> int:
    """LoRA parameters on the seven linear layers of every block: r × (in + out) each.

    >>> lora_param_count(SHAPES["qwen3-0.6b"], 16)
    10092544
    """
    h, m = shape["hidden"], shape["mlp"]
    q, kv = shape["heads"] * shape["head_dim"], shape["kv_heads"] * shape["head_dim"]
    pairs = [(h, q), (h, kv), (h, kv), (q, h), (h, m), (h, m), (m, h)]
    return shape["layers"] * sum(r * (a + b) for a, b in pairs)


# ---------------------------------------------------------------- inputs
def parallel_sequences(
    tags: Any, rows: int, prompt: int, completion: int, vocab: int, seed: int = 0
) -> torch.Tensor:
    """``(rows, prompt + completion)`` random ids whose completion holds two blocks of two paths,
    each path ``completion // 8`` tokens long, tags included."""
    g = torch.Generator().manual_seed(seed)

    def text(n: int) -> list[int]:
        return torch.randint(1, vocab, (max(n, 0),), generator=g).tolist()

    p = max(completion // 8, 3)

    def path() -> list[int]:
        return [tags.path, *text(p - 2), tags.end_path]

    def block() -> list[int]:
        return [tags.parallel, *path(), *path(), tags.end_parallel, tags.summary, *text(2)] + [
            tags.end_summary
        ]

    out = []
    for _ in range(rows):
        body = text(p) + block() + text(p) + block()
        out.append(text(prompt) + (body + text(completion))[:completion])
    return torch.tensor(out)


def masked_pairs(ids: torch.Tensor, tags: Any, start: int, mode: str) -> int:
    """Query-key pairs the structure mask blocks beyond the causal mask (0 for ``seen``)."""
    from pr1lib.decoding.structure import attention_inputs

    # (B, L, L) bool
    mask = attention_inputs(ids, tags, mode, [start] * ids.shape[0])["attention_mask"][:, 0]
    causal = torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool).tril()
    return int((causal & ~mask.cpu()).sum())


# ---------------------------------------------------------------- measurements
def trainable(model: Any) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def lora_norm(model: Any) -> float:
    return float(
        sum(p.detach().float().norm() for n, p in model.named_parameters() if "lora_B" in n)
    )


def completion_labels(ids: torch.Tensor, prompt: int) -> torch.Tensor:
    """Labels that score the completion only (``-100`` on the first ``prompt`` tokens)."""
    labels = ids.clone()
    labels[:, :prompt] = -100
    return labels


def measure_sft(model: Any, tags: Any, vocab: int, sizes: Sizes) -> dict[str, Any]:
    """One QLoRA SFT step as ``pr1lib.training.sft`` takes it: TRL's fused LM head (no full logits),
    loss on the second half of each sequence (the completion), AdamW."""
    device, half = next(model.parameters()).device, sizes.sft_len // 2
    ids = parallel_sequences(tags, sizes.sft_batch, half, sizes.sft_len - half, vocab).to(device)
    labels = completion_labels(ids, half)
    opt = torch.optim.AdamW(trainable(model), lr=1e-4)
    before = lora_norm(model)

    def step() -> float:
        out = model(input_ids=ids, labels=labels, use_cache=False, fused_lm_head=True)
        loss = -out.log_probs.sum() / out.label_mask.sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    seconds, peak, loss = timed(step, sizes.repeats)
    return {
        "step_s": round(seconds, 4),
        "peak_gib": peak,
        "tokens": int(ids.numel()),
        "loss": round(loss, 4),
        "tokens_per_s": round(ids.numel() / seconds, 1),
        "lora_b_norm_change": round(lora_norm(model) - before, 6),
    }


def measure_grpo(model: Any, tags: Any, vocab: int, sizes: Sizes, mode: str) -> dict[str, Any]:
    """One GRPO policy update on a group as ``pr1lib.training.grpo`` runs it: completion log-probs
    from the fused LM head (``seen``: TRL's causal forward; ``unseen``: plus the 4D mask and
    positions of ``pr1lib.decoding.structure``), a clipped policy-gradient loss (token mean),
    AdamW."""
    from pr1lib.decoding.structure import attention_inputs

    device, prompt = next(model.parameters()).device, sizes.grpo_prompt
    ids = parallel_sequences(
        tags, sizes.grpo_group, prompt, sizes.grpo_completion, vocab, seed=1
    ).to(device)
    labels = completion_labels(ids, prompt)
    adv = torch.randn(sizes.grpo_group, 1, generator=torch.Generator().manual_seed(0)).to(device)
    extra = (
        {"attention_mask": torch.ones_like(ids)}
        if mode == "seen"
        else attention_inputs(ids, tags, "unseen", [prompt] * ids.shape[0], "sdpa")
    )
    opt = torch.optim.AdamW(trainable(model), lr=1e-6)

    def step() -> float:
        out = model(input_ids=ids, labels=labels, fused_lm_head=True, **extra)
        logp, mask = out.log_probs, out.label_mask.float()  # (G, L-1)
        # 1, with the gradient of logp (one update per batch)
        ratio = torch.exp(logp - logp.detach())
        per_token = -torch.min(ratio * adv, ratio.clamp(0.8, 1.28) * adv)
        loss = (per_token * mask).sum() / mask.sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return ((logp.detach() * mask).sum() / mask.sum()).item()

    seconds, peak, mean_logp = timed(step, sizes.repeats)
    return {
        "step_s": round(seconds, 4),
        "peak_gib": peak,
        "group": sizes.grpo_group,
        "tokens": int(ids.numel()),
        "mean_logp": round(mean_logp, 6),
        "masked_pairs": masked_pairs(ids.cpu(), tags, prompt, mode),
        "mask_gib": gib(ids.shape[0] * ids.shape[1] ** 2) if mode == "unseen" else 0.0,
    }


def measure_forked(model: Any, tok: Any, sizes: Sizes) -> dict[str, Any]:
    """Forked decoding (the RL rollout engine) of a batch of prompts with two paths per block."""
    from pr1lib.config import RolloutConfig
    from pr1lib.decoding.rollout import generate
    from pr1lib.decoding.steering import steer_logits
    from pr1lib.decoding.structure import tag_ids

    t, head = tag_ids(tok), model.lm_head
    bias = torch.full((model.config.vocab_size,), -1e4)
    bias[: len(tok)] = 0.0
    bias[t.parallel], bias[t.end_summary], bias[tok.eos_token_id] = 8.0, 4.0, -1e4
    undo = steer_logits(model, bias)
    cfg = RolloutConfig(
        mode="forked",
        num_paths=2,
        max_blocks=4,
        max_path_length=sizes.path_len,
        max_completion_length=sizes.completion_len,
    )
    prompts = [
        tok.encode(
            f"Problem {i}: Tom has {i + 3} apples and buys 5 more. How many?\nSolution:\n",
            add_special_tokens=False,
        )
        for i in range(sizes.rollout_prompts)
    ]
    model.eval()
    device = head.weight.device
    try:
        with torch.no_grad():
            # warm-up, short
            generate(model, tok, prompts[:1], cfg.replace(max_completion_length=8))
            seconds, peak, outs = timed(
                lambda: generate(
                    model, tok, prompts, cfg, generator=torch.Generator(device).manual_seed(0)
                ),
                1,
                warmup=False,
            )
    finally:
        undo()
    tokens = sum(len(r.completion_ids) for r in outs)
    return {
        "seconds": round(seconds, 3),
        "peak_gib": peak,
        "prompts": len(prompts),
        "completion_tokens": tokens,
        "tokens_per_s": round(tokens / seconds, 1),
        "blocks": sum(r.blocks for r in outs),
        "num_paths": cfg.num_paths,
        "max_completion_length": cfg.max_completion_length,
    }


# ---------------------------------------------------------------- driver
def check_model(
    name: str, shape: dict[str, int], tok: Any, sizes: Sizes, budget: Budget, four_bit: bool = True
) -> dict[str, Any]:
    """Build one model and run every measurement on it; never raises."""
    from pr1lib.decoding.structure import tag_ids

    vocab = shape["vocab"] or len(tok)
    shape = {**shape, "vocab": vocab}
    entry: dict[str, Any] = {"shape": shape}
    model = None
    try:
        model, entry["model"] = build_model(shape, vocab, four_bit)
        tags, text_vocab = tag_ids(tok), min(tag_ids(tok)[:6])
        min_left = 5.0 if not cuda() else 20.0
        entry["forked"] = guarded(
            "forked", lambda: measure_forked(model, tok, sizes), budget, min_left
        )
        model, entry["lora_params"] = add_lora(model, sizes.lora_r)
        entry["lora_params_formula"] = lora_param_count(shape, sizes.lora_r)
        entry["sft"] = guarded(
            "sft", lambda: measure_sft(model, tags, text_vocab, sizes), budget, min_left
        )
        for mode in ("seen", "unseen"):
            entry[f"grpo_{mode}"] = guarded(
                f"grpo_{mode}",
                lambda: measure_grpo(model, tags, text_vocab, sizes, mode),
                budget,
                min_left,
            )
    except Exception as err:  # building failed (e.g. out of memory): record it, go on
        entry["error"] = f"{type(err).__name__}: {str(err)[:300]}"
    finally:
        model = None  # drop the last reference before freeing the memory
        free_memory()
    return entry


def environment() -> dict[str, Any]:
    import importlib.metadata as md

    env = {
        "torch": torch.__version__,
        "cuda": cuda(),
        "device": torch.cuda.get_device_name(0) if cuda() else "cpu",
    }
    for pkg in ("transformers", "peft", "bitsandbytes"):
        try:
            env[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            env[pkg] = None
    if cuda():
        env["total_gib"] = gib(torch.cuda.get_device_properties(0).total_memory)
    return env


def run(
    models: list[str] | None = None,
    tiny: bool = False,
    budget_s: float = 400.0,
    four_bit: bool = True,
    out: str | None = None,
    start: float | None = None,
) -> dict[str, Any]:
    """The whole check as one dict (see the module docstring); the budget counts from ``start``
    (``time.monotonic()``; default: now)."""
    start = time.perf_counter()
    if not cuda() and not tiny:
        return {
            "skipped": True,
            "reason": "no CUDA device (use --tiny-shapes for the CPU dry run)",
            "environment": environment(),
        }
    sizes = Sizes.tiny() if tiny else Sizes()
    budget = Budget(budget_s, start=start)
    budget.arm()
    result: dict[str, Any] = {
        "skipped": False,
        "tiny_shapes": tiny,
        "sizes": asdict(sizes),
        "budget_s": budget_s,
        "environment": environment(),
        "models": {},
        "note": "measured; weights are random",
    }
    try:
        tok = tokenizer_with_tags()
        plan = {"tiny": TINY_SHAPE} if tiny else {m: SHAPES[m] for m in (models or list(SHAPES))}
        for name, shape in plan.items():
            if budget.left() < (5 if tiny else 45):
                result["models"][name] = {"skipped": f"time budget: {budget.left():.0f} s left"}
                continue
            result["models"][name] = check_model(name, shape, tok, sizes, budget, four_bit)
            _save(result, out)
    finally:
        if hasattr(signal, "SIGALRM"):
            signal.alarm(0)
    result["seconds"] = round(time.perf_counter() - start, 1)
    _save(result, out)
    return result


def _save(result: dict[str, Any], out: str | None) -> None:
    """Write what we have so far (a killed run still leaves its partial JSON)."""
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=2))


def arguments() -> argparse.ArgumentParser:
    """This script's flags, each checked as it is parsed (a bad one: one line, exit 2)."""
    p = Parser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--models", default=",".join(SHAPES), help=f"comma list from {', '.join(SHAPES)}"
    )
    p.add_argument(
        "--tiny-shapes", action="store_true", help="toy shapes, runs on CPU (the test's dry run)"
    )
    p.add_argument(
        "--budget-s", type=seconds, default=400.0, help="wall-clock budget; later steps are skipped"
    )
    p.add_argument("--no-4bit", action="store_true", help="measure bf16 weights instead of NF4")
    p.add_argument(
        "--out",
        type=out_file,
        default=None,
        help="also write the JSON here (updated after every model)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    p = arguments()
    args = p.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in SHAPES]
    if unknown:
        p.error(f"unknown model(s) {unknown}; choose from {list(SHAPES)}")
    result = run(models, args.tiny_shapes, args.budget_s, not args.no_4bit, args.out, start=STARTED)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How far the decoding engine runs from this machine's limits, tiny model on one CPU thread;
prints one JSON object (last line).

    .venv/bin/python benchmarks/limit.py [--repeats 3] [--new 128] [--threads 1] [--quick]
    .venv/bin/python -m pr1lib bench limit          # the same, through the CLI

Measured: the engine's tokens/s (``seen`` mode, eos suppressed so every row decodes exactly
``--new`` tokens after its own prompt of about 50 tokens; median over ``--repeats``) at batch 8,
64 and 256, beside two limits:

- **the arithmetic limit**: FLOPs per token from the model's shapes, ``2 x`` the weights a token
  passes through (per layer ``E (H + 2 H_kv) D`` for q, k, v, ``H D E`` for o, ``3 E I`` for the
  MLP; the output layer ``E V``) plus attention, ``4 L H D ctx`` (``q kᵀ`` and ``p v`` over
  ``ctx`` keys, ``ctx`` the run's mean context: prompt + new / 2). This machine's matmul rate is
  measured on one thread: a float32 1024 x 1024 x 1024 GEMM (best of 5). ``limit_tokens_per_s``
  = that rate / FLOPs per token; ``engine_over_limit`` = the engine's tokens/s over it.
- **what bounds it instead**: a decoding step's seconds (``step_ms``, everything included) split
  into shares: ``linear_share`` and ``attention_share``, the model's matmuls and its attention
  (the same batched ``q kᵀ``, softmax, ``p v`` over a cache of the run's size) each timed alone
  on random data (best of runs: a lower bound); ``step_rest_share``, the rest of the model's step
  (norms, rotary, residuals, cache writes, one dispatch per op: timed around ``RowStreams.step``);
  ``decide_share``, sampling and the rules (``Engine.decide``); ``loop_rest_share``, the prefill,
  regroups and bookkeeping. Attention does almost no arithmetic per byte: each token reads every
  cached key and value of its row, ``2 L H_kv D x 4`` bytes per key of context;
  ``kv_read_gb_per_s`` is the rate it reads them at, ``attention_limit_tokens_per_s`` the
  tokens/s if a step were nothing but its attention.

The model is ``data/tiny-base`` when it exists, else a random model of the same shape.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

from pr1lib.cli.bench import load_bench_script
from pr1lib.config import RolloutConfig
from pr1lib.config.arguments import Parser, count
from pr1lib.config.checks import MAX_THREADS, MAX_TOKENS
from pr1lib.config.runtime import quiet_known_noise
from pr1lib.decoding.engine import Engine
from pr1lib.decoding.rollout import generate
from pr1lib.decoding.rowcache import RowStreams
from pr1lib.decoding.steering import steer_logits

BATCHES = (8, 64, 256)
GEMM = 1024  # the square GEMM that measures the matmul rate


def best(fn: Callable[[], Any], repeats: int) -> float:
    """The fastest of ``repeats`` timed calls (after one warm-up call), in seconds."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def matmul_flops(repeats: int = 5) -> float:
    """This machine's float32 matmul FLOP/s on the current threads (a square GEMM, the best)."""
    a, b = torch.randn(GEMM, GEMM), torch.randn(GEMM, GEMM)
    return 2 * GEMM**3 / best(lambda: a @ b, repeats)


def shapes(model: Any) -> dict[str, int]:
    c = model.config
    return dict(
        layers=c.num_hidden_layers,
        hidden=c.hidden_size,
        heads=c.num_attention_heads,
        kv_heads=c.num_key_value_heads,
        head_dim=c.head_dim,
        inner=c.intermediate_size,
        vocab=c.vocab_size,
    )


def flops_per_token(model: Any, ctx: float) -> float:
    """FLOPs of one token through the model at ``ctx`` keys of context (see the docstring)."""
    s = shapes(model)
    e, d, h, g = s["hidden"], s["head_dim"], s["heads"], s["kv_heads"]
    per_layer = e * (h + 2 * g) * d + h * d * e + 3 * e * s["inner"]
    weights = s["layers"] * per_layer + e * s["vocab"]
    return 2 * weights + 4 * s["layers"] * h * d * ctx


def prompts(tok: Any, batch: int) -> list[list[int]]:
    """``batch`` distinct prompts of about 50 tokens."""
    base = "Question {}: Tom has {} apples and buys {} more. How many apples does he have now?"
    return [
        tok.encode(base.format(i, i % 97, i % 13) * 2, add_special_tokens=False)[:50]
        for i in range(batch)
    ]


def engine_rate(model: Any, tok: Any, batch: int, new: int, repeats: int) -> dict[str, float]:
    """Seen-mode decoding, every row exactly ``new`` tokens: tokens/s (median run), the mean
    context, and the seconds per step spent in the model's step and in ``decide`` (sampling and
    the rules), from the median run."""
    rows = prompts(tok, batch)
    cfg = RolloutConfig(mode="seen", max_completion_length=new, max_blocks=10**6)
    generate(model, tok, rows, cfg, generator=torch.Generator().manual_seed(0))  # warm-up
    runs = []
    for r in range(repeats):
        with clocked(RowStreams, "step") as step, clocked(Engine, "decide") as decide:
            start = time.perf_counter()
            out = generate(model, tok, rows, cfg, generator=torch.Generator().manual_seed(r))
            runs.append((time.perf_counter() - start, step[0], decide[0]))
        assert all(len(x.completion_ids) == new for x in out)
    wall, step, decide = sorted(runs)[len(runs) // 2]
    ctx = statistics.fmean(len(p) for p in rows) + new / 2
    return {
        "tokens_per_s": batch * new / wall,
        "ctx": ctx,
        "step_s": step / new,
        "decide_s": decide / new,
    }


@contextmanager
def clocked(owner: type, name: str) -> Iterator[list[float]]:
    """Within: ``owner.name`` adds its seconds to the yielded one-item list."""
    real, total = getattr(owner, name), [0.0]

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            total[0] += time.perf_counter() - start

    setattr(owner, name, timed)
    try:
        yield total
    finally:
        setattr(owner, name, real)


def split(model: Any, batch: int, ctx: int, repeats: int) -> dict[str, float]:
    """Seconds per step of the model's linears and of its attention at ``batch`` rows over
    ``ctx`` keys, each timed alone."""
    s = shapes(model)
    e, d, h, g, n = s["hidden"], s["head_dim"], s["heads"], s["kv_heads"], s["layers"]
    outs_ins = [((h + 2 * g) * d, e), (e, h * d), (2 * s["inner"], e), (e, s["inner"])] * n
    pairs = [(torch.randn(batch, i), torch.randn(o, i)) for o, i in outs_ins]
    pairs.append((torch.randn(batch, e), torch.randn(s["vocab"], e)))  # the output layer

    def linears() -> None:
        for x, w in pairs:
            torch.nn.functional.linear(x, w)

    keys, values = torch.randn(batch * g, ctx, d), torch.randn(batch * g, ctx, d)
    q, bias = torch.randn(batch * g, h // g, d), torch.zeros(batch * g, h // g, ctx)

    def attention() -> None:
        for _ in range(n):
            scores = torch.baddbmm(bias, q, keys.transpose(1, 2), alpha=d**-0.5)
            torch.bmm(torch.softmax(scores, dim=-1), values)

    kv_bytes = 2 * n * batch * g * ctx * d * 4
    att = best(attention, repeats)
    return {
        "linear_s": best(linears, repeats),
        "attention_s": att,
        "kv_read_gb_per_s": kv_bytes / att / 1e9,
    }


def run(repeats: int = 3, new: int = 128, threads: int = 1, quick: bool = False) -> dict[str, Any]:
    """All measurements as one dict (``quick``: 16 new tokens, one repeat)."""
    torch.set_num_threads(threads)
    if quick:
        repeats, new = 1, 16
    model, tok, source = load_bench_script("rollout").load_model()
    rate = matmul_flops()
    undo = steer_logits(model, {tok.eos_token_id: -30.0})
    out: dict[str, Any] = {
        "benchmark": "limit",
        "model_source": source,
        "threads": threads,
        "repeats": repeats,
        "new_tokens": new,
        "shapes": shapes(model),
        "matmul_gflops": round(rate / 1e9, 1),
    }
    try:
        with torch.no_grad():
            for batch in BATCHES:
                out[str(batch)] = measure(model, tok, batch, new, repeats, rate)
    finally:
        undo()
    out["engine_over_limit"] = {b: out[str(b)]["engine_over_limit"] for b in map(str, BATCHES)}
    return out


def measure(model: Any, tok: Any, batch: int, new: int, repeats: int, rate: float) -> dict:
    """The engine at ``batch`` rows beside the arithmetic limit, and where a step's time goes:
    the model's step (its linears, its attention, the rest: norms, rotary, residuals, cache
    writes, dispatch), ``decide``, and the rest of the loop (prefill, regroups, bookkeeping)."""
    got = engine_rate(model, tok, batch, new, repeats)
    flops = flops_per_token(model, got["ctx"])
    parts = split(model, batch, round(got["ctx"]), max(repeats, 3))
    step = batch / got["tokens_per_s"]  # seconds per decoding step, everything included
    shares = {
        "linear_share": parts["linear_s"],
        "attention_share": parts["attention_s"],
        "step_rest_share": got["step_s"] - parts["linear_s"] - parts["attention_s"],
        "decide_share": got["decide_s"],
        "loop_rest_share": step - got["step_s"] - got["decide_s"],
    }
    return {
        "engine_tokens_per_s": round(got["tokens_per_s"], 1),
        "mean_context": round(got["ctx"], 1),
        "flops_per_token": round(flops),
        "limit_tokens_per_s": round(rate / flops, 1),
        "engine_over_limit": round(got["tokens_per_s"] * flops / rate, 4),
        "step_ms": round(step * 1e3, 3),
        **{key: round(value / step, 3) for key, value in shares.items()},
        "kv_read_gb_per_s": round(parts["kv_read_gb_per_s"], 2),
        "attention_limit_tokens_per_s": round(batch / parts["attention_s"], 1),
    }


def arguments() -> argparse.ArgumentParser:
    """This script's flags, each checked as it is parsed (a bad one: one line, exit 2)."""
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=count(1), default=3)
    parser.add_argument(
        "--new", type=count(1, MAX_TOKENS), default=128, help="tokens decoded per row"
    )
    parser.add_argument("--threads", type=count(1, MAX_THREADS), default=1)
    parser.add_argument("--quick", action="store_true", help="16 tokens, one repeat (a smoke run)")
    return parser


def main(argv: list[str] | None = None) -> None:
    quiet_known_noise()  # the notes the CLI drops (pr1lib.config.runtime.NOISE_LOGS)
    args = arguments().parse_args(argv)
    print(json.dumps(run(args.repeats, args.new, args.threads, args.quick)))


if __name__ == "__main__":
    main()

"""Speed of evaluation, the cache before packed rows against today's, on the shipped TinyWorld
models; prints one JSON object (last line).

    .venv/bin/python benchmarks/eval.py [--n 300] [--k 8] [--repeats 1] [--threads 1] [--quick]
    .venv/bin/python -m pr1lib bench eval          # the same, through the CLI

Each variant samples ``--k`` completions of each of the first ``--n`` TinyWorld hard problems at
T = 1 (the tiny profile's lengths for TinyWorld: 384 tokens, paths of 128), 16 prompts (16 x k
rows) per ``generate`` call: ``seen`` is ``data/tinyworld-sft`` in ``reread`` mode, ``unseen``
is ``data/tinyworld-sft-unseen`` in ``forked`` mode. Two paths, interleaved (``--repeats``
rounds, medians), on ``--threads`` torch threads (default ``profiles.TINY_THREADS``, the eval
command's for the tiny profile):

- ``before``: the shared-column cache (``pr1lib.decoding.kvcache.Streams`` with ``decode.step``),
  the engine's only cache before packed rows.
- ``after``: packed rows (``pr1lib.decoding.rowcache.RowStreams`` with ``decode.row_step``), the
  default for these models now.

Reported per variant and path: completions per second of wall and of CPU time (other jobs on a
shared machine disturb CPU time less), accuracy (mean@k, the official grader), the parallel
ratio and mean length. Ratios: ``seen_speedup``, ``unseen_speedup`` (completions/s after over
before) and ``speedup``, their geometric mean (``cpu_...`` the same on CPU time). The algorithm
is the same, and so are the samples: ``same_samples`` (every completion text equal) and
``accuracy_diff`` (after - before, paired over problems; 0 when the samples agree).

``command_check``: the ``eval`` command used to leave torch's default thread count (all cores)
on the shared cache; ``run_eval`` now runs the tiny profile on ``runtime.profile_threads``'s
count on packed rows. On the first ``THREADS_N`` problems of the seen variant: the old command's
way against today's, ``command_speedup``; the old way on one thread, ``one_thread_speedup``;
today's on one thread against today's, ``threads_speedup`` (all depend on what else holds the
cores: two threads wait on each other when another job holds one).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from typing import Any

import torch

from pr1lib.config import EvalConfig
from pr1lib.config.arguments import Parser, count
from pr1lib.config.checks import MAX_SAMPLES, MAX_THREADS
from pr1lib.config.profiles import TINY_THREADS
from pr1lib.config.runtime import profile_threads, quiet_known_noise, set_threads, usable_cores
from pr1lib.data.evalsets import load_benchmark
from pr1lib.evaluation.evaluate import evaluate_records, load_for_eval
from pr1lib.evaluation.metrics import summarize
from pr1lib.evaluation.samplers import rollout_generate_fn
from pr1lib.format.prompts import chat_prompt
from pr1lib.worlds.tasks import MAX_PROBLEMS

VARIANTS = {
    "seen": ("data/tinyworld-sft", "reread"),
    "unseen": ("data/tinyworld-sft-unseen", "forked"),
}
PATHS = {"before": "shared", "after": None}  # pr1lib.decoding.engine.pick_streams: the cache
THREADS_N = 32  # problems of the command check


def eval_config(mode: str, n: int, k: int) -> EvalConfig:
    """The evaluation measured: TinyWorld hard, k samples at T = 1, the TinyWorld lengths."""
    return EvalConfig.for_profile(
        "tiny",
        benchmark="tinyworld-hard",
        n=n,
        k=k,
        mode=mode,
        temperature=1.0,
        max_completion_length=384,
        max_path_length=128,
        batch_size=16,
        engine="rollout",
        prompt_style="tiny",
    )


def sample(model: Any, tok: Any, cfg: EvalConfig, records: list[dict], cache: Any) -> dict:
    """One evaluation of ``records``: its rows, wall and CPU seconds."""
    fn = rollout_generate_fn(model, tok, cfg, cache=cache)
    prompt = lambda q: chat_prompt(q, tok, cfg.prompt_style)  # noqa: E731
    wall, cpu = time.perf_counter(), time.process_time()
    rows = evaluate_records(
        records, fn, cfg.k, cfg.benchmark, prompt, None, cfg.batch_size, tok, False, cfg.mode
    )
    return {"rows": rows, "wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}


def paired(before: list[dict], after: list[dict]) -> tuple[float, float]:
    """Mean and standard error of the per-problem accuracy after minus before."""
    diffs = [
        statistics.fmean(b["correct_official"]) - statistics.fmean(a["correct_official"])
        for a, b in zip(before, after)
    ]
    se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else 0.0
    return statistics.fmean(diffs), se


def texts(rows: list[dict]) -> list[str]:
    return [s["text"] for row in rows for s in row["samples"]]


def path_numbers(runs: list[dict], n: int, k: int) -> dict[str, Any]:
    """Medians of a path's runs and the numbers of its last run's samples."""
    wall, cpu = (statistics.median(r[key] for r in runs) for key in ("wall", "cpu"))
    stats = summarize(runs[-1]["rows"])
    return {
        "completions_per_s": round(n * k / wall, 2),
        "cpu_completions_per_s": round(n * k / cpu, 2),
        "seconds": round(wall, 2),
        **{key: round(stats[key], 4) for key in ("accuracy", "parallel_ratio", "mean_length")},
    }


def bench_variant(name: str, n: int, k: int, repeats: int) -> dict[str, Any]:
    """Both paths on one model, ``repeats`` interleaved rounds."""
    folder, mode = VARIANTS[name]
    model, tok = load_for_eval(folder, "tiny", lambda *a, **kw: None)
    cfg = eval_config(mode, n, k)
    records = load_benchmark(cfg.benchmark, n, seed=cfg.seed)
    runs: dict[str, list[dict]] = {p: [] for p in PATHS}
    for _ in range(repeats):
        for path, cache in PATHS.items():
            runs[path].append(sample(model, tok, cfg, records, cache))
    out: dict[str, Any] = {"model": folder, "mode": mode}
    out.update({path: path_numbers(done, n, k) for path, done in runs.items()})
    before, after = runs["before"][-1]["rows"], runs["after"][-1]["rows"]
    diff, se = paired(before, after)
    out.update(accuracy_diff=round(diff, 4), accuracy_diff_se=round(se, 4))
    out["same_samples"] = texts(before) == texts(after)
    for key in ("completions_per_s", "cpu_completions_per_s"):
        speed = out["after"][key] / out["before"][key]
        out["speedup" if key == "completions_per_s" else "cpu_speedup"] = round(speed, 3)
    return out


def bench_command(n: int, k: int) -> dict[str, Any]:
    """The old ``eval`` command's way (shared cache, torch's default threads) against today's
    (packed rows, ``profile_threads("tiny")``), and each on one thread (seen variant)."""
    folder, mode = VARIANTS["seen"]
    model, tok = load_for_eval(folder, "tiny", lambda *a, **kw: None)
    cfg = eval_config(mode, n, k)
    records = load_benchmark(cfg.benchmark, n, seed=cfg.seed)
    before, default = torch.get_num_threads(), usable_cores()
    set_threads(profile_threads("tiny"))  # as run_eval sets them
    new = torch.get_num_threads()
    ways = {
        "old": (default, "shared"),
        "old_one_thread": (1, "shared"),
        "new": (new, None),
        "new_one_thread": (1, None),
    }
    seconds = {}
    try:
        for way, (threads, cache) in ways.items():
            torch.set_num_threads(threads)
            seconds[way] = sample(model, tok, cfg, records, cache)["wall"]
    finally:
        torch.set_num_threads(before)
    return {
        "n": n,
        "k": k,
        "default_threads": default,
        "new_threads": new,
        **{f"{way}_seconds": round(s, 2) for way, s in seconds.items()},
        "command_speedup": round(seconds["old"] / seconds["new"], 3),
        "one_thread_speedup": round(seconds["old"] / seconds["old_one_thread"], 3),
        "threads_speedup": round(seconds["new_one_thread"] / seconds["new"], 3),
    }


def run(
    n: int = 300, k: int = 8, repeats: int = 1, threads: int = TINY_THREADS, quick: bool = False
) -> dict[str, Any]:
    """All measurements as one dict (``quick``: 8 problems x 2 samples, one round)."""
    torch.set_num_threads(threads)
    if quick:
        n, k, repeats = 8, 2, 1
    out: dict[str, Any] = {
        "benchmark": "eval",
        "n": n,
        "k": k,
        "threads": threads,
        "repeats": repeats,
        "paths": list(PATHS),
    }
    for name in VARIANTS:
        out[name] = bench_variant(name, n, k, repeats)
        out[f"{name}_speedup"] = out[name]["speedup"]
        out[f"{name}_cpu_speedup"] = out[name]["cpu_speedup"]
    for key in ("speedup", "cpu_speedup"):
        ratios = [out[name][key] for name in VARIANTS]
        out[key] = round(math.prod(ratios) ** (1 / len(ratios)), 3)
    out["same_samples"] = all(out[name]["same_samples"] for name in VARIANTS)
    out["command_check"] = bench_command(min(n, THREADS_N), k)
    return out


def arguments() -> argparse.ArgumentParser:
    """This script's flags, each checked as it is parsed (a bad one: one line, exit 2)."""
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=count(1, MAX_PROBLEMS), default=300, help="problems")
    parser.add_argument("--k", type=count(1, MAX_SAMPLES), default=8, help="samples per problem")
    parser.add_argument("--repeats", type=count(1), default=1)
    parser.add_argument(
        "--threads", type=count(1, MAX_THREADS), default=TINY_THREADS, help="torch threads"
    )
    parser.add_argument("--quick", action="store_true", help="8 problems x 2 samples (a smoke run)")
    return parser


def main(argv: list[str] | None = None) -> None:
    quiet_known_noise()  # the notes the CLI drops (pr1lib.config.runtime.NOISE_LOGS)
    args = arguments().parse_args(argv)
    print(json.dumps(run(args.n, args.k, args.repeats, args.threads, args.quick)))


if __name__ == "__main__":
    main()

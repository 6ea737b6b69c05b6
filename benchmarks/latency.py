"""Seconds per answer: a search decoded as forked paths that cannot see each other (unseen) against
the same search written out in one stream (serial), side by side in one run; prints one JSON object
(last line).

    .venv/bin/python benchmarks/latency.py [--unseen RUN] [--serial RUN] [--n 64] [--repeats 5]
    .venv/bin/python -m pr1lib bench latency      # the same, through the CLI

Both models answer the first ``--n`` held-out WideWorld hard problems once each at T = 1 (the
world's lengths and block layout: nine lettered paths per block), in the rollout mode each trains
with (unseen: ``forked``; serial: ``seen``), on ``--threads`` torch threads:

- **batch 1**: one problem per ``generate`` call, as a user waiting for one answer sees it;
- **batch 64**: 64 problems per call, as a server filling its batch sees it (forked paths then
  take 9 rows each: the saving in steps competes with the rows for the cores).

Rounds are interleaved (serial then unseen, then the other way round; 5 by default; the timer is
``pr1lib.evaluation.latency``, which ``study widths`` shares) and the
medians are kept, with each batch's spread (``spread``: the fastest and slowest round).
``seconds_per_answer`` is ``{"1": {"serial": s, "unseen": s}, "64": {...}}``;
``unseen_over_serial`` the ratio per batch size (below 1: the forked paths answer sooner), beside
the two it is read against: ``steps_bound`` (1.1 x the sequential-steps ratio, batch 1's target)
and ``token_ratio`` (batch 64's). ``breakdown`` is each model's seconds per answer per phase at
each batch (``pr1lib.decoding.clock``: prefill, sampling, one-row and k-row steps, fork, merge,
drop, other; the medians over the rounds) with its steps per answer and a step's seconds. Beside
them each model's accuracy, mean sequential decode steps and tokens on those samples, so a
speed-up is read beside what it answered.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

import torch

from pr1lib import worlds
from pr1lib.config import RolloutConfig
from pr1lib.config.arguments import Parser, count, model_folder
from pr1lib.config.checks import MAX_THREADS
from pr1lib.config.runtime import quiet_known_noise
from pr1lib.data.evalsets import load_benchmark
from pr1lib.evaluation.evaluate import load_for_eval
from pr1lib.evaluation.latency import (
    BATCHES,
    ROUNDS,
    interleaved,
    median_breakdown,
    medians,
    spreads,
)
from pr1lib.evaluation.metrics import completion_metrics, sample_stats
from pr1lib.format.prompts import chat_prompt
from pr1lib.worlds.tasks import MAX_PROBLEMS

WORLD = "wideworld"
MODELS = {"serial": ("data/wideworld-serial-r1", "seen"), "unseen": ("data/wideworld-r1", "forked")}
STEPS_SLACK = 1.1  # batch 1's target: at most this many times the sequential-steps ratio


def bounds(done: dict[str, dict]) -> dict[str, float]:
    """The ratios the measured one is read against: ``STEPS_SLACK`` x the sequential-steps
    ratio (batch 1) and the token ratio (batch 64)."""
    u, s = done["unseen"], done["serial"]
    steps = u["mean_sequential_steps"] / s["mean_sequential_steps"]
    return {
        "steps_ratio": round(steps, 3),
        "steps_bound": round(STEPS_SLACK * steps, 3),
        "token_ratio": round(u["mean_tokens"] / s["mean_tokens"], 3),
    }


def facts(texts: list[Any], golds: list[str], tok: Any, mode: str) -> dict[str, float]:
    """Accuracy, mean sequential decode steps and tokens of the samples timed."""
    stats = [sample_stats(t, tok, mode) for t in texts]
    return {
        "accuracy": round(completion_metrics(texts, golds)["accuracy"], 4),
        "mean_sequential_steps": round(statistics.fmean(s["sequential_steps"] for s in stats), 1),
        "mean_tokens": round(statistics.fmean(s["length"] for s in stats), 1),
    }


def run(
    unseen: str | None = None,
    serial: str | None = None,
    n: int = 64,
    repeats: int = ROUNDS,
    threads: int = 1,
    quick: bool = False,
) -> dict[str, Any]:
    """All measurements as one dict (``quick``: 4 problems, batches 1 and 4, one round)."""
    torch.set_num_threads(threads)
    n, repeats, batches = (4, 1, (1, 4)) if quick else (n, repeats, BATCHES)
    world = worlds.get(WORLD)
    records = load_benchmark(world.source("hard"), n, seed=0)
    paths = {"serial": serial or MODELS["serial"][0], "unseen": unseen or MODELS["unseen"][0]}
    timed = {}
    for name, path in paths.items():
        model, tok = load_for_eval(path, "tiny", lambda *a, **kw: None)
        cfg = RolloutConfig.for_profile("tiny", mode=MODELS[name][1], **world.budgets)
        timed[name] = (model, tok, cfg, [chat_prompt(r["question"], tok, "tiny") for r in records])
    got = interleaved(timed, batches, repeats)
    golds = [r["answer"] for r in records]
    done = {
        name: facts(got["texts"][name], golds, timed[name][1], MODELS[name][1]) for name in paths
    }
    return report(paths, got["seconds"], got["parts"], done) | {
        "n": n,
        "repeats": repeats,
        "threads": threads,
    }


def report(paths: dict, seconds: dict, parts: dict, done: dict) -> dict[str, Any]:
    """The JSON of ``run``: medians, spreads, ratios beside their bounds, breakdowns."""
    per, spread = medians(seconds), spreads(seconds)
    return {
        "benchmark": "latency",
        "world": WORLD,
        "models": paths,
        "seconds_per_answer": per,
        "spread": spread,
        "unseen_over_serial": {b: round(s["unseen"] / s["serial"], 3) for b, s in per.items()},
        **bounds(done),
        "breakdown": {
            b: {k: median_breakdown(v) for k, v in by.items()} for b, by in parts.items()
        },
        "samples": done,
    }


def arguments() -> argparse.ArgumentParser:
    """This script's flags, each checked as it is parsed (a bad one: one line, exit 2)."""
    parser = Parser(description=__doc__.splitlines()[0])
    for arm in ("unseen", "serial"):
        parser.add_argument(f"--{arm}", type=model_folder, help=f"default {MODELS[arm][0]}")
    parser.add_argument(
        "--n", type=count(1, MAX_PROBLEMS), default=64, help="problems (each answered once)"
    )
    parser.add_argument("--repeats", type=count(1), default=ROUNDS, help="interleaved rounds")
    parser.add_argument("--threads", type=count(1, MAX_THREADS), default=1, help="torch threads")
    parser.add_argument("--quick", action="store_true", help="4 problems, one round (a smoke run)")
    return parser


def main(argv: list[str] | None = None) -> None:
    quiet_known_noise()  # the notes the CLI drops (pr1lib.config.runtime.NOISE_LOGS)
    args = arguments().parse_args(argv)
    result = run(args.unseen, args.serial, args.n, args.repeats, args.threads, args.quick)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

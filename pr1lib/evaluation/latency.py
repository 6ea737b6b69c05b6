"""Seconds per answer, side by side: the one latency timer (``bench latency``, ``study widths``).

Each model answers the same problems once each at T = 1, ``batch`` prompts per ``generate`` call
(batch 1: a user waiting for one answer; batch 64: a server filling its batch), in its own rollout
config. Rounds are interleaved (the models in order, then the other way round) so that a slow
spell of a shared machine falls on both, and the medians over the rounds are kept, with each
batch's spread (the fastest and slowest round) and each model's seconds per phase
(``pr1lib.decoding.clock``).

>>> median_breakdown([{"seconds": dict.fromkeys(PARTS, 0.1), "total": 0.8, "steps": {"step_1": 4},
...                    "seconds_per_step": {"step_1": 0.02}}])["total"]
0.8
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Sequence

import torch

from pr1lib.config import RolloutConfig
from pr1lib.decoding.clock import PARTS, Clock
from pr1lib.decoding.rollout import generate
from pr1lib.evaluation.metrics import Completion

BATCHES = (1, 64)  # a user waiting for one answer; a server filling its batch
ROUNDS = 5  # interleaved rounds by default: a median and a spread


def answer(model: Any, tok: Any, prompts: list[str], cfg: RolloutConfig, batch: int) -> dict:
    """Every prompt answered once, ``batch`` prompts per call: wall seconds, the texts and the
    clock's breakdown per answer."""
    gen, clock = torch.Generator().manual_seed(0), Clock()
    texts, start = [], time.perf_counter()
    for i in range(0, len(prompts), batch):
        rollouts = generate(model, tok, prompts[i : i + batch], cfg, generator=gen, clock=clock)
        texts += [Completion(r.text, r.completion_ids) for r in rollouts]
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "texts": texts, "breakdown": clock.per_answer()}


def median_breakdown(rounds: list[dict]) -> dict[str, Any]:
    """The median over rounds of each part's seconds per answer (``Clock.per_answer``), the steps
    per answer (the same every round) and each step kind's median seconds."""
    med = statistics.median
    return {
        "seconds": {k: round(med(r["seconds"][k] for r in rounds), 5) for k in PARTS},
        "total": round(med(r["total"] for r in rounds), 5),
        "steps": rounds[0]["steps"],
        "seconds_per_step": {
            k: round(med(r["seconds_per_step"][k] for r in rounds), 6)
            for k in rounds[0]["seconds_per_step"]
        },
    }


def interleaved(
    models: dict[str, tuple[Any, Any, RolloutConfig, list[str]]],
    batches: Sequence[int] = BATCHES,
    repeats: int = ROUNDS,
) -> dict[str, Any]:
    """Time every model of ``models`` (name -> ``(model, tokenizer, config, prompts)``) at each
    batch size, ``repeats`` interleaved rounds: ``seconds`` (batch -> name -> seconds per answer,
    one per round), ``parts`` (the same, ``Clock.per_answer`` each) and ``texts`` (name -> the
    last round's completions)."""
    names = list(models)
    seconds = {str(b): {k: [] for k in names} for b in batches}
    parts: dict[str, dict[str, list[dict]]] = {str(b): {k: [] for k in names} for b in batches}
    texts: dict[str, list[Any]] = {}
    for round_ in range(repeats):
        for batch in batches:
            for name in names if round_ % 2 == 0 else names[::-1]:
                model, tok, cfg, prompts = models[name]
                result = answer(model, tok, prompts, cfg, batch)
                seconds[str(batch)][name].append(result["seconds"] / len(prompts))
                parts[str(batch)][name].append(result["breakdown"])
                texts[name] = result["texts"]
    return {"seconds": seconds, "parts": parts, "texts": texts}


def medians(seconds: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """batch -> name -> the median seconds per answer over the rounds.

    >>> medians({"1": {"serial": [0.3, 0.1, 0.2]}})
    {'1': {'serial': 0.2}}
    """
    return {
        b: {k: round(statistics.median(v), 4) for k, v in s.items()} for b, s in seconds.items()
    }


def spreads(seconds: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, list[float]]]:
    """batch -> name -> ``[fastest, slowest]`` round's seconds per answer."""
    return {
        b: {k: [round(min(v), 4), round(max(v), 4)] for k, v in s.items()}
        for b, s in seconds.items()
    }

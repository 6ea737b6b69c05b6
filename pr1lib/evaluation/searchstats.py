"""A world's own reading of its completions: how each one answered (a checked guess, or a search)
and whether its blocks' paths took the shares they were assigned; an evaluation sums them per
answer mode (share, accuracy, sequential decode steps) beside the split rate of its blocks.

Only worlds that define the readings (``World.answer_mode``, ``World.block_splits``: WideWorld)
add these keys; every other benchmark's samples and summaries stay as they were.

>>> q = "Deals of one toy and one book: (A) 4 and 9, (B) 6 and 8. Al pays 14 coins for one deal."
>>> facts = sample_facts("wideworld-hard", q, "(A) 4+9=13 vs 14 ✗\\n<Parallel><Path>(B) 6+8=14")
>>> facts["answer_mode"], facts["splits"]
('search', [True])
"""

from __future__ import annotations

from typing import Any

from pr1lib import worlds
from pr1lib.data import evalsets

ANSWER_MODES = ("guess", "search")


def sample_facts(benchmark: str, question: str, text: str) -> dict[str, Any]:
    """``answer_mode`` and ``splits`` (one bool per block) of one completion, where the
    benchmark's world reads them; ``{}`` elsewhere."""
    found = worlds.find_source(benchmark)
    if found is None and benchmark not in evalsets.names():  # a misspelt name: never {} in silence
        raise ValueError(f"unknown benchmark {benchmark!r}; choose one of {evalsets.names()}")
    if found is None:
        return {}
    world, out = found[0], {}
    if world.answer_mode is not None:
        out["answer_mode"] = world.answer_mode(text)
    if world.block_splits is not None:
        out["splits"] = world.block_splits(question, text)
    return out


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def mode_summary(rows: list[dict], grader: str) -> dict[str, Any]:
    """Per answer mode: its share of the samples, their accuracy under ``grader`` and their mean
    sequential decode steps (``answer_modes``); the share of opened blocks whose paths took their
    shares (``split_rate``) beside their count (``n_blocks``), and how wide they were
    (``mean_paths``, ``paths_hist``: blocks per path count). ``{}`` without the readings.

    >>> row = {"k": 2, "correct_official": [True, False], "samples": [
    ...     {"answer_mode": "guess", "sequential_steps": 20, "splits": []},
    ...     {"answer_mode": "search", "sequential_steps": 60, "splits": [True]}]}
    >>> s = mode_summary([row], "official")
    >>> s["answer_modes"]["guess"], s["split_rate"], s["n_blocks"]
    ({'share': 0.5, 'accuracy': 1.0, 'mean_sequential_steps': 20.0}, 1.0, 1)
    """
    pairs = [
        (ok, sample)
        for row in rows
        for ok, sample in zip(row.get(f"correct_{grader}", []), row["samples"])
    ]
    out: dict[str, Any] = {}
    if any("answer_mode" in s for _, s in pairs):
        out["answer_modes"] = {
            mode: {
                "share": _mean([float(s.get("answer_mode") == mode) for _, s in pairs]),
                "accuracy": _mean([float(ok) for ok, s in pairs if s.get("answer_mode") == mode]),
                "mean_sequential_steps": _mean(
                    [s["sequential_steps"] for _, s in pairs if s.get("answer_mode") == mode]
                ),
            }
            for mode in ANSWER_MODES
        }
    if any("splits" in s for _, s in pairs):
        splits = [float(x) for _, s in pairs for x in s.get("splits", [])]
        out.update(split_rate=_mean(splits), n_blocks=len(splits))
    if any("splits" in s for _, s in pairs):  # paths per block: metrics.sample_stats counts them
        widths = [w for _, s in pairs for w in s.get("paths_per_block", [])]
        out["mean_paths"] = _mean([float(w) for w in widths])
        out["paths_hist"] = {w: widths.count(w) for w in sorted(set(widths))}
    return out

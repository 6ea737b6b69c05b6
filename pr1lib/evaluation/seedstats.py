"""Intervals over seeds *and* problems: a study's arm is a few training runs (seeds) evaluated on
the same held-out problems, and its accuracy varies with both. Resampling problems alone (the
protocol's interval, ``metrics.paired_bootstrap``) treats the seeds as fixed and is too narrow
when they disagree; here each resample draws the problems (the same draw for both arms of a
contrast, so the pairing is kept) and, independently for each arm, its seeds.

With one seed per arm this is the problems-only bootstrap: a lone seed resamples to itself. The
rest of an arm's row pools its seeds too (``mean_row``, ``width_columns``, ``per_seed``).

>>> a = [[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]]  # 2 seeds x 4 problems
>>> two_level(a)["mean"]
0.625
>>> d = two_level(a, [[0.0, 0.0, 0.0, 0.0]])
>>> d["diff"], d["low"] > 0
(0.625, True)
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

import numpy as np

Grid = Sequence[Sequence[float]]  # one row per seed, one column per problem (same order)
BOOTSTRAP_SEEDS = (
    "bootstrap over seeds and problems: 2000 resamples of the problems (paired across arms) and of "
    "each arm's seeds, percentile 95 % interval"
)


def _grid(rows: Grid, name: str) -> np.ndarray:
    grid = np.asarray(rows, dtype=float)  # [seeds, problems]
    if grid.ndim != 2 or 0 in grid.shape:
        raise ValueError(f"{name}: need seeds x problems accuracies, got shape {grid.shape}")
    return grid


def _resampled_means(grid: np.ndarray, problems: np.ndarray, rng: np.random.Generator):
    """Each resample's mean over a draw of ``grid``'s seeds and the drawn ``problems``."""
    n_boot = problems.shape[0]
    seeds = rng.integers(0, grid.shape[0], size=(n_boot, grid.shape[0]))  # [boot, seeds]
    per_seed = grid[seeds[:, :, None], problems[:, None, :]]  # [boot, seeds, problems]
    return per_seed.mean(axis=(1, 2))  # [boot]


def two_level(a: Grid, b: Grid | None = None, n_boot: int = 2000, seed: int = 0) -> dict:
    """Mean accuracy of ``a`` (seeds x problems), or of ``a - b`` where the control ``b`` is given
    (the same problems, any number of seeds), with a 95 % interval resampling problems and seeds:
    ``{"mean" | "diff", "low", "high"}``."""
    ga = _grid(a, "treatment")
    gb = None if b is None else _grid(b, "control")
    if gb is not None and gb.shape[1] != ga.shape[1]:
        raise ValueError(f"need the same problems both ways, got {ga.shape[1]} and {gb.shape[1]}")
    rng = np.random.default_rng(seed)
    problems = rng.integers(0, ga.shape[1], size=(n_boot, ga.shape[1]))  # [boot, problems]
    means = _resampled_means(ga, problems, rng)
    point = float(ga.mean())
    if gb is not None:
        means = means - _resampled_means(gb, problems, rng)
        point -= float(gb.mean())
    low, high = np.percentile(means, [2.5, 97.5])
    return {"diff" if gb is not None else "mean": point, "low": float(low), "high": float(high)}


def seed_of(start: str) -> int | None:
    """The SFT seed of a study's cold-start folder (``.../sft`` is seed 0, ``sft-s2`` seed 2);
    ``None`` for a start the study did not train (a shipped checkpoint, the base model).

    >>> seed_of("runs/c/unseen/sft#ab12"), seed_of("runs/c/unseen/sft-s2#cd"), seed_of("data/x")
    (0, 2, None)
    """
    name = str(start).split("#")[0].rstrip("/").rsplit("/", 1)[-1]
    if name == "sft":
        return 0
    return int(name[len("sft-s") :]) if name.startswith("sft-s") else None


# ----------------------------------------------------------------------------- an arm's row
def rounded(interval: dict[str, float]) -> dict[str, float]:
    """An interval's values to 4 digits, as a card keeps them."""
    return {k: round(v, 4) for k, v in interval.items()}


# a seed's own width columns: (its card's key, the evaluation's measure)
SEED_WIDTHS = (("paths_per_block", "mean_paths"), ("distinct_share_rate", "split_rate"))


def per_seed(seeds: list[int], firsts: list[dict], ends: list[dict]) -> list[dict[str, Any]]:
    """One entry per RL seed: the SFT seed its cold start was trained with (``None``: a start the
    study did not train), its start's and its end's hard accuracy, and where the end measured
    them its paths per block and its blocks' distinct-share rate (a seed whose split failed shows
    here, not only in the pooled columns)."""
    return [
        {
            "sft_seed": seed_of(card.get("start", "")),
            "seed": seed,
            "start": card["before"]["hard"]["accuracy"],
            "accuracy": end["accuracy"],
            **{k: end[m] for k, m in SEED_WIDTHS if end.get(m) is not None},
        }
        for seed, card, end in zip(seeds, firsts, ends)
    ]


def width_columns(starts: list[dict], ends: list[dict]) -> dict[str, float]:
    """Paths per block before and after RL and the share of blocks whose paths took distinct,
    correct shares (``split_rate`` of the evaluation, pooled by block counts); ``{}`` where the
    evaluations measured no blocks (a plain arm, a world whose paths have no shares)."""
    if not all(e.get("mean_paths") for e in (*starts, *ends)):
        return {}
    out = {
        "start_paths_per_block": pooled(starts, "mean_paths"),
        "paths_per_block": pooled(ends, "mean_paths"),
    }
    if all(e.get("split_rate") is not None for e in (*starts, *ends)):
        out["start_distinct_share_rate"] = pooled(starts, "split_rate")
        out["distinct_share_rate"] = pooled(ends, "split_rate")
    return out


def pooled(metrics: list[dict], key: str) -> float:
    """``key`` averaged over evaluations, each weighted by its number of blocks."""
    blocks = [m["n_blocks"] for m in metrics]
    return round(sum(m[key] * b for m, b in zip(metrics, blocks)) / max(sum(blocks), 1), 4)


def mean_row(ends: list[dict]) -> dict[str, Any]:
    """An arm's row: its seeds' held-out evaluations (``ends``) averaged, key by key: accuracy,
    pass@k, block rate, tokens, sequential steps, greedy, accuracy under step caps, answer modes.

    >>> e = {"accuracy": 0.5, "pass_at_k": 0.8, "parallel_ratio": 1.0, "mean_length": 40.0,
    ...      "mean_sequential_steps": 20.0, "greedy": {"accuracy": 0.6}}
    >>> mean_row([e, {**e, "accuracy": 0.3}])["accuracy"]
    0.4
    """
    keys = ("accuracy", "pass_at_k", "parallel_ratio", "mean_length", "mean_sequential_steps")
    keys += tuple(k for k in ("valid_block_rate",) if all(k in e for e in ends))
    row = {k: round(statistics.fmean(e[k] for e in ends), 4) for k in keys}
    if all("answer_modes" in e for e in ends):
        row["answer_modes"] = mean_modes([e["answer_modes"] for e in ends])
    row["greedy"] = round(statistics.fmean(e["greedy"]["accuracy"] for e in ends), 4)
    caps = ends[0].get("accuracy_at_steps", {})
    row["accuracy_at_steps"] = {
        cap: round(statistics.fmean(e["accuracy_at_steps"][cap] for e in ends), 4) for cap in caps
    }
    return row


def mean_modes(modes: list[dict]) -> dict[str, dict]:
    """Each answer mode's share, accuracy and steps, averaged over the seeds that have the mode."""
    out = {}
    for mode in modes[0]:
        cells = [m[mode] for m in modes]
        out[mode] = {
            key: fmean([c[key] for c in cells if c.get(key) is not None]) for key in cells[0]
        }
    return out


def fmean(values: list[float]) -> float | None:
    """The mean to 4 digits; ``None`` for no values."""
    return round(statistics.fmean(values), 4) if values else None

"""Intervals over seeds *and* problems: a study's arm is a few training runs (seeds) evaluated on
the same held-out problems, and its accuracy varies with both. Resampling problems alone (the
protocol's interval, ``metrics.paired_bootstrap``) treats the seeds as fixed and is too narrow
when they disagree; here each resample draws the problems (the same draw for both arms of a
contrast, so the pairing is kept) and, independently for each arm, its seeds.

With one seed per arm this is the problems-only bootstrap: a lone seed resamples to itself.

>>> a = [[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]]  # 2 seeds x 4 problems
>>> two_level(a)["mean"]
0.625
>>> d = two_level(a, [[0.0, 0.0, 0.0, 0.0]])
>>> d["diff"], d["low"] > 0
(0.625, True)
"""

from __future__ import annotations

from typing import Sequence

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

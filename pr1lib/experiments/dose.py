"""The dose-response study: how strongly the reward steers blocks. Stage-2 runs on easy problems
(where a block costs about nothing) with the alternating reward at several tiered steps per window
of 10 and several bonuses b; one row per run with the held-out easy tier's parallel ratio and
accuracy.

>>> dose_arms((0, 2), (0.2, 0.5))
[(0, 0.2), (2, 0.2), (2, 0.5)]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from pr1lib import worlds
from pr1lib.config import GRPOStageConfig
from pr1lib.experiments import StudyRun
from pr1lib.store.paths import runs_dir
from pr1lib.training.grpo import run_grpo
from pr1lib.training.runs import finished_run
from pr1lib.training.starts import default_init

DOSES = (0, 2, 5, 10)  # tiered steps per window of 10 (0: accuracy only; 10: tiered every step)
BONUSES = (0.0, 0.2, 0.5, 1.0)  # b, at the paper's 2 tiered steps of every 10


def dose_dir(profile: str, world: str | None, seed: int) -> Path:
    """Where ``dose_response`` keeps its runs by default."""
    return runs_dir() / f"dose-response-{profile}-{world}-seed{seed}"


def dose_arms(doses: Sequence[int] = DOSES, bonuses: Sequence[float] = BONUSES) -> list[tuple]:
    """The (tiered steps, b) of each run: every dose at the paper's b, every b at 2 of 10."""
    arms = [(d, 0.2) for d in doses] + [(2, b) for b in bonuses]
    return list(dict.fromkeys(arms))


def dose_response(
    profile: str,
    init: str | Path | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    world: str | None = "tinyworld",
    arms: Sequence[tuple] | None = None,
    overwrite: bool = False,
    **overrides: Any,
) -> list[dict]:
    """Stage-2 runs (easy problems, where a block costs almost nothing) with the alternating
    reward, one per ``arms`` (tiered steps per window of 10, bonus b); one row per run with the
    held-out easy tier's parallel ratio and accuracy (mean@k at T = 1, greedy beside it) and the
    training samples' parallel ratio over the last steps. A finished run is reused."""
    init = init or (worlds.get(world).init("seen") if world else None)
    init = init or default_init(2, "seen", profile, seed)
    root = Path(out) if out else dose_dir(profile, world, seed)
    rows, before = [], None
    for tiered, bonus in arms or dose_arms():
        cfg = GRPOStageConfig.for_stage(
            2,
            profile,
            world=world,
            reward="alternating",
            window=10,
            parallel_steps=tiered,
            tiered_bonus=bonus,
            seed=seed,
            **overrides,
        )
        folder = root / f"tiered{tiered}-b{bonus:g}"
        done = (
            finished_run(folder, cfg, init)
            or run_grpo(
                cfg,
                init,
                folder,
                before=before,
                preflight=False,
                evaluate_tiers=("easy",),
                overwrite=overwrite,
            ).result
        )
        before, easy = done["before"], done["after"]["easy"]
        rows.append(
            {
                "tiered_steps": tiered,
                "bonus": bonus,
                "steps": done["steps"],
                "start_parallel_ratio": before["easy"]["parallel_ratio"],
                "parallel_ratio": easy["parallel_ratio"],
                "accuracy": easy["accuracy"],
                "greedy_accuracy": easy["greedy"]["accuracy"],
                "train_parallel_ratio": done["train"].get("parallel_ratio"),
            }
        )
    return rows


def main(run: StudyRun) -> list[dict]:
    """``study dose``: every arm per seed, one row per run."""
    results = []
    overrides = {k: v for k, v in run.grpo_overrides().items() if k != "world"}
    for seed in run.seeds:
        out = run.seed_out(seed, dose_dir(run.profile, run.world, seed))
        with run.claim(out):
            rows = dose_response(
                run.profile,
                run.init("seen"),
                seed,
                out,
                run.world,
                overwrite=run.overwrite,
                **overrides,
            )
        for row in rows:
            print(json.dumps(row), flush=True)
        results.append({"profile": run.profile, "world": run.world, "seed": seed, "rows": rows})
    return results

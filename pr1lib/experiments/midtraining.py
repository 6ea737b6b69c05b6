"""The mid-training scaffold (the paper's Figure 4): the alternating reward for the first steps,
then accuracy only from that checkpoint (``pr1lib.curves.scaffold_figure`` draws it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pr1lib.config import GRPOStageConfig
from pr1lib.experiments import StudyRun
from pr1lib.folders import FolderError, move_aside
from pr1lib.grpo import run_grpo
from pr1lib.paths import runs_dir
from pr1lib.runs import start_id


def _scaffold_configs(
    profile: str,
    switch_step: int,
    total_steps: int,
    seed: int,
    variant: str,
    overrides: dict[str, Any],
):
    if not 0 < switch_step < total_steps:
        raise ValueError(f"need 0 < switch_step < total_steps, got {switch_step} and {total_steps}")
    common = {"variant": variant, "save_steps": total_steps, **overrides}
    # phase 2 gets the next seed, so it draws fresh prompts instead of replaying phase 1's order
    phase1 = {**common, "seed": seed, "reward": "alternating", "max_steps": switch_step}
    phase2 = {
        **common,
        "seed": seed + 1,
        "reward": "accuracy",
        "max_steps": total_steps - switch_step,
    }
    return GRPOStageConfig.for_stage(3, profile, **phase1), GRPOStageConfig.for_stage(
        3, profile, **phase2
    )


def mid_training(
    profile: str,
    init: str | Path | None = None,
    switch_step: int = 10,
    total_steps: int = 20,
    seed: int = 0,
    variant: str = "unseen",
    out: str | Path | None = None,
    tiers: tuple[str, ...] = ("hard",),
    refresh: bool = False,
    overwrite: bool = False,
    **overrides: Any,
) -> dict[str, Any]:
    """Alternating reward for steps [0, ``switch_step``), then a second run from that checkpoint
    with the accuracy reward up to ``total_steps`` (both ``run_grpo``, Stage 3 data; phase 2 uses
    ``seed + 1`` so its prompts are new ones). Returns ``curve`` (training rows, steps counted from
    the start of phase 1, ``phase`` = ``alternating`` / ``accuracy``), ``held_out`` (the stage
    metrics on ``tiers`` at the start, switch and end) and the two run folders. Cached in
    ``OUT/mid_training.json`` until ``refresh`` or a change. The runs of another config or start
    are refused, or with ``refresh`` / ``overwrite`` moved aside (``folders.move_aside``), never
    deleted."""
    out = Path(out) if out else runs_dir() / f"mid-training-{profile}-{variant}-seed{seed}"
    first, second = _scaffold_configs(profile, switch_step, total_steps, seed, variant, overrides)
    key = json.dumps(
        {"init": start_id(init), "configs": [first.to_dict(), second.to_dict()], "tiers": tiers},
        sort_keys=True,
        default=str,
    )
    cache = out / "mid_training.json"
    if (cached := _cached(cache, key, refresh or overwrite)) is not None:
        return cached
    run1 = run_grpo(
        first,
        init,
        out / "alternating",
        evaluate_tiers=tiers,
        preflight=False,
        overwrite=overwrite,
    )
    run2 = run_grpo(
        second,
        run1.run_dir,
        out / "accuracy",
        evaluate_tiers=tiers,
        before=run1.result["after"],
        preflight=False,
        overwrite=overwrite,
    )
    result = {
        "profile": profile,
        "variant": variant,
        "seed": seed,
        "init": str(init or "the base model"),
        "switch_step": switch_step,
        "total_steps": total_steps,
        **_phases(run1, run2, switch_step, total_steps, tiers),
    }
    out.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"key": key, "result": result}, indent=2, default=str))
    return result


def _cached(cache: Path, key: str, again: bool) -> dict | None:
    """The cached result of the same scaffold (``None``: run it). A cache of another config or
    start is refused unless ``again`` (``--refresh`` / ``--overwrite``): then its runs move aside
    (kept) and the scaffold runs anew."""
    if not cache.exists():
        return None
    if not again and json.loads(cache.read_text()).get("key") == key:
        return json.loads(cache.read_text())["result"]
    if not again:
        raise FolderError(
            f"{cache.parent} holds the scaffold of another config or start: pass --refresh to "
            "run it again (the old runs move aside, kept), or pick another --out"
        )
    for phase in ("alternating", "accuracy"):  # their checkpoints must not be resumed
        move_aside(cache.parent / phase, "the scaffold's config changed (or --refresh)")
    move_aside(cache, "the scaffold's config changed (or --refresh)")
    return None


def _phases(run1: Any, run2: Any, switch_step: int, total_steps: int, tiers: tuple[str, ...]):
    """One training curve over both phases, the held-out metrics at start, switch and end."""
    curve = [{**row, "phase": "alternating"} for row in run1.rows if row["step"] <= switch_step]
    curve += [{**row, "step": row["step"] + switch_step, "phase": "accuracy"} for row in run2.rows]
    held = [
        {"step": s, **(metrics or {}).get(t, {}), "tier": t}
        for s, metrics in (
            (0, run1.result["before"]),
            (switch_step, run1.result["after"]),
            (total_steps, run2.result["after"]),
        )
        for t in tiers
    ]
    return {
        "curve": curve,
        "held_out": held,
        "runs": [str(run1.run_dir), str(run2.run_dir)],
        "seconds": round(run1.result["seconds"] + run2.result["seconds"], 1),
    }


def main(run: StudyRun) -> list[dict]:
    """``study midtraining``: the scaffold per seed (``--steps`` in all, ``--switch`` where the
    reward switches; the notebook's 20 and 10 by default)."""
    variant, total = run.option("variant", "unseen"), run.option("steps", 20)
    overrides = {k: v for k, v in run.grpo_overrides().items() if k != "max_steps"}
    results = []
    for seed in run.seeds:
        out = run.seed_out(seed, runs_dir() / f"mid-training-{run.profile}-{variant}-seed{seed}")
        with run.claim(out):
            result = mid_training(
                run.profile,
                run.init(variant),
                run.option("switch", total // 2),
                total,
                seed,
                variant,
                out,
                refresh=run.option("refresh", False),
                overwrite=run.overwrite,
                **overrides,
            )
        results.append({k: v for k, v in result.items() if k != "curve"})
    return results

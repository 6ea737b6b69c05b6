"""The mid-training scaffold (the paper's Figure 4) and its control.

The scaffold trains with the alternating reward (S2) for the first ``switch`` steps, then with
accuracy only from that checkpoint; the control trains with accuracy only (S1) from the same SFT
for the same steps, split at the same step, so the two arms differ in phase 1's reward alone (and
its clip-high, 0.28 for S2 and 0.2 for S1, as in the paper's scripts). Both run in the world their
start was trained in (``world``). ``pr1lib.notebook.curves.scaffold_figure`` draws one arm; the
study (``python -m pr1lib study midtraining``) runs both arms per seed and keeps, for its card, the
held-out accuracy and block rate at the start, the switch and the end, the training samples' per
step, and the scaffold-minus-control contrasts (``scaffold_summary``, read by
``scaffold_verdict``).

>>> ARMS["scaffold"], ARMS["control"]
('alternating', 'accuracy')
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from pr1lib.config import GRPOStageConfig
from pr1lib.experiments import StudyRun
from pr1lib.store.folders import FolderError, move_aside
from pr1lib.store.jsonl import read_json
from pr1lib.store.paths import runs_dir, shown
from pr1lib.training.grpo import run_grpo
from pr1lib.training.runs import start_id

ARMS = {"scaffold": "alternating", "control": "accuracy"}  # each arm's phase-1 reward
WHAT = {
    "scaffold": "S2 (alternating reward) to the switch, then accuracy only",
    "control": "accuracy only from the same SFT, the same steps",
}


def midtraining_dir(profile: str, world: str | None, variant: str, seed: int) -> Path:
    """Where one seed's arms live unless told otherwise (``ARM/`` below it)."""
    return runs_dir() / f"mid-training-{profile}-{world or 'profile'}-{variant}-seed{seed}"


def _scaffold_configs(
    profile: str,
    switch_step: int,
    total_steps: int,
    seed: int,
    variant: str,
    first_reward: str,
    world: str | None,
    overrides: dict[str, Any],
):
    if not 0 < switch_step < total_steps:
        raise ValueError(f"need 0 < switch_step < total_steps, got {switch_step} and {total_steps}")
    common = {"variant": variant, "save_steps": total_steps, "world": world, **overrides}
    # phase 2 gets the next seed, so it draws fresh prompts instead of replaying phase 1's order
    phase1 = {**common, "seed": seed, "reward": first_reward, "max_steps": switch_step}
    phase2 = {**common, "seed": seed + 1, "reward": "accuracy"}
    phase2["max_steps"] = total_steps - switch_step
    return GRPOStageConfig.for_stage(3, profile, **phase1), GRPOStageConfig.for_stage(
        3, profile, **phase2
    )


def phase_dirs(out: Path, first_reward: str) -> tuple[Path, Path]:
    """The two phases' run folders: ``alternating/`` and ``accuracy/`` for the scaffold; the
    control's phase 1 is ``accuracy-first/``."""
    first = first_reward if first_reward != "accuracy" else "accuracy-first"
    return out / first, out / "accuracy"


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
    world: str | None = None,
    first_reward: str = "alternating",
    before: dict | None = None,
    follow: bool = False,
    **overrides: Any,
) -> dict[str, Any]:
    """``first_reward`` (the scaffold: alternating) for steps [0, ``switch_step``), then a second
    run from that checkpoint with the accuracy reward up to ``total_steps`` (both ``run_grpo``,
    Stage 3 problems of ``world``, or of the profile when ``None``; phase 2 uses ``seed + 1`` so
    its prompts are new ones). ``before``: held-out metrics of ``init`` measured already (the same
    for every arm and seed). Returns ``curve`` (training rows, steps counted from the start of
    phase 1, ``phase`` = the phase's reward), ``held_out`` (the stage metrics on ``tiers`` at the
    start, switch and end) and the two run folders. Cached in ``OUT/mid_training.json`` until
    ``refresh`` or a change. The runs of another config or start are refused, or with
    ``refresh`` / ``overwrite`` moved aside (``folders.move_aside``), never deleted; ``follow``
    (a notebook's own run) moves them aside with one line naming no machine path and trains
    again: a start retrained since (notebook 04 run again) is recomputed, never an error."""
    arm = "scaffold" if first_reward == "alternating" else "control"
    out = Path(out) if out else midtraining_dir(profile, world, variant, seed) / arm
    first, second = _scaffold_configs(
        profile, switch_step, total_steps, seed, variant, first_reward, world, overrides
    )
    key = json.dumps(
        {"init": start_id(init), "configs": [first.to_dict(), second.to_dict()], "tiers": tiers},
        sort_keys=True,
        default=str,
    )
    cache, (dir1, dir2) = out / "mid_training.json", phase_dirs(out, first_reward)
    if follow and (note := follow_scaffold(out, key, init)):
        print(note, flush=True)
    if (cached := _cached(cache, key, refresh or overwrite, (dir1, dir2))) is not None:
        return cached
    run1, run2 = _two_phases(first, second, init, (dir1, dir2), tiers, before, overwrite, follow)
    result = {
        "profile": profile,
        "world": world,
        "variant": variant,
        "first_reward": first_reward,
        "seed": seed,
        "init": str(init or "the base model"),
        "switch_step": switch_step,
        "total_steps": total_steps,
        **_phases(run1, run2, switch_step, total_steps, tiers),
    }
    out.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"key": key, "result": result}, indent=2, default=str))
    return result


def _two_phases(
    first, second, init, dirs: tuple[Path, Path], tiers, before, overwrite: bool, follow=False
):
    """Phase 1 from ``init``, then phase 2 from phase 1's checkpoint (its held-out metrics reused
    as phase 2's start)."""
    run1 = run_grpo(
        first,
        init,
        dirs[0],
        evaluate_tiers=tiers,
        before=before,
        preflight=False,
        overwrite=overwrite,
        follow=follow,
    )
    after = run1.result["after"]
    run2 = run_grpo(
        second,
        run1.run_dir,
        dirs[1],
        evaluate_tiers=tiers,
        before=after,
        preflight=False,
        overwrite=overwrite,
        follow=follow,
    )
    return run1, run2


def follow_scaffold(out: Path, key: str, init: str | Path | None) -> str | None:
    """A notebook's scaffold follows its start: when ``out`` holds a scaffold of another start
    or config (its cache's key differs, or phase runs without a cache), the whole folder moves to
    ``<name>.prev`` (kept, never deleted; phase runs without a result are each followed by
    ``run_grpo``). Returns the one line to show, paths as the repository names them; ``None``
    when nothing had to move.

    >>> follow_scaffold(Path("/no/such/scaffold"), "{}", None) is None
    True
    """
    cache = out / "mid_training.json"
    if not cache.is_file():  # phase runs without a result: each phase follows (run_grpo)
        return None
    try:
        theirs = json.loads(json.loads(cache.read_text())["key"])
    except (OSError, ValueError, KeyError, TypeError):
        theirs = {}  # a damaged cache: moved aside too
    ours = json.loads(key)
    if theirs == ours:
        return None
    if theirs and theirs.get("init") != ours["init"]:
        was = str(theirs.get("init", "")).split("#")[0]
        why = (
            f"begun from an earlier {shown(init)} (trained since)"
            if init and was == str(init)
            else f"begun from {shown(was) if was not in ('', 'base') else 'the base model'}"
        )
    else:
        why = "of another config" if theirs else "whose result is damaged"
    prev = move_aside(out, why, quiet=True)
    if prev is None:
        return None
    return f"note: moved {shown(out)} to {prev.name}: it held a scaffold {why}; training it again"


def _cached(cache: Path, key: str, again: bool, phases: tuple[Path, Path]) -> dict | None:
    """The cached result of the same scaffold (``None``: run it). A cache of another config or
    start is refused unless ``again`` (``--refresh`` / ``--overwrite``): then its runs move aside
    (kept) and the scaffold runs anew."""
    if not cache.exists():
        return None
    if not again and read_json(cache, "move it away to train the scaffold again").get("key") == key:
        return read_json(cache)["result"]
    if not again:
        raise FolderError(
            f"{cache.parent} holds the scaffold of another config or start: pass --refresh to "
            "run it again (the old runs move aside, kept), or pick another --out"
        )
    for phase in phases:  # their checkpoints must not be resumed
        move_aside(phase, "the scaffold's config changed (or --refresh)")
    move_aside(cache, "the scaffold's config changed (or --refresh)")
    return None


def _phases(run1: Any, run2: Any, switch_step: int, total_steps: int, tiers: tuple[str, ...]):
    """One training curve over both phases, the held-out metrics at start, switch and end."""
    first, second = run1.result["reward"], run2.result["reward"]
    curve = [{**row, "phase": first} for row in run1.rows if row["step"] <= switch_step]
    curve += [{**row, "step": row["step"] + switch_step, "phase": second} for row in run2.rows]
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
        "start_metrics": run1.result["before"],
        "runs": [str(run1.run_dir), str(run2.run_dir)],
        "seconds": round(run1.result["seconds"] + run2.result["seconds"], 1),
    }


# ----------------------------------------------------------------------------- the card
def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None and v == v]  # not None, not NaN
    return round(statistics.fmean(values), 4) if values else None


def _held_at(results: list[dict], step: int, tier: str) -> list[dict]:
    return [h for r in results for h in r["held_out"] if h["step"] == step and h["tier"] == tier]


def _problem_means(points: list[dict], key: str = "accuracy") -> list[float]:
    """Each problem's value averaged over the seeds (the same problems, in the same order)."""
    return [statistics.fmean(v) for v in zip(*(p["per_problem"][key] for p in points))]


def scaffold_summary(by_arm: dict[str, list[dict]], tier: str = "hard") -> dict[str, Any]:
    """What the card keeps of ``mid_training`` results per arm (one per seed): held-out ``tier``
    accuracy, block rate and greedy accuracy at the start, switch and end (means over the seeds,
    and per seed), the training samples' accuracy and block rate per step (means over the seeds),
    and scaffold minus control at the switch and the end: a paired bootstrap over problems (each
    problem averaged over the seeds), in points."""
    from pr1lib.evaluation.headline import paired_change

    first = by_arm["scaffold"][0]
    steps = (0, first["switch_step"], first["total_steps"])
    held = {arm: {} for arm in by_arm}
    for arm, results in by_arm.items():
        for step in steps:
            points = _held_at(results, step, tier)
            held[arm][str(step)] = {
                "accuracy": _mean([p["accuracy"] for p in points]),
                "parallel_ratio": _mean([p["parallel_ratio"] for p in points]),
                "greedy": _mean([p.get("greedy", {}).get("accuracy") for p in points]),
                "per_seed": [p["accuracy"] for p in points],
            }
    contrasts = {}
    for step in steps[1:]:
        a, b = (_held_at(by_arm[arm], step, tier) for arm in ("scaffold", "control"))
        for key in ("accuracy", "parallel"):
            contrasts[f"{key}@{step}"] = paired_change(
                {"per_problem": {key: _problem_means(a, key)}},
                {"per_problem": {key: _problem_means(b, key)}},
                key,
            )
    per_step = {arm: _per_step(results) for arm, results in by_arm.items()}
    return {"tier": tier, "steps": list(steps), "held_out": held, "contrasts": contrasts} | {
        "per_step": per_step
    }


def _per_step(results: list[dict]) -> dict[str, dict]:
    """The training samples' accuracy and block rate per step, means over the seeds."""
    rows: dict[int, list[dict]] = {}
    for result in results:
        for row in result["curve"]:
            rows.setdefault(int(row["step"]), []).append(row)
    return {
        str(step): {k: _mean([r.get(k) for r in group]) for k in ("accuracy", "parallel_ratio")}
        for step, group in sorted(rows.items())
    }


def scaffold_verdict(summary: dict[str, Any]) -> list[str]:
    """Computed lines on a ``scaffold_summary``: each arm's held-out accuracy and block rate at the
    start, switch and end; scaffold minus control at the switch and the end (``change_words``);
    and whether the paper's Figure 4 shows: after the switch the scaffold's block rate falls while
    its accuracy does not, and it ends above the control.

    >>> at = lambda a, p: {"accuracy": a, "parallel_ratio": p}
    >>> s = {"steps": [0, 2, 4], "held_out": {
    ...     "scaffold": {"0": at(.4, .2), "2": at(.45, .8), "4": at(.5, .5)},
    ...     "control": {"0": at(.4, .2), "2": at(.42, .3), "4": at(.5, .4)}},
    ...      "contrasts": {"accuracy@4": {"diff": 0.0, "low": -3.0, "high": 3.0}}}
    >>> print(scaffold_verdict(s)[0])
    scaffold: accuracy 40.0 -> 45.0 -> 50.0 %, block rate 20.0 -> 80.0 -> 50.0 % (steps 0, 2, 4)
    >>> print(scaffold_verdict(s)[-1])
    the paper's Figure 4 finding (after the switch blocks fall, accuracy does not, and the
    scaffold ends above the control) does not show: the block rate falls after the switch
    (80.0 -> 50.0 %), accuracy does not fall (45.0 -> 50.0 %), the end is within the noise of
    the control
    """
    from pr1lib.evaluation.headline import change_words

    steps, held = summary["steps"], summary["held_out"]
    lines = []
    for arm, points in held.items():
        acc = " -> ".join(f"{100 * points[str(s)]['accuracy']:.1f}" for s in steps)
        rate = " -> ".join(f"{100 * points[str(s)]['parallel_ratio']:.1f}" for s in steps)
        lines.append(
            f"{arm}: accuracy {acc} %, block rate {rate} % (steps {', '.join(map(str, steps))})"
        )
    for name, change in summary["contrasts"].items():
        what, step = name.split("@")
        label = f"scaffold vs control at step {step}"
        lines.append(change_words(label, change, "block rate" if what == "parallel" else what))
    mid, end = (held["scaffold"][str(s)] for s in steps[1:])
    gap = summary["contrasts"][f"accuracy@{steps[-1]}"]
    falls = end["parallel_ratio"] < mid["parallel_ratio"]
    holds = end["accuracy"] >= mid["accuracy"]
    above = "ends above" if gap["low"] > 0 else "ends below" if gap["high"] < 0 else "is within"
    shows = falls and holds and gap["low"] > 0
    lines.append(
        "the paper's Figure 4 finding (after the switch blocks fall, accuracy does not, and the "
        f"scaffold ends above the control) {'shows' if shows else 'does not show'}: the block "
        f"rate {'falls' if falls else 'does not fall'} after the switch "
        f"({100 * mid['parallel_ratio']:.1f} -> {100 * end['parallel_ratio']:.1f} %), accuracy "
        f"{'does not fall' if holds else 'falls'} ({100 * mid['accuracy']:.1f} -> "
        f"{100 * end['accuracy']:.1f} %), the end "
        + ("is within the noise of the control" if above == "is within" else f"{above} the control")
    )
    return lines


def main(run: StudyRun) -> list[dict]:
    """``study midtraining``: per seed, the scaffold and its control (``--steps`` in all,
    ``--switch`` where the scaffold's reward switches; the notebook's 20 and 10 by default), in
    ``--world``; with the start evaluated once. One card: ``scaffold_summary`` and its verdict."""
    variant, total = run.option("variant", "unseen"), run.option("steps", 20)
    overrides = {k: v for k, v in run.grpo_overrides().items() if k not in ("max_steps", "world")}
    by_arm: dict[str, list[dict]] = {arm: [] for arm in ARMS}
    before = None
    for seed in run.seeds:
        out = run.seed_out(seed, midtraining_dir(run.profile, run.world, variant, seed))
        with run.claim(out):
            for arm, reward in ARMS.items():
                result = mid_training(
                    run.profile,
                    run.init(variant),
                    run.option("switch", total // 2),
                    total,
                    seed,
                    variant,
                    out / arm,
                    refresh=run.option("refresh", False),
                    overwrite=run.overwrite,
                    world=run.world,
                    first_reward=reward,
                    before=before,
                    **overrides,
                )
                before = result.get("start_metrics")  # the same start: evaluated once
                by_arm[arm].append(result)
                print(
                    json.dumps({"seed": seed, "arm": arm, "held_out": _brief(result)}), flush=True
                )
    summary = scaffold_summary(by_arm)
    for line in scaffold_verdict(summary):
        print(line, flush=True)
    return [_card(run, by_arm, summary)]


def _brief(result: dict) -> list[dict]:
    keys = ("step", "tier", "accuracy", "parallel_ratio")
    return [{k: h.get(k) for k in keys} for h in result["held_out"]]


def _card(run: StudyRun, by_arm: dict[str, list[dict]], summary: dict) -> dict[str, Any]:
    first = by_arm["scaffold"][0]
    runs = [
        {"arm": arm, "seed": r["seed"], "runs": r["runs"], "seconds": r["seconds"]}
        for arm, results in by_arm.items()
        for r in results
    ]
    return {
        "profile": run.profile,
        "world": run.world,
        "variant": first["variant"],
        "init": first["init"],
        "switch_step": first["switch_step"],
        "total_steps": first["total_steps"],
        "seeds": run.seeds,
        "arms": WHAT,
        **summary,
        "verdict": scaffold_verdict(summary),
        "runs": runs,
    }

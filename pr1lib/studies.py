"""Multi-run studies on top of ``pr1lib.grpo``: the curriculum, the unseen Stage-2 study and the
mid-training scaffold (the reward ablation is ``pr1lib.ablation``).

* **curriculum**: every RL stage of a variant (``config.CURRICULA``: seen SFT -> 2 -> 3, unseen
  SFT -> 3), each from the previous one's ``merged/``; a finished stage is reused, not rerun;
* **unseen Stage-2 study**: the unseen variant with and without the seen recipe's Stage 2 (the
  paper found keeping it hurt, docs/recipe.md#9-the-stage-recipe-per-variant);
* **mid-training scaffold** (the paper's Figure 4): the alternating reward for the first steps,
  then accuracy only from that checkpoint;
* **dose-response**: how strongly the reward steers blocks, the alternating reward at several
  tiered steps per window and several bonuses b, on easy problems;
* **sampled accuracy**: mean@k, pass@k and the parallel ratio at T = 1 of a run folder, the
  paper's validation protocol, cached beside the model.

>>> curriculum("seen"), curriculum("unseen"), curriculum("unseen", keep_stage2=True)
((2, 3), (3,), (2, 3))
"""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path
from typing import Any, Sequence

from pr1lib.config import CURRICULA, VARIANTS, WORLD_INITS, GRPOStageConfig
from pr1lib.grpo import run_grpo, run_name
from pr1lib.paths import runs_dir
from pr1lib.profiles import check_profile
from pr1lib.runs import finished_run, start_id


# ----------------------------------------------------------------------------- curriculum
def curriculum(variant: str, keep_stage2: bool = False) -> tuple[int, ...]:
    """The stages a variant runs (``CURRICULA``); ``keep_stage2`` puts Stage 2 back for unseen."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    return (2, 3) if keep_stage2 else CURRICULA[variant]


def sft_run(variant: str, profile: str) -> Path | None:
    """The variant's SFT run folder: ``runs/sft-<profile>-<variant>`` (the command line), else
    ``runs/04_sft_lora-<profile>/<variant>`` (notebook 04); ``None`` when neither has
    ``merged/``."""
    root = runs_dir()
    for folder in (root / f"sft-{profile}-{variant}", root / f"04_sft_lora-{profile}" / variant):
        if (folder / "merged").is_dir():
            return folder
    return None


def world_init(world: str | None, variant: str = "seen") -> str | None:
    """The shipped start of a tiny world's RL (``WORLD_INITS``): the variant's SFT, or for the plain
    baseline its base model; ``None`` for the profile's own problems.

    >>> world_init("tinyworld"), world_init("tinyworld", "unseen"), world_init(None)
    ('data/tinyworld-sft', 'data/tinyworld-sft-unseen', None)
    """
    key = variant if variant in ("plain", "unseen") else "sft"
    return WORLD_INITS.get(world or "", {}).get(key)


def dose_dir(profile: str, world: str | None, seed: int) -> Path:
    """Where ``dose_response`` keeps its runs by default."""
    return runs_dir() / f"dose-response-{profile}-{world}-seed{seed}"


def default_init(stage: int, variant: str, profile: str, seed: int = 0) -> Path | None:
    """Where a stage starts by default: Stage 3 of a variant with a Stage 2 from the newest Stage 2
    run of this seed; else the variant's SFT run (``sft_run``); else ``None``, the base model
    (always so for the plain baseline, which has no SFT)."""
    if stage == 3 and 2 in CURRICULA[variant]:
        pattern = f"grpo-{profile}-{variant}-s2-*-seed{seed}/merged"
        found = sorted(runs_dir().glob(pattern), key=lambda p: p.stat().st_mtime)
        if found:
            return found[-1].parent
    return None if variant == "plain" else sft_run(variant, profile)


def run_curriculum(
    profile: str | None = None,
    variant: str = "seen",
    init: str | Path | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    keep_stage2: bool = False,
    stage_overrides: dict[int, dict] | None = None,
    sft_metrics: dict | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Every stage of ``curriculum(variant)``, each from the previous one's ``merged/``; returns
    ``{"stages": [result, ...], "sft": metrics of the start, "final": metrics of the end}``.
    ``sft_metrics`` reuses an earlier evaluation of ``init`` (the same for every seed)."""
    profile = check_profile(profile)
    init = init if init is not None else default_init(2, variant, profile, seed)
    root = Path(out) if out else runs_dir()
    results, before = [], sft_metrics
    for stage in curriculum(variant, keep_stage2):
        cfg = GRPOStageConfig.for_stage(
            stage,
            profile,
            variant=variant,
            seed=seed,
            **{**overrides, **(stage_overrides or {}).get(stage, {})},
        )
        out = root / run_name(cfg)
        done = finished_run(out, cfg, init)
        if done is None:
            done = run_grpo(cfg, init, out, before=before, preflight=False).result
        results.append(done)
        init, before = out, done["after"]
    return {
        "profile": profile,
        "variant": variant,
        "seed": seed,
        "stages": results,
        "sft": results[0]["before"],
        "final": results[-1]["after"],
    }


def seeds_summary(runs: Sequence[dict], tier: str = "hard") -> dict[str, Any]:
    """Held-out ``tier`` accuracy of the start (SFT) and the end, per seed, with mean and spread:
    mean@k at T = 1 (the protocol) and, under ``greedy``, greedy accuracy.

    >>> at = lambda a, g: {"hard": {"accuracy": a, "greedy": {"accuracy": g}}}
    >>> s = seeds_summary([{"sft": at(0.1, 0.2), "final": at(0.3, 0.2)},
    ...                    {"sft": at(0.1, 0.2), "final": at(0.2, 0.25)}])
    >>> s["final_mean"], s["gain_mean"], s["greedy"]["gain_mean"]
    (0.25, 0.15, 0.025)
    """

    def accuracy(metrics: dict, greedy: bool) -> float:
        return metrics[tier]["greedy"]["accuracy"] if greedy else metrics[tier]["accuracy"]

    out = {"tier": tier, "n_seeds": len(runs)}
    for greedy in (False, True):
        gains = _gains(
            [accuracy(r["sft"], greedy) for r in runs], [accuracy(r["final"], greedy) for r in runs]
        )
        out.update({"greedy": gains} if greedy else gains)
    return out


def seed_rows(result: dict, tier: str = "hard") -> list[dict]:
    """One row per seed of a curriculum result (``run_curriculum`` over seeds, as its card keeps
    it): held-out ``tier`` mean@k at T = 1 of the start and the end, greedy beside them, and the
    share of samples that open a block.

    >>> at = lambda a: {"hard": {"accuracy": a, "parallel_ratio": 0.5, "greedy": {"accuracy": a}}}
    >>> seed_rows({"runs": [{"seed": 0, "sft": at(0.25), "final": at(0.5)}]})[0]["gain"]
    0.25
    """
    rows = []
    for run in result.get("runs", [result]):
        start, end = run["sft"][tier], run["final"][tier]
        rows.append(
            {
                "seed": run["seed"],
                "start": start["accuracy"],
                "end": end["accuracy"],
                "gain": round(end["accuracy"] - start["accuracy"], 4),
                "greedy start": start["greedy"]["accuracy"],
                "greedy end": end["greedy"]["accuracy"],
                "parallel start": start["parallel_ratio"],
                "parallel end": end["parallel_ratio"],
            }
        )
    return rows


def _gains(sft: list[float], final: list[float]) -> dict[str, Any]:
    gain = [f - s for s, f in zip(sft, final)]
    spread = lambda xs: round(statistics.stdev(xs), 4) if len(xs) > 1 else 0.0  # noqa: E731
    return {
        "sft": sft,
        "final": final,
        "sft_mean": round(statistics.fmean(sft), 4),
        "final_mean": round(statistics.fmean(final), 4),
        "final_std": spread(final),
        "gain_mean": round(statistics.fmean(gain), 4),
        "gain_std": spread(gain),
        "improved_seeds": sum(g > 0 for g in gain),
    }


# ----------------------------------------------------------------------------- dose-response
DOSES = (0, 2, 5, 10)  # tiered steps per window of 10 (0: accuracy only; 10: tiered every step)
BONUSES = (0.0, 0.2, 0.5, 1.0)  # b, at the paper's 2 tiered steps of every 10


def world_headline(result: dict, model: str, world: str = "tinyworld"):
    """The headline rows of a world's Stage 3 run (``run_grpo``'s ``result``): its SFT start and
    the model after RL, per tier: mean@k and pass@k at T = 1, parallel %, greedy accuracy (%).

    >>> m = dict(accuracy=.5, pass_at_k=.75, parallel_ratio=.25, k=4, greedy={"accuracy": .5})
    >>> t = world_headline({"before": {"hard": m}, "after": {"hard": m}}, "tiny")
    >>> t.shape, float(t.iloc[1, 0])
    ((2, 4), 50.0)
    """
    import pandas as pd

    rows = {}
    for when, name in (("before", "Parallel-SFT-Seen (start)"), ("after", "Parallel-R1-Seen")):
        row = {}
        for tier, m in result[when].items():
            col = f"ours: {model} | {world}-{tier}"
            row.update(
                {
                    f"{col} mean@{m['k']}": m["accuracy"],
                    f"{col} pass@{m['k']}": m["pass_at_k"],
                    f"{col} parallel %": m["parallel_ratio"],
                    f"{col} greedy": m["greedy"]["accuracy"],
                }
            )
        rows[name] = row
    frame = (pd.DataFrame(rows).T * 100).round(1)
    frame.index.name = "method"
    return frame


def dose_arms(doses: Sequence[int] = DOSES, bonuses: Sequence[float] = BONUSES) -> list[tuple]:
    """The (tiered steps, b) of each run: every dose at the paper's b, every b at 2 of 10.

    >>> dose_arms((0, 2), (0.2, 0.5))
    [(0, 0.2), (2, 0.2), (2, 0.5)]
    """
    arms = [(d, 0.2) for d in doses] + [(2, b) for b in bonuses]
    return list(dict.fromkeys(arms))


def dose_response(
    profile: str | None = None,
    init: str | Path | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    world: str | None = "tinyworld",
    arms: Sequence[tuple] | None = None,
    **overrides: Any,
) -> list[dict]:
    """Stage-2 runs (easy problems, where a block costs almost nothing) with the alternating
    reward, one per ``arms`` (tiered steps per window of 10, bonus b); one row per run with the
    held-out easy tier's parallel ratio and accuracy (mean@k at T = 1, greedy beside it) and the
    training samples' parallel ratio over the last steps. A finished run is reused."""
    profile = check_profile(profile)
    init = init or world_init(world) or default_init(2, "seen", profile, seed)
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
                cfg, init, folder, before=before, preflight=False, evaluate_tiers=("easy",)
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


RECIPES = {"direct": "SFT → Stage 3 (paper)", "kept": "SFT → Stage 2 → Stage 3"}


def unseen_stage2_dir(profile: str, seed: int) -> Path:
    """Where ``unseen_stage2_effect`` keeps its runs and result unless told otherwise."""
    return runs_dir() / f"grpo-unseen-stage2-{profile}-seed{seed}"


def unseen_stage2_effect(
    profile: str | None = None,
    init: str | Path | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    refresh: bool = False,
    **overrides: Any,
) -> dict[str, Any]:
    """The unseen variant from its SFT checkpoint two ways: Stage 3 directly (the paper's recipe)
    and Stage 2 then Stage 3 (the seen recipe kept). The result is cached in
    ``OUT/unseen_stage2.json`` and reused while the start and the overrides are the same."""
    profile = check_profile(profile)
    out = Path(out) if out else unseen_stage2_dir(profile, seed)
    path = out / "unseen_stage2.json"
    init = init if init is not None else default_init(2, "unseen", profile, seed)
    result: dict[str, Any] = {
        "init": start_id(init),
        "overrides": json.loads(json.dumps(overrides, default=str)),
    }
    cached = json.loads(path.read_text()) if path.exists() and not refresh else {}
    if {k: cached.get(k) for k in ("init", "overrides")} == {
        k: result[k] for k in ("init", "overrides")
    }:
        return cached
    for name, keep in (("direct", False), ("kept", True)):
        runs = run_curriculum(
            profile, "unseen", init, seed, out / name, keep_stage2=keep, **overrides
        )
        result[name] = {
            "stages": [
                {k: r[k] for k in ("stage", "reward", "steps", "after", "train")}
                for r in runs["stages"]
            ],
            "sft": runs["sft"],
            "final": runs["final"],
        }
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str))
    return result


def unseen_stage2_table(effect: dict[str, Any]) -> dict[str, Any]:
    """``unseen_stage2_effect``'s start and one row per recipe: held-out accuracy (mean@k at
    T = 1, greedy beside it) at the start and the end, and the end's parallel ratio.

    >>> at = lambda a: {t: {"accuracy": a, "parallel_ratio": 0.5, "greedy": {"accuracy": a}}
    ...                 for t in ("easy", "hard")}
    >>> table = unseen_stage2_table({"init": "runs/x", **{n: {"sft": at(0.1), "final": at(0.2)}
    ...                                                   for n in RECIPES}})
    >>> rows = table["rows"]
    >>> rows[1]["recipe"], rows[1]["hard_accuracy"], rows[1]["sft_hard_accuracy"]
    ('SFT → Stage 2 → Stage 3', 0.2, 0.1)
    """
    rows = []
    for name, recipe in RECIPES.items():
        sft, final = effect[name]["sft"], effect[name]["final"]
        rows.append(
            {
                "recipe": recipe,
                "sft_hard_accuracy": sft["hard"]["accuracy"],
                "hard_accuracy": final["hard"]["accuracy"],
                "hard_greedy_accuracy": final["hard"]["greedy"]["accuracy"],
                "easy_accuracy": final["easy"]["accuracy"],
                "easy_greedy_accuracy": final["easy"]["greedy"]["accuracy"],
                "hard_parallel_ratio": final["hard"]["parallel_ratio"],
            }
        )
    return {"init": effect["init"], "rows": rows}


# ----------------------------------------------------------- the mid-training scaffold (Figure 4)
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
    profile: str | None = None,
    init: str | Path | None = None,
    switch_step: int = 10,
    total_steps: int = 20,
    seed: int = 0,
    variant: str = "unseen",
    out: str | Path | None = None,
    tiers: tuple[str, ...] = ("hard",),
    refresh: bool = False,
    **overrides: Any,
) -> dict[str, Any]:
    """Alternating reward for steps [0, ``switch_step``), then a second run from that checkpoint
    with the accuracy reward up to ``total_steps`` (both ``run_grpo``, Stage 3 data; phase 2 uses
    ``seed + 1`` so its prompts are new ones). Returns ``curve`` (training rows, steps counted from
    the start of phase 1, ``phase`` = ``alternating`` / ``accuracy``), ``held_out`` (the stage
    metrics on ``tiers`` at the start, switch and end)
    and the two run folders. Cached in ``OUT/mid_training.json`` until ``refresh`` or a change."""
    profile = check_profile(profile)
    out = Path(out) if out else runs_dir() / f"mid-training-{profile}-{variant}-seed{seed}"
    first, second = _scaffold_configs(profile, switch_step, total_steps, seed, variant, overrides)
    key = json.dumps(
        {"init": str(init), "configs": [first.to_dict(), second.to_dict()], "tiers": tiers},
        sort_keys=True,
        default=str,
    )
    cache = out / "mid_training.json"
    if cache.exists() and not refresh and json.loads(cache.read_text()).get("key") == key:
        return json.loads(cache.read_text())["result"]
    if cache.exists():  # another config (or refresh): its checkpoints must not be resumed
        for phase in ("alternating", "accuracy"):
            shutil.rmtree(out / phase, ignore_errors=True)
        cache.unlink()
    run1 = run_grpo(first, init, out / "alternating", evaluate_tiers=tiers, preflight=False)
    run2 = run_grpo(
        second,
        run1.run_dir,
        out / "accuracy",
        evaluate_tiers=tiers,
        before=run1.result["after"],
        preflight=False,
    )
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
    result = {
        "profile": profile,
        "variant": variant,
        "seed": seed,
        "init": str(init or "the base model"),
        "switch_step": switch_step,
        "total_steps": total_steps,
        "curve": curve,
        "held_out": held,
        "runs": [str(run1.run_dir), str(run2.run_dir)],
        "seconds": round(run1.result["seconds"] + run2.result["seconds"], 1),
    }
    out.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"key": key, "result": result}, indent=2, default=str))
    return result

"""The curriculum study: every RL stage of a variant (``config.CURRICULA``: seen SFT -> Stage 2 ->
Stage 3, unseen SFT -> Stage 3), each from the previous one's ``merged/``, over seeds; a finished
stage is reused, not rerun. Its card keeps the start's and the end's held-out accuracy per seed
(``seeds_summary``).

>>> curriculum("seen"), curriculum("unseen"), curriculum("unseen", keep_stage2=True)
((2, 3), (3,), (2, 3))
"""

from __future__ import annotations

import contextlib
import json
import statistics
from pathlib import Path
from typing import Any, Sequence

from pr1lib.config import CURRICULA, VARIANTS, GRPOStageConfig
from pr1lib.experiments import StudyRun
from pr1lib.store.paths import runs_dir
from pr1lib.training.grpo import run_grpo, run_name
from pr1lib.training.runs import CARD, finished_run, follow_hidden_plans
from pr1lib.training.starts import default_init


def curriculum(variant: str, keep_stage2: bool = False) -> tuple[int, ...]:
    """The stages a variant runs (``CURRICULA``); ``keep_stage2`` puts Stage 2 back for unseen."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    return (2, 3) if keep_stage2 else CURRICULA[variant]


def run_curriculum(
    profile: str,
    variant: str = "seen",
    init: str | Path | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    keep_stage2: bool = False,
    stage_overrides: dict[int, dict] | None = None,
    sft_metrics: dict | None = None,
    overwrite: bool = False,
    stages: tuple[int, ...] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Every stage of ``curriculum(variant)`` (or of ``stages``, where a study names them: a
    Stage-3-only arm of any variant), each from the previous one's ``merged/``; returns
    ``{"stages": [result, ...], "sft": metrics of the start, "final": metrics of the end}``.
    ``sft_metrics`` reuses an earlier evaluation of ``init`` (the same for every seed); a stage
    folder holding another run is refused unless ``overwrite`` (it moves aside)."""
    init = init if init is not None else default_init(2, variant, profile, seed)
    root = Path(out) if out else runs_dir()
    results, before = [], sft_metrics
    for stage in stages or curriculum(variant, keep_stage2):
        cfg = GRPOStageConfig.for_stage(
            stage,
            profile,
            variant=variant,
            seed=seed,
            **{**overrides, **(stage_overrides or {}).get(stage, {})},
        )
        # the config as run_grpo trains it (a start with hidden plans keeps them), so a finished
        # run of that config is reused, not resumed at its last step and its card rewritten
        cfg = follow_hidden_plans(cfg, init)
        out = root / run_name(cfg)
        done = finished_run(out, cfg, init)
        if done is None:
            done = run_grpo(
                cfg, init, out, before=before, preflight=False, overwrite=overwrite
            ).result
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


def main(run: StudyRun) -> list[dict]:
    """``study curriculum``: the variant's stages per seed; the start is evaluated once (the
    held-out sets do not depend on the seed). With several seeds, one summary over them."""
    variant, init = run.option("variant", "seen"), run.init(run.option("variant", "seen"))
    results: list[dict] = []
    for seed in run.seeds:
        out = run.out / f"seed{seed}" if run.out else None
        with run.claim(out) if out else contextlib.nullcontext():
            result = run_curriculum(
                run.profile,
                variant,
                init,
                seed,
                out,
                sft_metrics=results[0]["sft"] if results else None,
                overwrite=run.overwrite,
                **run.grpo_overrides(),
            )
        results.append(result)
        print(
            json.dumps({"seed": seed, **{k: result.get(k) for k in ("sft", "final")}}, default=str),
            flush=True,
        )
    return [{"seeds": seeds_summary(results), "runs": results}] if len(results) > 1 else results


def arm_summary(runs: list[dict], tier: str = "hard") -> dict[str, Any]:
    """What an arm's card keeps: the seeds' accuracies (``seeds_summary``) and, per seed, the end's
    accuracy, block rate, tokens and sequential decode steps, and its accuracy under step caps."""
    keys = ("accuracy", "pass_at_k", "parallel_ratio", "valid_ratio", "mean_length")
    keys += ("mean_sequential_steps", "accuracy_at_steps")
    return {
        "seeds": seeds_summary(runs, tier) if len(runs) > 1 else None,
        "runs": [
            {
                "seed": r["seed"],
                "start": {k: r["sft"][tier].get(k) for k in keys},
                "end": {k: r["final"][tier].get(k) for k in keys},
                "greedy": r["final"][tier].get("greedy", {}).get("accuracy"),
            }
            for r in runs
        ],
    }


def stage_cards(root: Path, arm: str, seeds: list[int], stage: str = "s3") -> list[dict]:
    """Each seed's run card of its Stage ``stage`` (``s2``, ``s3``) under ``root/arm``."""
    out = []
    for seed in seeds:
        cards = sorted((root / arm / f"seed{seed}").glob(f"grpo-*-{stage}-*/" + CARD))
        if not cards:
            raise ValueError(
                f"no finished Stage {stage[1]} of arm {arm!r}, seed {seed} under {root}: run "
                f"python -m pr1lib study controls --arm {arm} --seeds {seed}"
            )
        out.append(json.loads(cards[-1].read_text()))
    return out


def final_hard(root: Path, arm: str, seeds: list[int], stage: str = "s3", when: str = "after"):
    """The held-out hard metrics at the end of each seed's Stage 3 (from its run card); with
    ``stage="s2", when="before"``: the arm's start, its cold start before any RL."""
    return [card[when]["hard"] for card in stage_cards(root, arm, seeds, stage)]

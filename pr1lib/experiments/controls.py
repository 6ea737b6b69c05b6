"""Is it parallel thinking, or just more search? Five arms on one world, same problems and steps.

Parallel-R1's gain over plain GRPO mixes two things: the cold start teaches a *search* (in
TinyWorld: try every pair and check it), and it writes that search inside ``<Parallel>`` blocks.
The arms separate them (docs/tinyworld.md#parallel-or-just-more-search):

| arm | cold start | RL (Stage 2, then 3) |
|---|---|---|
| ``plain`` | none: the base model | plain GRPO (accuracy) |
| ``plain-sft`` | the same rows, every one a plain one-guess solution | plain GRPO |
| ``serial`` | the same rows, the search written without tags (``format.serialize``) | plain GRPO |
| ``seen`` | the shipped SFT: the search in blocks, paths see each other | Parallel-R1-Seen |
| ``unseen`` | the same search in blocks with numbered paths, the unseen mask | Parallel-R1-Unseen |

Every arm runs Stage 2 (easy problems) then Stage 3 (hard ones) with the same steps, seeds and
problems, and is evaluated on the same held-out problems in the rollout mode it trains with. An
arm's cold start is the world's shipped checkpoint where there is one, else an SFT the study
trains once (the seen SFT's config with ``plain_share=1`` or ``trace_style="serial"``) and reuses.
Besides accuracy, every evaluation counts *sequential decode steps* (``metrics.sample_stats``):
paths decoded side by side cost their longest path, so the same search can finish in fewer steps.

>>> sorted(ARMS)
['plain', 'plain-sft', 'seen', 'serial', 'unseen']
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pr1lib import worlds
from pr1lib.config import SFTStageConfig
from pr1lib.experiments import StudyRun
from pr1lib.experiments.curriculum import run_curriculum, seeds_summary
from pr1lib.metrics import mean_interval, paired_bootstrap
from pr1lib.paths import runs_dir
from pr1lib.runs import CARD


@dataclass(frozen=True)
class Arm:
    """One arm: the variant its RL trains, and its cold start (``None``: the base model; a dict:
    the SFT overrides on top of the world's seen SFT, trained by the study; ``"shipped"``: the
    world's checkpoint of that variant)."""

    variant: str
    cold_start: str | dict[str, Any] | None
    what: str
    sft_variant: str = "seen"
    grpo: dict[str, Any] = field(default_factory=dict)


ARMS = {
    "plain": Arm("plain", None, "plain GRPO from the base model"),
    "plain-sft": Arm("plain", {"plain_share": 1.0}, "plain SFT on the same rows, then plain GRPO"),
    "serial": Arm(
        "plain", {"trace_style": "serial"}, "the search without tags (serial SFT), then plain GRPO"
    ),
    "seen": Arm("seen", "shipped", "Parallel-R1-Seen: the search in blocks, paths see each other"),
    "unseen": Arm(
        "unseen",
        {"path_headers": True},
        "Parallel-R1-Unseen: numbered paths that cannot see each other",
        sft_variant="unseen",
        grpo={"path_headers": True},
    ),
}


def controls_dir(profile: str, world: str) -> Path:
    return runs_dir() / f"controls-{profile}-{world}"


def sft_config(world: str, profile: str, arm: str, seed: int = 0) -> SFTStageConfig:
    """The cold start an arm trains: the world's SFT with the arm's overrides."""
    spec = ARMS[arm]
    return SFTStageConfig.for_world(world, profile, spec.sft_variant, seed=seed, **spec.cold_start)


def cold_start(world: str, profile: str, arm: str, root: Path) -> str | None:
    """Where an arm's RL starts: the base model, the world's shipped SFT, or the arm's own SFT
    (trained here once, into ``ROOT/ARM/sft``, and reused while its config is the same)."""
    spec, chosen = ARMS[arm], worlds.get(world)
    if spec.cold_start is None:
        return chosen.init("plain")
    if spec.cold_start == "shipped":
        return chosen.init(spec.variant)
    cfg, folder = sft_config(world, profile, arm), root / arm / "sft"
    card = folder / CARD
    done = card.is_file() and json.loads(card.read_text()).get("config") == cfg.to_dict()
    if not done:
        from pr1lib.models import stage_model_config
        from pr1lib.sft import run_sft

        model_cfg = stage_model_config(cfg, chosen.init("plain"))
        run_sft(cfg, out=folder, evaluate=False, model_cfg=model_cfg, quiet=True)
    return str(folder)


def run_arm(
    profile: str,
    world: str,
    arm: str,
    seeds: list[int],
    init: str | None = None,
    out: Path | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """One arm over ``seeds``: its cold start, then Stage 2 and Stage 3 per seed; the start is
    evaluated once (the held-out sets do not depend on the seed)."""
    spec, root = ARMS[arm], Path(out) if out else controls_dir(profile, world)
    start = init or cold_start(world, profile, arm, root)
    runs: list[dict] = []
    for seed in seeds:
        runs.append(
            run_curriculum(
                profile,
                spec.variant,
                start,
                seed,
                root / arm / f"seed{seed}",
                keep_stage2=True,  # every arm: Stage 2 then Stage 3, the profile's steps
                sft_metrics=runs[0]["sft"] if runs else None,
                world=world,
                **{**spec.grpo, **overrides},
            )
        )
    return {"arm": arm, "what": spec.what, "start": start, **arm_summary(runs)}


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


# the comparisons the table draws (treatment, control), each a paired bootstrap over problems
CONTRASTS = (("seen", "plain"), ("seen", "plain-sft"), ("seen", "serial"), ("unseen", "serial"))


def final_hard(root: Path, arm: str, seeds: list[int], stage: str = "s3", when: str = "after"):
    """The held-out hard metrics at the end of each seed's Stage 3 (from its run card); with
    ``stage="s2", when="before"``: the arm's start, its cold start before any RL."""
    out = []
    for seed in seeds:
        cards = sorted((root / arm / f"seed{seed}").glob(f"grpo-*-{stage}-*/" + CARD))
        if not cards:
            raise ValueError(
                f"no finished Stage {stage[1]} of arm {arm!r}, seed {seed} under {root}: run "
                f"python -m pr1lib study controls --arm {arm} --seeds {seed}"
            )
        out.append(json.loads(cards[-1].read_text())[when]["hard"])
    return out


def controls_table(root: Path, seeds: list[int], arms: tuple[str, ...] = tuple(ARMS)) -> dict:
    """One row per arm: means over the seeds of the end's hard accuracy (with a 95 % interval over
    problems), of the start's, greedy, block rate, tokens, sequential decode steps and accuracy
    under step caps; and the ``CONTRASTS``: differences with a 95 % paired bootstrap over problems
    (each problem's accuracy averaged over the seeds)."""
    ends = {arm: final_hard(root, arm, seeds) for arm in arms}
    starts = {arm: final_hard(root, arm, seeds, "s2", "before") for arm in arms}
    per_problem = {arm: _problem_means(ends[arm]) for arm in arms}
    rows = [
        {
            "arm": arm,
            "what": ARMS[arm].what,
            **_mean_row(ends[arm]),
            "start": round(statistics.fmean(e["accuracy"] for e in starts[arm]), 4),
            "interval": {k: round(v, 4) for k, v in mean_interval(per_problem[arm]).items()},
        }
        for arm in arms
    ]
    contrasts = {
        f"{a}-{b}": {
            k: round(v, 4) for k, v in paired_bootstrap(per_problem[a], per_problem[b]).items()
        }
        for a, b in CONTRASTS
        if a in arms and b in arms
    }
    return {"seeds": seeds, "rows": rows, "contrasts": contrasts}


def verdict(table: dict[str, Any]) -> list[str]:
    """One line per contrast, computed from the numbers: the gap, its interval and whether it is
    beyond noise; then what the unseen arm's paths save in sequential decode steps.

    >>> row = lambda arm, acc, steps: {"arm": arm, "accuracy": acc, "mean_sequential_steps": steps}
    >>> t = {"rows": [row("unseen", 0.5, 60.0), row("serial", 0.5, 100.0)],
    ...      "contrasts": {"unseen-serial": {"diff": 0.01, "low": -0.03, "high": 0.05}}}
    >>> verdict(t)[0]
    'unseen vs serial: accuracy +1.0 points (95 % interval -3.0 to +5.0): within the noise'
    >>> verdict(t)[1]
    'unseen decodes in 0.60x the sequential steps of serial (60 vs 100)'
    """
    from pr1lib.headline import change_words

    lines = [
        change_words(name.replace("-", " vs ", 1), {k: 100 * v for k, v in c.items()})
        for name, c in table["contrasts"].items()
    ]
    rows = {r["arm"]: r for r in table["rows"]}
    if "unseen" in rows and "serial" in rows:
        a, b = rows["unseen"]["mean_sequential_steps"], rows["serial"]["mean_sequential_steps"]
        lines.append(
            f"unseen decodes in {a / b:.2f}x the sequential steps of serial ({a:.0f} vs {b:.0f})"
        )
    return lines


def _mean_row(ends: list[dict]) -> dict[str, Any]:
    keys = ("accuracy", "pass_at_k", "parallel_ratio", "mean_length", "mean_sequential_steps")
    row = {k: round(statistics.fmean(e[k] for e in ends), 4) for k in keys}
    row["greedy"] = round(statistics.fmean(e["greedy"]["accuracy"] for e in ends), 4)
    caps = ends[0].get("accuracy_at_steps", {})
    row["accuracy_at_steps"] = {
        cap: round(statistics.fmean(e["accuracy_at_steps"][cap] for e in ends), 4) for cap in caps
    }
    return row


def _problem_means(ends: list[dict]) -> list[float]:
    """Each problem's accuracy, averaged over the seeds (the same problems, in the same order)."""
    columns = [e["per_problem"]["accuracy"] for e in ends]
    return [statistics.fmean(values) for values in zip(*columns)]


def main(run: StudyRun) -> list[dict]:
    """``study controls --arm A``: one arm over the seeds (one card); without ``--arm``: the table
    of all five from their finished runs (no training)."""
    world, arm = run.world or "tinyworld", run.option("arm")
    out = run.out or controls_dir(run.profile, world)
    if arm is None:
        table = controls_table(out, run.seeds)
        for row in table["rows"]:
            print(json.dumps({k: row[k] for k in ("arm", "accuracy", "mean_sequential_steps")}))
        return [{"profile": run.profile, "world": world, **table}]
    overrides = {k: v for k, v in run.grpo_overrides().items() if k != "world"}
    with run.claim(out / arm):
        result = run_arm(run.profile, world, arm, run.seeds, run.option("init"), out, **overrides)
    print(json.dumps({k: result[k] for k in ("arm", "start", "seeds")}, default=str), flush=True)
    return [{"profile": run.profile, "world": world, **result}]

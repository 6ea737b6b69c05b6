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

>>> sorted(ARMS)  # doctest: +NORMALIZE_WHITESPACE
['plain', 'plain-sft', 'seen', 'serial', 'serial-s3', 'serial-s3-honest', 'unseen',
 'unseen-noplan', 'unseen-s3', 'unseen-s3-checked', 'unseen-s3-honest']
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from pr1lib import worlds
from pr1lib.config import GRPOStageConfig, SFTStageConfig
from pr1lib.evaluation.seedstats import (
    BOOTSTRAP_SEEDS,
    mean_row,
    per_seed,
    rounded,
    two_level,
    width_columns,
)
from pr1lib.experiments import StudyRun, add_wall, wall_times
from pr1lib.experiments.curriculum import arm_summary, final_hard, run_curriculum, stage_cards
from pr1lib.experiments.split import measure_split, split_columns
from pr1lib.store.paths import runs_dir
from pr1lib.training.runs import CARD
from pr1lib.worlds.planworld import BLIND


@dataclass(frozen=True)
class Arm:
    """One arm: the variant its RL trains, and its cold start (``None``: the base model; a dict:
    the SFT overrides on top of the world's seen SFT, trained by the study; ``"shipped"``: the
    world's checkpoint of that variant, trained by the study like a dict where the world ships
    none). ``stages``: the RL stages it runs; ``sft_of``: the arm whose cold starts it shares.
    ``rl_of`` and ``then``: an arm that goes on from arm ``rl_of``'s finished RL of the same seed
    (trained in ``rl_of``'s folder where missing) for one more Stage 3 with the config changes
    ``then`` (a grader switch: docs/planworld.md, regime 13)."""

    variant: str
    cold_start: str | dict[str, Any] | None
    what: str
    sft_variant: str = "seen"
    grpo: dict[str, Any] = field(default_factory=dict)
    stages: tuple[int, ...] = (2, 3)
    sft_of: str | None = None
    rl_of: str | None = None
    then: dict[str, Any] = field(default_factory=dict)


NUMBERED = {"path_headers": True}  # paths open with their numbers (TinyWorld's extension)
# 150 more Stage-3 steps at half the learning rate, under the honest grader (a path's check must
# be right for its answer to count) or, the control, under PlanWorld's checked grader
HONEST = {"grader": "honest", "learning_rate": 5e-5, "max_steps": 150}
CHECKED = {**HONEST, "grader": "checked"}
ARMS = {
    "plain": Arm("plain", None, "plain GRPO from the base model"),
    "plain-sft": Arm("plain", {"plain_share": 1.0}, "plain SFT on the same rows, then plain GRPO"),
    "serial": Arm(
        "plain", {"trace_style": "serial"}, "the search without tags (serial SFT), then plain GRPO"
    ),
    "serial-s3": Arm(
        "plain",
        {"trace_style": "serial"},
        "the serial search, then Stage 3 only (as many RL steps): unseen-s3's control",
        stages=(3,),
        sft_of="serial",
    ),
    "seen": Arm("seen", "shipped", "Parallel-R1-Seen: the search in blocks, paths see each other"),
    "unseen": Arm(
        "unseen",
        NUMBERED,
        "Parallel-R1-Unseen: paths that cannot see each other, each opened by its header",
        sft_variant="unseen",
        grpo=NUMBERED,
    ),
    "unseen-s3": Arm(
        "unseen",
        NUMBERED,
        "Parallel-R1-Unseen in the paper's curriculum: SFT, then Stage 3 only (as many RL steps)",
        sft_variant="unseen",
        grpo=NUMBERED,
        stages=(3,),
        sft_of="unseen",
    ),
    "unseen-noplan": Arm(
        "unseen",
        {"trace_style": "noplan", "hide_plan": False},  # no plan line to hide
        "Parallel-R1-Unseen with the plan removed: paths told nothing",
        sft_variant="unseen",
        grpo=BLIND,
    ),
}
# arms that go on from a Stage-3-only arm's finished RL (docs/planworld.md, regime 13)
ARMS |= {
    "unseen-s3-honest": replace(
        ARMS["unseen-s3"],
        what="unseen-s3, then 150 Stage-3 steps under the honest grader at lr 5e-5",
        rl_of="unseen-s3",
        then=HONEST,
    ),
    "unseen-s3-checked": replace(
        ARMS["unseen-s3"],
        what="unseen-s3, then 150 steps under the checked grader: unseen-s3-honest's control",
        rl_of="unseen-s3",
        then=CHECKED,
    ),
    "serial-s3-honest": replace(
        ARMS["serial-s3"],
        what="serial-s3, then the same 150 honest steps: unseen-s3-honest's control",
        rl_of="serial-s3",
        then=HONEST,
    ),
}
# --arm all: every arm, in this order, then the table (serial-s3, the Stage-3-only control, and
# the arms that go on from another's RL, by name)
ALL = tuple(a for a in ARMS if a != "serial-s3" and not ARMS[a].rl_of)


# --arm switch: the arms that go on from another arm's RL, then the table of every arm that ran
SWITCH = tuple(a for a in ARMS if ARMS[a].rl_of)


def chosen_arms(world: str, arm: str | None) -> tuple[str, ...]:
    """The arms ``--arm`` trains: ``all`` (``runnable``), ``switch`` (``SWITCH``), one, or none
    (the table only). The switch arms grade with PlanWorld's checked and honest graders, which
    read a deal's letter and its check: refused in a world without planned blocks.

    >>> chosen_arms("planworld", "switch")
    ('unseen-s3-honest', 'unseen-s3-checked', 'serial-s3-honest')
    """
    names = {"all": runnable(world), "switch": SWITCH, None: ()}.get(arm, (arm,))
    if set(names) & set(SWITCH) and worlds.get(world).layout().get("header_style") != "plan":
        raise ValueError(
            f"--arm {arm} grades with PlanWorld's checked and honest graders (a deal's letter and "
            f"its check): {world} has no planned blocks; use --world planworld"
        )
    return names


def runnable(world: str) -> tuple[str, ...]:
    """The arms ``--arm all`` runs in ``world``: the plan-removed one only where a plan is written.

    >>> "unseen-noplan" in runnable("tinyworld"), "unseen-noplan" in runnable("planworld")
    (False, True)
    """
    planned = worlds.get(world).layout().get("header_style") == "plan"
    return tuple(a for a in ALL if a != "unseen-noplan" or planned)


def arm_spec(world: str, arm: str) -> Arm:
    """``ARMS[arm]`` as it runs in ``world``: a world whose traces number their own paths (its
    ``layout``) needs no numbering on top, and a shipped start the world lacks is trained."""
    spec, chosen = ARMS[arm], worlds.get(world)
    own = chosen.layout().get("path_headers", False)
    cold = spec.cold_start
    if cold == "shipped" and chosen.init(spec.variant) is None:
        cold = {}
    if own and isinstance(cold, dict):
        cold = {k: v for k, v in cold.items() if k not in NUMBERED}
    grpo = {k: v for k, v in spec.grpo.items() if not (own and k in NUMBERED)}
    return replace(spec, cold_start=cold, grpo=grpo)


def controls_dir(profile: str, world: str) -> Path:
    return runs_dir() / f"controls-{profile}-{world}"


def sft_config(world: str, profile: str, arm: str, seed: int = 0) -> SFTStageConfig:
    """The cold start an arm trains: the world's SFT with the arm's overrides."""
    spec = arm_spec(world, arm)
    return SFTStageConfig.for_world(world, profile, spec.sft_variant, seed=seed, **spec.cold_start)


def sft_folder(root: Path, arm: str, sft_seed: int = 0) -> Path:
    """``ROOT/ARM/sft`` (SFT seed 0) or ``ROOT/ARM/sft-sN``; an arm that shares another's cold
    starts (``sft_of``) uses that arm's folders."""
    owner = ARMS[arm].sft_of or arm
    return root / owner / ("sft" if sft_seed == 0 else f"sft-s{sft_seed}")


def cold_start(world: str, profile: str, arm: str, root: Path, sft_seed: int = 0) -> str | None:
    """Where an arm's RL starts: the base model, the world's shipped SFT, or the arm's own SFT
    of ``sft_seed`` (trained here once, into ``sft_folder``, and reused while its config is the
    same)."""
    spec, chosen = arm_spec(world, arm), worlds.get(world)
    if spec.cold_start is None:
        return chosen.init("plain")
    if spec.cold_start == "shipped":
        return chosen.init(spec.variant)
    cfg, folder = sft_config(world, profile, arm, sft_seed), sft_folder(root, arm, sft_seed)
    card = folder / CARD
    done = card.is_file() and json.loads(card.read_text()).get("config") == cfg.to_dict()
    if not done:
        from pr1lib.decoding.models import stage_model_config
        from pr1lib.training.sft import run_sft

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
    sft_seeds: Sequence[int] = (0,),
    **overrides: Any,
) -> dict[str, Any]:
    """One arm over ``seeds``: its cold start (the i-th RL seed starts from SFT seed
    ``sft_seeds[i % len(sft_seeds)]``), then its RL stages per seed; each start is evaluated once
    (the held-out sets do not depend on the seed). Where the world assigns its paths shares
    (``block_splits``), a parallel arm's split rate is measured after SFT and after RL."""
    spec, root = arm_spec(world, arm), Path(out) if out else controls_dir(profile, world)
    runs: list[dict] = []
    evaluated: dict[str, dict] = {}
    for i, seed in enumerate(seeds):
        sft_seed = sft_seeds[i % len(sft_seeds)]
        start = init or cold_start(world, profile, arm, root, sft_seed)
        # an arm that goes on from another's RL: that arm's run of this seed first
        result = arm_rl(
            profile,
            world,
            spec.rl_of or arm,
            start,
            seed,
            root,
            evaluated.get(str(start)),
            overrides,
        )
        if spec.rl_of:
            result = go_on(profile, world, arm, seed, root, result, overrides)
        evaluated.setdefault(str(start), result["sft"])
        end = result["stages"][-1]["run_dir"]
        runs.append({**result, "sft_seed": sft_seed, "start": str(start), "end": end})
    return {
        "arm": arm,
        "what": spec.what,
        "start": runs[0]["start"] if runs else None,
        "stages": list(spec.stages),
        "sft_seeds": [r["sft_seed"] for r in runs],
        **arm_summary(runs),
        "splits": arm_splits(profile, world, spec, runs, root, arm),
    }


def arm_rl(
    profile: str,
    world: str,
    arm: str,
    start: str,
    seed: int,
    root: Path,
    sft_metrics: dict | None,
    overrides: dict,
) -> dict[str, Any]:
    """Arm ``arm``'s RL stages for ``seed`` from ``start``, into ``root/ARM/seedN`` (a finished
    run reused): ``run_curriculum``'s result."""
    spec = arm_spec(world, arm)
    return run_curriculum(
        profile,
        spec.variant,
        start,
        seed,
        root / arm / f"seed{seed}",
        stages=spec.stages,
        stage_overrides=_stage_overrides(profile, world, spec, overrides),
        sft_metrics=sft_metrics,
        world=world,
        **{**spec.grpo, **overrides},
    )


def go_on(
    profile: str, world: str, arm: str, seed: int, root: Path, first: dict, overrides: dict
) -> dict[str, Any]:
    """One Stage 3 from the end of ``first`` (arm ``rl_of``'s ``arm_rl``) under ``then``, into
    ``root/ARM/seedN``: ``run_curriculum``'s result with both runs' stages, the cold start's
    metrics as ``sft`` and the second run's as ``final``."""
    spec = arm_spec(world, arm)
    last = run_curriculum(
        profile,
        spec.variant,
        first["stages"][-1]["run_dir"],
        seed,
        root / arm / f"seed{seed}",
        stages=(3,),
        sft_metrics=first["final"],
        world=world,
        **{**spec.grpo, **overrides, **spec.then},
    )
    return {**last, "stages": first["stages"] + last["stages"], "sft": first["sft"]}


def _stage_overrides(profile: str, world: str, spec: Arm, overrides: dict) -> dict[int, dict]:
    """An arm without Stage 2 runs as many RL steps in Stage 3 as the others run in both."""
    if 2 in spec.stages:
        return {}
    steps = [
        GRPOStageConfig.for_stage(s, profile, variant=spec.variant, world=world, **overrides)
        for s in (2, 3)
    ]
    return {3: {"max_steps": sum(c.max_steps for c in steps)}}


def arm_splits(
    profile: str, world: str, spec: Arm, runs: list[dict], root: Path, arm: str
) -> dict | None:
    """The forced split rate (``experiments.split``) of each distinct start and each seed's end;
    ``None`` for a plain arm or a world whose paths have no assigned shares. The starts' rates are
    kept with the cold starts (``sft_of``'s folder, where ``split_columns`` reads them and every
    arm sharing them reuses them), the ends' with the arm."""
    if spec.variant == "plain" or worlds.get(world).block_splits is None:
        return None
    models = {"sft": list(dict.fromkeys(r["start"] for r in runs)), "rl": [r["end"] for r in runs]}
    folders = {"sft": root / (spec.sft_of or arm), "rl": root / arm}
    return {  # each model in the blocks' layout its arm samples with (spec.grpo)
        when: [
            measure_split(profile, world, spec.variant, m, folders[when], **spec.grpo)
            for m in found
        ]
        for when, found in models.items()
    }


# the comparisons the table draws (treatment, control), with intervals over seeds and problems
CONTRASTS = (
    ("seen", "plain"),
    ("seen", "plain-sft"),
    ("seen", "serial"),
    ("unseen", "serial"),
    ("unseen-s3", "serial"),
    ("unseen-s3", "serial-s3"),
    ("unseen", "unseen-noplan"),
    ("unseen-s3-honest", "serial-s3-honest"),
    ("unseen-s3-honest", "unseen-s3-checked"),
)


def controls_table(root: Path, seeds: list[int], arms: tuple[str, ...] | None = None) -> dict:
    """One row per arm (``None``: every arm with RL seeds under ``root``; a folder holding only
    cold starts, another arm's ``sft_of``, is none): means over the seeds of
    the end's hard accuracy (with a 95 % interval over seeds and problems), of the start's,
    greedy, block rates, tokens, sequential decode steps, accuracy under step caps and per answer
    mode, paths per block and distinct shares (where the world reads them), the forced split rates
    after SFT and after RL (where measured), each seed's own start and end (``per_seed``); and
    the ``CONTRASTS``: differences with a 95 % interval resampling problems (paired) and each
    arm's seeds (``seedstats.two_level``). ``sft_widths``: the plan and block widths present in
    any arm's SFT rows."""
    arms = arms or tuple(a for a in ARMS if any((Path(root) / a).glob("seed*")))
    ends = {arm: final_hard(root, arm, seeds) for arm in arms}
    # an arm's first RL stage holds its cold start's metrics (``before``): for an arm that goes
    # on from another's RL, that other arm's
    firsts = {
        arm: stage_cards(root, ARMS[arm].rl_of or arm, seeds, f"s{ARMS[arm].stages[0]}")
        for arm in arms
    }
    starts = {arm: [card["before"]["hard"] for card in firsts[arm]] for arm in arms}
    grids = {arm: [e["per_problem"]["accuracy"] for e in ends[arm]] for arm in arms}
    rows = [
        {
            "arm": arm,
            "what": ARMS[arm].what,
            **mean_row(ends[arm]),
            "start": round(statistics.fmean(e["accuracy"] for e in starts[arm]), 4),
            "interval": rounded(two_level(grids[arm])),
            **width_columns(starts[arm], ends[arm]),
            **split_columns(Path(root) / (ARMS[arm].sft_of or arm), Path(root) / arm),
            "per_seed": per_seed(seeds, firsts[arm], ends[arm]),
        }
        for arm in arms
    ]
    contrasts = {
        f"{a}-{b}": rounded(two_level(grids[a], grids[b]))
        for a, b in CONTRASTS
        if a in arms and b in arms
    }
    return {
        "seeds": seeds,
        "interval_method": BOOTSTRAP_SEEDS,
        "sft_widths": sft_widths(Path(root), arms),
        "rows": rows,
        "contrasts": contrasts,
    }


def sft_widths(root: Path, arms: tuple[str, ...]) -> dict[str, list[int]]:
    """The widths present in the SFT rows of ``arms`` (their SFT cards' ``row_widths``): paths per
    block (``blocks``) and items per plan (``plans``); ``{}`` where no SFT card lists them."""
    found: dict[str, set[int]] = {}
    owners = dict.fromkeys(ARMS[arm].sft_of or arm for arm in arms)
    for card in (c for arm in owners for c in sorted((root / arm).glob(f"sft*/{CARD}"))):
        for kind, counts in (json.loads(card.read_text()).get("row_widths") or {}).items():
            found.setdefault(kind, set()).update(int(w) for w in counts)
    return {kind: sorted(widths) for kind, widths in found.items()}


# the (arm, serial control) pairs whose sequential decode steps the verdict compares
STEP_PAIRS = (
    ("unseen", "serial"),
    ("unseen-s3", "serial"),
    ("unseen-s3", "serial-s3"),
    ("unseen-s3-honest", "serial-s3-honest"),
)


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
    from pr1lib.evaluation.headline import change_words, steps_words

    pairs = {f"{a}-{b}": f"{a} vs {b}" for a, b in CONTRASTS}  # "unseen-s3-serial": 2 arms
    lines = [
        change_words(pairs.get(name, name), {k: 100 * v for k, v in c.items()})
        for name, c in table["contrasts"].items()
    ]
    rows = {r["arm"]: r for r in table["rows"]}
    for arm, base in STEP_PAIRS:
        if arm in rows and base in rows:
            lines.append(steps_words(rows[arm], rows[base]))
    return lines


def main(run: StudyRun) -> list[dict]:
    """``study controls --arm A``: one arm over the seeds (one card); ``--arm all`` (``switch``:
    ``SWITCH``, with the arms they go on from): those arms in turn, then the table (a rerun
    reuses what finished); without ``--arm``: the table of the arms under ``--out`` from their
    finished runs (no training). The card keeps the wall time the arms took, summed over the
    invocations that ran them."""
    world, arm = run.world or "tinyworld", run.option("arm")
    out = run.out or controls_dir(run.profile, world)
    sft_seeds = run.option("sft_seeds") or [0]
    overrides = {k: v for k, v in run.grpo_overrides().items() if k != "world"}
    for name in chosen_arms(world, arm):
        started = time.perf_counter()
        with run.claim(out / name):
            result = run_arm(
                run.profile, world, name, run.seeds, run.option("init"), out, sft_seeds, **overrides
            )
        add_wall(out / name, time.perf_counter() - started)
        print(
            json.dumps({k: result[k] for k in ("arm", "start", "seeds")}, default=str), flush=True
        )
    if arm not in (None, "all", "switch"):
        return [{"profile": run.profile, "world": world, "wall": wall_times(out, [arm]), **result}]
    table = controls_table(out, run.seeds)
    for row in table["rows"]:
        print(json.dumps({k: row[k] for k in ("arm", "accuracy", "mean_sequential_steps")}))
    spent = wall_times(out, [r["arm"] for r in table["rows"]])
    return [
        {"profile": run.profile, "world": world, "sft_seeds": sft_seeds, "wall": spent, **table}
    ]

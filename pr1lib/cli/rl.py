"""The reinforcement-learning commands: ``grpo`` (one stage, or a study by its old flag) and
``study NAME`` (``pr1lib.experiments``). ``pr1lib.cli.main`` describes their arguments.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pr1lib import worlds
from pr1lib.cli.flags import check_apart
from pr1lib.cli.flags import seeds as resolve_seeds
from pr1lib.cli.pipeline import claim_folder, print_json, with_flags
from pr1lib.config import GRPOStageConfig
from pr1lib.config.checks import allowed_values, check_model, parse_keys, parse_sets
from pr1lib.experiments import STUDIES
from pr1lib.store.paths import runs_dir
from pr1lib.training.runs import (
    GRPO_RESUMABLE,
    allow_cross_variant,
    check_run_dir,
    check_variant,
    follow_hidden_plans,
)


def _print_row(row: dict) -> None:
    keys = (
        "reward",
        "accuracy",
        "parallel_ratio",
        "valid_ratio",
        "completions/mean_length",
        "reward_mode/tiered",
    )
    parts = [f"{k.split('/')[-1]}={row[k]:.3g}" for k in keys if row.get(k) is not None]
    print(f"step {row['step']}: " + " ".join(parts), flush=True)


def _grpo_overrides(args: Any) -> dict[str, Any]:
    out = with_flags(args, "reward", "variant", "world", config=GRPOStageConfig, steps="max_steps")
    if getattr(args, "notebook", False):
        out["notebook"] = True
    return out


def _stage_run(args: Any, profile: str, seed: int, several: bool) -> tuple[Any, Any, Path]:
    """``(config, start, folder)`` of one seed's stage run, checked: the config (fields and the
    rules between them), the start, and a folder that is not the start and holds no other run."""
    from pr1lib.training.starts import default_init, run_name

    cfg = GRPOStageConfig.for_stage(
        int(args.stage), profile, **{**_grpo_overrides(args), "seed": seed}
    )
    cfg.check()
    init = (
        args.init if args.init is not None else default_init(cfg.stage, cfg.variant, profile, seed)
    )
    out = Path(args.out) if args.out else runs_dir() / run_name(cfg)
    out = out / f"seed{seed}" if args.out and several else out
    check_apart(out, init, "--init")
    check_variant(init, cfg.variant, args.cross_variant)  # seen <-> unseen only when meant
    cfg = follow_hidden_plans(cfg, init)
    if not args.overwrite:
        check_run_dir(out, init, cfg)
    return cfg, init, out


def _grpo_stage(args: Any, cfg: Any, init: Any, out: Path) -> dict:
    with claim_folder(args, out, "grpo", cfg, GRPO_RESUMABLE):
        from pr1lib.training.dashboard import Dashboard  # heavy (torch): after every check
        from pr1lib.training.grpo import run_grpo

        if cfg.variant == "unseen" and cfg.stage == 2:
            print(
                "note: the paper skips Stage 2 for the unseen variant (it overfits easy problems)"
            )
        print(f"profile={cfg.profile} init={init or 'the base model'}\n{cfg}", flush=True)
        dashboard = Dashboard(out / "metrics.csv", live=False, on_row=_print_row)
        return run_grpo(
            cfg,
            init,
            out,
            dashboard=dashboard,
            overwrite=args.overwrite,
            cross_variant=args.cross_variant,
        ).result


def _grpo_inputs(args: Any, profile: str) -> None:
    """Check ``--model`` / ``--init`` and the config (``--set``, flags) before any folder."""
    if args.model and args.init:
        raise ValueError("give --model or --init, not both: they name the same start")
    if args.world and not (args.init or args.model):
        args.init = worlds.get(args.world).init(args.variant or "seen")
    args.init = args.init or args.model
    if args.init:
        check_model(args.init)
    stage = int(args.stage) if args.stage in ("2", "3") else 3
    overrides = _grpo_overrides(args)
    if args.stage not in ("2", "3"):  # the ablation and the curriculum choose the reward
        overrides.pop("reward", None)
    GRPOStageConfig.for_stage(stage, profile, **overrides).check()


# the old ways to run a study, kept as aliases of `study NAME`
GRPO_STUDIES = {"dose_response": "dose", "unseen_stage2": "unseen-stage2", "ablation": "ablation"}
# grpo's flags a study may not take (a flag a command would ignore is an error)
GRPO_FLAGS = ("reward", "variant", "init", "model", "steps", "notebook", "refresh", "cross_variant")
# the variant(s) a study trains from its --init when --variant (or --arm) does not say
STUDY_VARIANTS = {
    "curriculum": ("seen",),
    "ablation": ("unseen",),
    "dose": ("seen",),
    "unseen-stage2": ("unseen",),
    "midtraining": ("unseen",),
    "controls": ("seen", "unseen"),
}


def grpo(args: Any) -> int:
    profile = args.profile  # resolved once, by pr1lib.cli.main
    seeds = resolve_seeds(args)  # --seeds, --seed or --set seed (checked by pr1lib.cli.flags)
    chosen = [name for flag, name in GRPO_STUDIES.items() if getattr(args, flag)]
    if len(chosen) > 1 or (chosen and args.stage is not None):
        raise ValueError("choose one of --stage, --ablation, --dose-response, --unseen-stage2")
    _grpo_inputs(args, profile)
    alias, results = (chosen[0] if chosen else None), []
    if alias is None and args.stage in (None, "all"):
        alias = "curriculum" if args.stage == "all" else "ablation"
    if alias is not None:
        run = _study_run(args, profile, seeds, alias)  # every check before the cache is read
    if alias == "ablation" and not (args.ablation or args.refresh or args.init or args.overrides):
        results = _cached_ablation(args, profile, seeds)  # plain `grpo`: show what is there
    if alias is not None and not results:
        results = _run_study(alias, run)
    elif alias is None:
        runs = [_stage_run(args, profile, s, len(seeds) > 1) for s in seeds]  # all checked first
        results = [_grpo_stage(args, *r) for r in runs]
    print_json(results[0] if len(results) == 1 else results, args)
    return 0


def _cached_ablation(args: Any, profile: str, seeds: list[int]) -> list[dict]:
    """The finished ablation of each seed, whatever its config (``[]`` unless every seed has
    one): what a plain ``grpo --profile P`` prints; ``--ablation`` runs it again."""
    from pr1lib.experiments.ablation import VARIANT, ablation_summary, format_table, load_ablation

    variant = args.variant or VARIANT
    cached = [load_ablation(profile, variant, s, _seed_out(args, s, seeds)) for s in seeds]
    if not all(cached):
        return []
    print(f"cached results (start: {cached[0][0]['init']}); pass --ablation to run it again")
    summaries = [ablation_summary(arms) for arms in cached]
    for summary in summaries:
        print(format_table(summary["ablation"]), flush=True)
    return [
        {"profile": profile, "variant": variant, "seed": s, **summary}
        for s, summary in zip(seeds, summaries)
    ]


def _seed_out(args: Any, seed: int, seeds: list[int]) -> Path | None:
    if not args.out:
        return None
    return Path(args.out) / f"seed{seed}" if len(seeds) > 1 else Path(args.out)


def _study_run(args: Any, profile: str, seeds: list[int], name: str):
    """A ``StudyRun`` from the parsed flags of ``study NAME`` (or of a ``grpo`` alias)."""
    from pr1lib.experiments import StudyRun

    study = STUDIES[name]
    takes = set(study.flags) | ({"model"} if "init" in study.flags else set())  # --model: --init
    ignored = [f for f in GRPO_FLAGS if getattr(args, f, None) and f not in takes]
    if ignored:
        raise ValueError(f"study {name} takes no --{ignored[0].replace('_', '-')}")
    sets = getattr(args, "overrides", [])
    overrides = (
        parse_sets(GRPOStageConfig, sets)
        if study.sets is None
        else parse_keys(sets, study.sets, f"study {name}")
    )
    fixed = [key for key in overrides if key in study.fixes]
    if fixed:
        hint = {"variant": "give --variant", "max_steps": "give --steps"}.get(fixed[0])
        raise ValueError(
            f"study {name} sets {fixed[0]} itself (per arm or phase): "
            f"{hint or 'leave --set ' + fixed[0] + ' out'}"
        )
    if "max_steps" in overrides and getattr(args, "steps", None) is not None:
        raise ValueError("max_steps given two ways (--steps, --set max_steps): give one")
    if study.sets is None:  # a config every arm starts from must be valid (rules between fields)
        base = {k: v for k, v in overrides.items() if k != "reward"}
        GRPOStageConfig.for_stage(3, profile, **base).check()
        check_reward(overrides.get("reward"))
    options = {f: getattr(args, f, None) for f in (*study.flags, "cross_variant")}
    if study.variants and options.get("variant") not in (None, *study.variants):
        raise ValueError(
            f"study {name} forces a block, which the {options['variant']} variant never writes: "
            f"give --variant {' or '.join(study.variants)}"
        )
    for flag in ("init", "model"):
        if options.get(flag):
            check_model(options[flag])
            _check_study_variants(name, options, options[flag])
    world = getattr(args, "world", None)
    if name == "controls" and options.get("arm") not in (None, "all"):
        _check_arm(options["arm"], world or "tinyworld", profile)
    if options.get("model") and "init" not in study.flags:  # it decodes a model: as trained
        world = _decode_as_trained(options, world, study.variants)
    return StudyRun(
        profile,
        world,
        seeds,
        Path(args.out) if getattr(args, "out", None) else None,
        overrides,
        options,
        claim=lambda folder: claim_folder(args, folder, "study"),
        overwrite=getattr(args, "overwrite", False),
    )


def _check_arm(arm: str, world: str, profile: str) -> None:
    """Build the cold start an arm of ``study controls`` trains in ``world`` before any folder is
    claimed: an arm the world cannot run (the plan-removed arm where no plan is written) is
    refused in one line, with nothing written."""
    from pr1lib.experiments import controls

    for name in controls.chosen_arms(world, arm):  # --arm switch: the arms it names
        if isinstance(controls.ARMS[name].cold_start, dict):
            controls.sft_config(world, profile, name)


def _decode_as_trained(options: dict[str, Any], world: str | None, variants: Any) -> str | None:
    """A study that decodes ``--model`` (split, blockcost) reads it as its card says: its
    variant where ``--variant`` is not given, its world where ``--world`` is not; a flag that
    says otherwise wins, and one line on stderr says so. Returns the world."""
    from pr1lib.training.starts import DECODE_MODES, told_otherwise, trained_as

    model, given = options["model"], options.get("variant")
    variant, trained_world = trained_as(model)
    asked = {"mode": DECODE_MODES.get(given) if given else None, "world": world}
    note = told_otherwise(model, asked)
    if note:
        print(note, file=sys.stderr, flush=True)
    if given is None and variant in (variants or DECODE_MODES):
        options["variant"] = variant
    return world or (trained_world if trained_world in worlds.names() else None)


def check_reward(reward: str | None) -> None:
    """Refuse a ``--set reward`` its registry lacks (the study's arms each check the rest)."""
    allowed = allowed_values("reward")
    if reward is not None and allowed is not None and reward not in allowed:
        raise ValueError(f"reward must be one of {allowed}, got {reward!r}")


def _check_study_variants(name: str, options: dict[str, Any], init: str) -> None:
    """Refuse a study's --init trained as the other parallel variant than the study trains
    (unless --cross-variant: then its stages may start from it, and their run cards say so)."""
    arm = options.get("arm")
    if arm is not None:
        trained = (arm,)
    else:
        trained = (options["variant"],) if options.get("variant") else STUDY_VARIANTS.get(name, ())
    for variant in trained:
        check_variant(init, variant, bool(options.get("cross_variant")))
    if options.get("cross_variant"):
        allow_cross_variant(init)


def _run_study(name: str, run: Any) -> list[dict]:
    return STUDIES[name].load().main(run)


def study(args: Any) -> int:
    """``study NAME``: one study of ``pr1lib.experiments`` (``--help`` lists them)."""
    profile = args.profile  # resolved once, by pr1lib.cli.main
    seeds = resolve_seeds(args)
    results = _run_study(args.study, _study_run(args, profile, seeds, args.study))
    check_not_empty(args.study, results)  # never a card (or exit 0) with nothing in it
    print_json(results[0] if len(results) == 1 else results, args)
    return 0


def check_not_empty(name: str, results: list[dict]) -> None:
    """Refuse a study's result that reports nothing (no result, or a table with no rows: e.g.
    ``study controls`` without ``--arm`` where no arm has finished): one line, and no card.

    >>> check_not_empty("controls", [{"world": "tinyworld", "rows": []}])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: study controls has nothing to report (its table has no rows): run an arm ...
    """
    if results and not all(isinstance(r, dict) and r.get("rows") == [] for r in results):
        return
    takes_arm = "arm" in STUDIES[name].flags
    hint = "run an arm first (--arm NAME, or --arm all)" if takes_arm else "run its stages first"
    raise ValueError(
        f"study {name} has nothing to report (its table has no rows): {hint}; no card was written"
    )

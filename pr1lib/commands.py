"""The bodies of the ``python -m pr1lib`` commands (``pr1lib.cli`` describes their arguments).

Each command imports what it runs inside its own function: ``eval`` should not pay for TRL's
import, nor ``coldstart`` for torch's. Commands that measure something print one JSON object last.

>>> parse_overrides(["max_steps=5", "name=data/tiny-base", "use_lora=True"])
{'max_steps': 5, 'name': 'data/tiny-base', 'use_lora': True}
"""

from __future__ import annotations

import ast
import json
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pr1lib.config import (
    ColdStartConfig,
    EvalConfig,
    GRPOStageConfig,
    PretrainConfig,
    SFTStageConfig,
    check_profile,
)
from pr1lib.paths import runs_dir
from pr1lib.validate import check_dataset, check_model, parse_sets


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["lr=1e-3", "name=abc"]`` -> ``{"lr": 0.001, "name": "abc"}`` (Python literals, else
    strings)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set expects KEY=VALUE, got {item!r}")
        try:
            out[key.strip()] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key.strip()] = raw
    return out


def print_json(result: Any, args: Any = None) -> None:
    """Measuring commands end with exactly one JSON object on the last line; with ``--card NAME``
    it also goes to ``results/NAME.json`` with the command and config (``pr1lib.results``)."""
    print(json.dumps(result, default=str), flush=True)
    if getattr(args, "card", None):
        from pr1lib.results import write_card

        print(f"result card: {write_card(args.card, result, args)}", file=sys.stderr)


def _with_flags(
    args: Any, *names: str, config: type | None = None, **renamed: str
) -> dict[str, Any]:
    """``--set`` overrides (typed and checked against ``config``'s fields when given) plus the
    command's own flags that were given (``None``: not given)."""
    sets = getattr(args, "overrides", [])
    out = parse_sets(config, sets) if config is not None else parse_overrides(sets)
    for name in names:
        if getattr(args, name, None) is not None:
            out[name] = getattr(args, name)
    for flag, field in renamed.items():
        if getattr(args, flag, None) is not None:
            out[field] = getattr(args, flag)
    return out


def _claim(
    args: Any, folder: str | Path, command: str, config: Any = None, resumable: tuple[str, ...] = ()
):
    """``pr1lib.runs.claim`` with the command's ``--overwrite`` / ``--resume``."""
    from pr1lib.runs import claim

    return claim(
        folder,
        command,
        config,
        resumable,
        overwrite=getattr(args, "overwrite", False),
        resume=getattr(args, "resume", False),
    )


# ----------------------------------------------------------------------------- data and models
def tour(args: Any) -> int:
    from pr1lib.analytics import read_headlines
    from pr1lib.tour import notebook_parameters, run_tour, select_notebooks

    profile = check_profile(args.profile or os.environ.get("PR1_PROFILE") or "tiny")
    params = notebook_parameters(select_notebooks(args.only), args.overrides)
    out = Path(args.out or runs_dir() / f"tour-{time.strftime('%Y%m%d-%H%M%S')}")
    start = time.perf_counter()
    with _claim(args, out, "tour"):
        report, runs = run_tour(profile, out, args.only, args.seed or 0, params)
    failed = sum(r.error is not None for r in runs)
    for headline in read_headlines(report.parent):
        print(f"[tour] {headline['title']}\n{headline['markdown']}")
    print(f"[tour] report: {report}")
    print_json(
        {"report": str(report), "failed": failed, "seconds": round(time.perf_counter() - start, 1)},
        args,
    )
    return 1 if failed else 0


def pretrain_tiny(args: Any) -> int:
    from pr1lib.pretrain import pretrain

    cfg = PretrainConfig.for_profile(
        args.profile, **_with_flags(args, "seed", config=PretrainConfig)
    )
    with _claim(args, args.out, "pretrain-tiny", cfg):
        print(json.dumps({"type": "PretrainConfig", **cfg.to_dict()}, indent=2))
        card = pretrain(cfg, args.out, progress=not args.no_progress)
    print_json(
        {
            "final_loss": card["final_loss"],
            "train_time_s": card["train_time_s"],
            "steps": card["steps"],
            "parameters": card["parameters"],
            **card["accuracy"],
            "out": str(args.out),
        },
        args,
    )
    return 0


COLDSTART_FLAGS = (
    "teacher",
    "source",
    "split",
    "limit",
    "teacher_model",
    "base_url",
    "seed",
    "timeout",
    "deadline",
    "max_retries",
    "requests_per_minute",
    "concurrency",
)
# fields a rerun in the same --out may change: the cache keeps every trace, keyed by problem
COLDSTART_RESUMABLE = (
    "limit",
    "llm_limit",
    "batch_size",
    "llm_batch_size",
    "timeout",
    "deadline",
    "max_retries",
    "requests_per_minute",
    "concurrency",
    "max_consecutive_failures",
    "base_url",
)


def coldstart_config(args: Any) -> ColdStartConfig:
    """The run's config: the profile's, then ``--set`` overrides, then the named flags."""
    return ColdStartConfig.for_profile(
        args.profile, **_with_flags(args, *COLDSTART_FLAGS, config=ColdStartConfig)
    )


def coldstart(args: Any) -> int:
    from pr1lib.coldstart import budget_tokenizer, make_teacher, report_failures, run_coldstart
    from pr1lib.data import DataNotFoundError, load_source
    from pr1lib.teachers import TeacherError

    try:
        config = coldstart_config(args)  # then the problems: a data file's mistake is one line
        problems = load_source(
            config.source, config.split, config.limit, args.data_path, config.seed
        )
        if config.teacher == "hf" and config.teacher_model:
            check_model(config.teacher_model)
        out = Path(args.out or runs_dir() / f"coldstart-{config.source}-{config.teacher}")
        teacher = make_teacher(config)
        with _claim(args, out, "coldstart", config, COLDSTART_RESUMABLE):
            print(config, flush=True)
            tokenizer = budget_tokenizer(config.profile) if args.exact_budget else None
            run = run_coldstart(
                config, out, problems, teacher=teacher, tokenizer=tokenizer, progress=True
            )
    except (DataNotFoundError, TeacherError, ValueError) as err:
        print(f"error: {' '.join(str(err).split())}", flush=True)
        return 2
    code = report_failures(run.result)
    print_json({**run.result, "config": config.to_dict()}, args)
    return code


# ----------------------------------------------------------------------------- training
def sft(args: Any) -> int:
    from pr1lib.config import PARALLEL_VARIANTS
    from pr1lib.models import stage_model_config
    from pr1lib.sft import run_sft

    overrides = _with_flags(args, "seed", config=SFTStageConfig)
    if args.variant and args.variant != "both":
        overrides["variant"] = args.variant
    cfg = SFTStageConfig.for_profile(args.profile, **overrides)
    data = check_dataset(args.data) if args.data else None
    model = check_model(args.model) if args.model else None
    variants = PARALLEL_VARIANTS if args.variant == "both" else (cfg.variant,)
    outs = {v: _sft_out(args, cfg.replace(variant=v), len(variants) > 1, data) for v in variants}
    results, before = {}, None
    with ExitStack() as claims:  # every folder first: the second variant never fails late
        for variant in variants:
            claims.enter_context(
                _claim(args, outs[variant], "sft", cfg.replace(variant=variant), ("num_threads",))
            )
        for variant in variants:
            cfg = cfg.replace(variant=variant)
            print(cfg, flush=True)
            model_cfg = stage_model_config(cfg, model) if model else None
            run = run_sft(cfg, data, outs[variant], before=before, model_cfg=model_cfg)
            before, results[variant] = run.result["before"], run.result
            print(f"{variant}: {json.dumps(run.result, default=str)}", flush=True)
    out = results[variants[0]] if len(variants) == 1 else dict(results)
    print_json({**out, "config": {**cfg.to_dict(), "variant": list(variants)}}, args)
    return 0


def _sft_out(args: Any, cfg: SFTStageConfig, several: bool, data: Path | None) -> Path:
    """A variant's run folder; never the ``--data`` folder or one holding it."""
    default = runs_dir() / f"sft-{cfg.profile}-{cfg.variant}"
    out = Path(args.out) / cfg.variant if args.out and several else Path(args.out or default)
    if data is not None and (
        out.resolve() == data.resolve() or out.resolve() in data.resolve().parents
    ):
        raise ValueError(
            f"--out {out} would hold the --data set {data} (the run's files would "
            "overwrite it): pick another --out"
        )
    return out


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


GRPO_RESUMABLE = (
    "max_steps",
    "save_steps",
    "logging_steps",
    "num_threads",
    "eval_n",
    "eval_max_new_tokens",
)  # a rerun with more --steps continues the same run


def _grpo_overrides(args: Any) -> dict[str, Any]:
    out = _with_flags(args, "reward", "variant", "world", config=GRPOStageConfig)
    if args.steps is not None:
        out["max_steps"] = args.steps
    if getattr(args, "notebook", False):
        out["notebook"] = True
    return out


def _grpo_stage(args: Any, profile: str, seed: int) -> dict:
    from pr1lib.dashboard import Dashboard
    from pr1lib.grpo import run_grpo, run_name
    from pr1lib.studies import default_init

    cfg = GRPOStageConfig.for_stage(
        int(args.stage), profile, **{**_grpo_overrides(args), "seed": seed}
    )
    init = (
        args.init if args.init is not None else default_init(cfg.stage, cfg.variant, profile, seed)
    )
    out = Path(args.out) if args.out else runs_dir() / run_name(cfg)
    out = out / f"seed{seed}" if args.out and len(args.seeds or ()) > 1 else out
    with _claim(args, out, "grpo", cfg, GRPO_RESUMABLE):
        if cfg.variant == "unseen" and cfg.stage == 2:
            print(
                "note: the paper skips Stage 2 for the unseen variant (it overfits easy problems)"
            )
        print(f"profile={profile} init={init or 'the base model'}\n{cfg}", flush=True)
        dashboard = Dashboard(out / "metrics.csv", live=False, on_row=_print_row)
        return run_grpo(cfg, init, out, dashboard=dashboard).result


def _grpo_ablation(args: Any, profile: str, seed: int) -> dict:
    from pr1lib.ablation import (
        ablation_dir,
        ablation_summary,
        format_table,
        load_ablation,
        run_ablation,
    )
    from pr1lib.config import ABLATION_VARIANT

    overrides = {k: v for k, v in _grpo_overrides(args).items() if k != "reward"}
    variant = overrides.pop("variant", ABLATION_VARIANT)
    fresh = args.ablation or args.refresh or args.init or overrides
    cached = [] if fresh else load_ablation(profile, variant, seed, args.out)
    if cached:  # plain `python -m pr1lib grpo`: show what is there (--ablation reruns it)
        print(f"cached results (start: {cached[0]['init']}); pass --ablation to run it again")
    results = cached
    if not cached:
        with _claim(args, args.out or ablation_dir(profile, variant, seed), "grpo"):
            results = run_ablation(
                profile, variant, args.init, seed, args.out, refresh=args.refresh, **overrides
            )
    summary = ablation_summary(results)
    print(format_table(summary["ablation"]), flush=True)
    print(
        "the paper's order (parallel ratio accuracy < alternating < parallel, gaps beyond a 95 % "
        f"bootstrap interval; alternating's accuracy >= parallel's) reproduced: "
        f"{summary['verdict']}"
    )
    return {"profile": profile, "variant": variant, "seed": seed, **summary}


def _grpo_curriculum(args: Any, profile: str, seeds: list[int]) -> list[dict]:
    from pr1lib.studies import run_curriculum, seeds_summary

    overrides = {k: v for k, v in _grpo_overrides(args).items() if k != "reward"}
    variant, results = overrides.pop("variant", "seen"), []
    for s in seeds:  # the start is evaluated once: the held-out sets do not depend on the seed
        out = args.out and Path(args.out) / f"seed{s}"
        with ExitStack() as held:
            if out:
                held.enter_context(_claim(args, out, "grpo"))
            run = run_curriculum(
                profile,
                variant,
                args.init,
                s,
                out,
                sft_metrics=results[0]["sft"] if results else None,
                **overrides,
            )
        results.append(run)
        print(json.dumps({"seed": s, **{k: run.get(k) for k in ("sft", "final")}}, default=str))
    return [{"seeds": seeds_summary(results), "runs": results}] if len(results) > 1 else results


def _grpo_dose(args: Any, profile: str, seed: int) -> dict:
    from pr1lib.studies import dose_dir, dose_response

    overrides = {k: v for k, v in _grpo_overrides(args).items() if k != "reward"}
    world = overrides.pop("world", None)
    out = _study_out(args, dose_dir(profile, world, seed), seed)
    with _claim(args, out, "grpo"):
        rows = dose_response(profile, args.init, seed, out, world, **overrides)
    for row in rows:
        print(json.dumps(row), flush=True)
    return {"profile": profile, "world": world, "seed": seed, "rows": rows}


def _grpo_unseen_stage2(args: Any, profile: str, seed: int) -> dict:
    from pr1lib.studies import unseen_stage2_dir, unseen_stage2_effect, unseen_stage2_table

    overrides = {k: v for k, v in _grpo_overrides(args).items() if k not in ("reward", "variant")}
    out = _study_out(args, unseen_stage2_dir(profile, seed), seed)
    with _claim(args, out, "grpo"):
        effect = unseen_stage2_effect(profile, args.init, seed, out, args.refresh, **overrides)
    table = unseen_stage2_table(effect)
    for row in table["rows"]:
        print(json.dumps(row), flush=True)
    return {"profile": profile, "seed": seed, **table}


def _study_out(args: Any, default: Path, seed: int) -> Path:
    """A study's folder: ``--out`` (one ``seedN`` folder per seed when there are several), else
    ``default``."""
    if not args.out:
        return default
    return Path(args.out) / f"seed{seed}" if len(args.seeds or ()) > 1 else Path(args.out)


def _grpo_inputs(args: Any, profile: str) -> None:
    """Check ``--model`` / ``--init`` and the config (``--set``, flags) before any folder."""
    from pr1lib.grpo import check_config

    if args.model and args.init:
        raise ValueError("give --model or --init, not both: they name the same start")
    from pr1lib.studies import world_init

    args.init = args.init or args.model or world_init(args.world, args.variant or "seen")
    if args.init:
        check_model(args.init)
    stage = int(args.stage) if args.stage in ("2", "3") else 3
    overrides = _grpo_overrides(args)
    if args.stage not in ("2", "3"):  # the ablation and the curriculum choose the reward
        overrides.pop("reward", None)
    check_config(GRPOStageConfig.for_stage(stage, profile, **overrides))


def grpo(args: Any) -> int:
    profile = check_profile(args.profile)
    _grpo_inputs(args, profile)
    seeds = args.seeds or [args.seed if args.seed is not None else 0]
    if args.dose_response:
        results = [_grpo_dose(args, profile, s) for s in seeds]
    elif args.unseen_stage2:
        results = [_grpo_unseen_stage2(args, profile, s) for s in seeds]
    elif args.stage is None or args.ablation:
        results = [_grpo_ablation(args, profile, s) for s in seeds]
    elif args.stage == "all":
        results = _grpo_curriculum(args, profile, seeds)
    else:
        results = [_grpo_stage(args, profile, s) for s in seeds]
    print_json(results[0] if len(results) == 1 else results, args)
    return 0


# ----------------------------------------------------------------------------- measuring
def eval(args: Any) -> int:  # the command's name
    try:
        result = _eval(args)
    except (ValueError, OSError) as err:  # missing data or model, a refused resume, a bad mode
        print(f"eval: error: {err}", file=sys.stderr)
        return 2
    print_json(result, args)
    return 0


def blockcost(args: Any) -> int:
    from pr1lib.blockcost import SAMPLING_KEYS
    from pr1lib.blockcost import blockcost as measure
    from pr1lib.config import ModelConfig
    from pr1lib.evalsets import BENCHMARKS
    from pr1lib.evaluate import load_for_eval

    profile = check_profile(args.profile)
    name = check_model(args.model) if args.model else ModelConfig.for_profile(profile).name
    tiers = [t.strip() for t in args.data.split(",") if t.strip()]
    unknown = [t for t in tiers if t not in BENCHMARKS]
    if unknown or not tiers:
        raise ValueError(f"--data {args.data!r}: choose from {', '.join(BENCHMARKS)}")
    sampling = parse_overrides(args.overrides)  # temperature, lengths, max_blocks, batch_size
    extra = sorted(set(sampling) - set(SAMPLING_KEYS))
    if extra:
        raise ValueError(f"blockcost --set {extra[0]}: choose from {', '.join(SAMPLING_KEYS)}")
    model, tokenizer = load_for_eval(name, profile)  # after every check: no load for a typo
    result = measure(model, tokenizer, tiers, args.n, args.k, args.mode, args.seed or 0, **sampling)
    for tier, row in result.items():
        print(
            f"{tier}: block {row['acc_block']:.1%} plain {row['acc_plain']:.1%} "
            f"diff {row['diff']:+.1%} CI {row['ci95']}",
            flush=True,
        )
    config = {
        "model": name,
        "tiers": tiers,
        "n": args.n,
        "k": args.k,
        "mode": args.mode,
        "seed": args.seed or 0,
        **sampling,
    }
    print_json({"model": name, **result, "config": config}, args)
    return 0


def _eval(args: Any) -> dict:
    from pr1lib.analytics import write_eval_outputs
    from pr1lib.config import ModelConfig
    from pr1lib.evaluate import load_for_eval, model_tag, run_eval

    profile = check_profile(args.profile)
    overrides = _with_flags(args, "n", "k", "mode", "seed", config=EvalConfig, data="benchmark")
    if args.n == 0:  # --n 0: every problem
        overrides["n"] = None
    cfg = EvalConfig.for_profile(profile, **overrides)
    name = check_model(args.model) if args.model else ModelConfig.for_profile(profile).name
    cfg = cfg.replace(
        prompt_style=cfg.prompt_style or ModelConfig.for_profile(profile).prompt_style
    )
    say = (lambda *a, **kw: None) if args.json else print
    model, tokenizer = load_for_eval(name, profile, say)  # a model it cannot load: one line
    say(f"profile={profile} model={name}\n{cfg}", flush=True)
    out = Path(args.out) if args.out else runs_dir() / "eval"
    with _claim(args, out, "eval"):
        result = run_eval(
            model, tokenizer, config=cfg, out_dir=out, tag=model_tag(name), progress=not args.json
        )
        return {**result, **write_eval_outputs(result, out, run_dir=args.model)}  # + .md, .html


def bench(args: Any) -> int:
    from pr1lib.bench import run_benchmarks

    if args.model:
        check_model(args.model)  # a missing folder: one error line, before any work
    with ExitStack() as held:
        if args.out:
            held.enter_context(_claim(args, args.out, "bench"))
        result = run_benchmarks(
            args.which,
            args.out,
            args.repeats,
            args.path_len,
            args.threads,
            args.quick,
            args.model,
            args.steps,
        )
    config = {
        key: getattr(args, key, None)
        for key in ("which", "repeats", "path_len", "threads", "quick", "model", "steps")
    }
    print_json({**result, "config": {**config, "profile": os.environ.get("PR1_PROFILE")}}, args)
    return 0


def export_verl(args: Any) -> int:
    from pr1lib.verl import export_verl as export

    if not args.source and args.coldstart is None:
        raise ValueError(
            "nothing to export: give --source NAME (repeatable) and/or --coldstart DIR"
        )
    if args.coldstart is not None:
        check_dataset(args.coldstart, "--coldstart")
    with _claim(args, args.out, "export-verl"):
        result = export(
            args.out,
            args.source,
            args.coldstart,
            args.limit,
            args.reward_mode,
            args.data_dir,
            args.prompt_style,
        )
    for name, info in result["files"].items():
        print(f"{name}: {info['rows']} rows -> {info['path']}", flush=True)
    print_json(result, args)
    return 0


# ----------------------------------------------------------------------------- the notebooks' twins
def outputs(args: Any) -> int:
    from pr1lib.twins import make_outputs

    print_json({"profile": args.profile, "twins": make_outputs(args.profile, args.only)}, args)
    return 0


def repo_url(args: Any) -> int:
    from pr1lib.publish import set_repo_url

    changed = set_repo_url(args.url)
    for path in changed:
        print(f"rewrote {path.name}", flush=True)
    print_json({"url": args.url, "changed": len(changed)}, args)
    return 0

"""The bodies of the ``python -m pr1lib`` commands (``pr1lib.cli`` describes their arguments).

Each command imports what it runs inside its own function: ``eval`` should not pay for TRL's
import, nor ``coldstart`` for torch's. Commands that measure something print one JSON object last.

>>> callable(print_json)
True
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pr1lib import worlds
from pr1lib.config import (
    ColdStartConfig,
    PretrainConfig,
    SFTStageConfig,
)
from pr1lib.paths import runs_dir
from pr1lib.validate import check_dataset, check_model, parse_overrides, parse_sets


def print_json(result: Any, args: Any = None) -> None:
    """Measuring commands end with exactly one JSON object on the last line; with ``--card NAME``
    it also goes to ``results/NAME.json`` with the command and config (``pr1lib.results``)."""
    print(json.dumps(result, default=str), flush=True)
    if getattr(args, "card", None):
        from pr1lib.results import write_card

        print(f"result card: {write_card(args.card, result, args)}", file=sys.stderr)


def with_flags(
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


def claim_folder(
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
    from pr1lib.headline import read_headlines
    from pr1lib.tour import notebook_parameters, run_tour, select_notebooks

    profile = args.profile  # resolved by pr1lib.cli (the tour defaults to tiny)
    params = notebook_parameters(select_notebooks(args.only), args.overrides)
    out = Path(args.out or runs_dir() / f"tour-{time.strftime('%Y%m%d-%H%M%S')}")
    start = time.perf_counter()
    with claim_folder(args, out, "tour"):
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
        args.profile, **with_flags(args, "seed", config=PretrainConfig)
    )
    with claim_folder(args, args.out, "pretrain-tiny", cfg):
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
        args.profile, **with_flags(args, *COLDSTART_FLAGS, config=ColdStartConfig)
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
        with claim_folder(args, out, "coldstart", config, COLDSTART_RESUMABLE):
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

    overrides = with_flags(args, "seed", config=SFTStageConfig)
    variants = PARALLEL_VARIANTS if args.variant == "both" else (args.variant or None,)
    configs = {v: _sft_config(args, v, overrides) for v in variants}
    configs = {cfg.variant: cfg for cfg in configs.values()}  # None: the profile's variant
    data = check_dataset(args.data) if args.data else None
    base = args.model or (worlds.get(args.world).init("plain") if args.world else None)
    model = check_model(base) if base else None
    outs = {v: _sft_out(args, cfg, len(configs) > 1, data) for v, cfg in configs.items()}
    results, before = {}, None
    with ExitStack() as claims:  # every folder first: the second variant never fails late
        for variant, cfg in configs.items():
            claims.enter_context(claim_folder(args, outs[variant], "sft", cfg, ("num_threads",)))
        for variant, cfg in configs.items():
            print(cfg, flush=True)
            model_cfg = stage_model_config(cfg, model) if model else None
            run = run_sft(
                cfg, data, outs[variant], not args.no_eval, before=before, model_cfg=model_cfg
            )
            before, results[variant] = run.result["before"], run.result
            print(f"{variant}: {json.dumps(run.result, default=str)}", flush=True)
    out = results[cfg.variant] if len(configs) == 1 else dict(results)
    print_json({**out, "config": {**cfg.to_dict(), "variant": list(configs)}}, args)
    return 0


def _sft_config(args: Any, variant: str | None, overrides: dict[str, Any]) -> SFTStageConfig:
    """One variant's config: a world's cold start (``--world``) or the profile's, then the flags."""
    chosen = {**overrides, **({"variant": variant} if variant else {})}
    if args.world:
        return SFTStageConfig.for_world(
            args.world, args.profile, chosen.pop("variant", "seen"), **chosen
        )
    return SFTStageConfig.for_profile(args.profile, **chosen)


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


def export_verl(args: Any) -> int:
    from pr1lib.verl import export_verl as export

    if not args.source and args.coldstart is None:
        raise ValueError(
            "nothing to export: give --source NAME (repeatable) and/or --coldstart DIR"
        )
    if args.coldstart is not None:
        check_dataset(args.coldstart, "--coldstart")
    with claim_folder(args, args.out, "export-verl"):
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

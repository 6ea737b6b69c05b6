"""The bodies of the ``python -m pr1lib`` commands (``pr1lib.cli.main`` describes their arguments).

Each command imports what it runs inside its own function: ``eval`` should not pay for TRL's
import, nor ``coldstart`` for torch's. Commands that measure something print one JSON object last.

>>> callable(print_json)
True
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pr1lib import worlds
from pr1lib.cli.flags import check_apart
from pr1lib.config import (
    ColdStartConfig,
    PretrainConfig,
    SFTStageConfig,
)
from pr1lib.config.checks import check_model, parse_overrides, parse_sets, url_problem
from pr1lib.data.savedsets import check_dataset
from pr1lib.data.sources import check_split, rule_teacher_problem
from pr1lib.data.traces import TraceCache
from pr1lib.store.folders import claim
from pr1lib.store.modelfiles import torch_file_damage
from pr1lib.store.paths import runs_dir, shown
from pr1lib.training.starts import check_sft_start


def print_json(result: Any, args: Any = None) -> None:
    """Measuring commands end with exactly one JSON object on the last line; with ``--card NAME``
    it also goes to ``results/NAME.json`` with the command and config (``pr1lib.store.cards``)."""
    print(json.dumps(result, default=str), flush=True)
    if getattr(args, "card", None):
        from pr1lib.store.cards import write_card

        print(f"result card: {write_card(args.card, result, args)}", file=sys.stderr)


def with_flags(
    args: Any, *names: str, config: type | None = None, **renamed: str
) -> dict[str, Any]:
    """``--set`` overrides (typed and checked against ``config``'s fields when given) plus the
    command's own flags that were given (``None``: not given; ``renamed``: flag -> field). A
    field set both ways to different values is refused (neither silently wins)."""
    sets = getattr(args, "overrides", [])
    out = parse_sets(config, sets) if config is not None else parse_overrides(sets)
    for flag, field in [*((n, n) for n in names), *renamed.items()]:
        value = getattr(args, flag, None)
        if value is None:
            continue
        if field in out and out[field] != value:
            raise ValueError(
                f"{field} given two ways (--{flag.replace('_', '-')} {value}, --set "
                f"{field}={out[field]}): give one"
            )
        out[field] = value
    return out


def claim_folder(
    args: Any,
    folder: str | Path,
    command: str,
    config: Any = None,
    resumable: tuple[str, ...] = (),
    finished: tuple[str, ...] = (),
):
    """``pr1lib.store.folders.claim`` with the command's ``--overwrite`` / ``--resume``
    (``finished``: files that mark a finished run a rerun would train over)."""
    return claim(
        folder,
        command,
        config,
        resumable,
        overwrite=getattr(args, "overwrite", False),
        resume=getattr(args, "resume", False),
        finished=finished,
    )


# ----------------------------------------------------------------------------- data and models
def tour(args: Any) -> int:
    from pr1lib.notebook.tour import notebook_parameters, run_tour, select_notebooks, tour_timings

    profile = args.profile  # resolved by pr1lib.cli.main (the tour defaults to tiny)
    params = notebook_parameters(select_notebooks(args.only), args.overrides)
    out = Path(args.out or runs_dir() / f"tour-{time.strftime('%Y%m%d-%H%M%S')}")
    start = time.perf_counter()
    with claim_folder(args, out, "tour"):
        from pr1lib.evaluation.headline import read_headlines  # heavy (torch): after every check

        report, runs = run_tour(profile, out, args.only, args.seed or 0, params)
    failed = sum(r.error is not None for r in runs)
    for headline in read_headlines(report.parent):
        print(f"[tour] {headline['title']}\n{headline['markdown']}")
    timings = tour_timings(runs)
    if args.timings:
        _print_timings(timings)
    print(f"[tour] report: {report}")
    seconds = round(time.perf_counter() - start, 1)
    notebooks = {stem: t["seconds"] for stem, t in timings.items()}  # a card keeps them
    print_json(
        {"report": shown(report), "failed": failed, "seconds": seconds, "notebooks": notebooks},
        args,
    )
    return 1 if failed else 0


def _print_timings(timings: dict[str, dict]) -> None:
    """Where the tour's time went: every notebook, then the ten slowest cells of all."""
    cells = []
    for stem, t in timings.items():
        print(f"[tour] {stem}: {t['seconds']:.0f} s")
        cells += [(c["seconds"], f"{stem} cell {c['cell']}: {c['first_line']}") for c in t["cells"]]
    for seconds, where in sorted(cells, reverse=True)[:10]:
        print(f"[tour]   {seconds:6.1f} s  {where}")


def pretrain_tiny(args: Any) -> int:
    cfg = PretrainConfig.for_profile(
        args.profile, **with_flags(args, "seed", config=PretrainConfig)
    )
    state = Path(args.out) / "checkpoint" / "state.pt"  # what a rerun resumes from
    if state.exists() and torch_file_damage(state):
        raise ValueError(
            f"{state} is damaged ({torch_file_damage(state)}): move it away to train from step 0, "
            "or use another --out"
        )
    # a finished model (model.safetensors) is never trained over without --overwrite
    with claim_folder(args, args.out, "pretrain-tiny", cfg, finished=("model.safetensors",)):
        from pr1lib.training.pretrain import pretrain  # heavy (torch): after every check

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
    from pr1lib.data.sources import load_source

    config = coldstart_config(args)  # the flags and the folder first: a mistake in a second
    check_teacher_flags(args, config)
    for part in config.source.split("+"):
        check_split(part.strip(), config.split)
    if config.teacher == "hf" and config.teacher_model:
        check_model(config.teacher_model)
    out = Path(args.out or runs_dir() / f"coldstart-{config.source}-{config.teacher}")
    with claim_folder(args, out, "coldstart", config, COLDSTART_RESUMABLE):
        # the first `limit` problems only: a data file's mistake is one line, the folder as it was
        problems = load_source(
            config.source, config.split, config.limit, args.data_path, config.seed
        )
        why = rule_teacher_problem(config.source) if config.teacher == "rule" else None
        if why:  # after the rows: a data file's own mistake is named first
            raise ValueError(f"--source {config.source}: {why}")
        TraceCache(out / "traces.jsonl")  # a cache that is not one: named before any output
        from pr1lib.data.coldstart import (
            EmptyDataset,
            budget_tokenizer,
            make_teacher,
            report_failures,
            run_coldstart,
        )

        teacher = make_teacher(config)  # an LLM teacher that cannot start: nothing written
        print(config, flush=True)
        tokenizer = budget_tokenizer(config.profile) if args.exact_budget else None
        try:
            run = run_coldstart(
                config, out, problems, teacher=teacher, tokenizer=tokenizer, progress=True
            )
        except EmptyDataset as empty:  # every request failed: the counts, exit 3 (a rerun asks
            if not empty.every_request_failed:  # again); any other empty set: one line, exit 2
                raise
            run = empty
    code = report_failures(run.result)
    print_json({**run.result, "config": config.to_dict()}, args)
    return code


# the openai teacher's connection flags (ColdStartConfig fields)
OPENAI_FLAGS = (
    "base_url",
    "timeout",
    "deadline",
    "max_retries",
    "requests_per_minute",
    "concurrency",
)


def check_teacher_flags(args: Any, config: ColdStartConfig) -> None:
    """Refuse a teacher's flag the chosen teacher would ignore (``--model`` for the rule
    teacher, the connection flags for any but the openai one)."""
    flags = {"requests_per_minute": "--rpm", "teacher_model": "--model"}
    used = [n for n in OPENAI_FLAGS if getattr(args, n, None) is not None]
    if config.teacher != "openai" and used:
        name = flags.get(used[0], "--" + used[0].replace("_", "-"))
        raise ValueError(f"{name} is for --teacher openai (the teacher here is {config.teacher})")
    if config.teacher == "rule" and getattr(args, "teacher_model", None):
        raise ValueError("--model names an LLM teacher: give --teacher hf or openai with it")
    if config.teacher == "hf" and not config.teacher_model:
        raise ValueError("--teacher hf needs --model: a hub id or a local model folder")
    env = os.environ
    url = config.base_url or env.get("OPENAI_BASE_URL")
    served = config.teacher_model or env.get("PR1_TEACHER_MODEL") or env.get("OPENAI_MODEL")
    if config.teacher == "openai" and not (url and served):
        raise ValueError(
            "--teacher openai needs --base-url and --model (or OPENAI_BASE_URL, e.g. "
            "http://127.0.0.1:8000/v1, and PR1_TEACHER_MODEL)"
        )
    why = url_problem(url) if config.teacher == "openai" else None
    if why:
        name = "--base-url" if config.base_url else "OPENAI_BASE_URL"
        raise ValueError(f"{name}: {why}")


# ----------------------------------------------------------------------------- training
def sft(args: Any) -> int:
    from pr1lib.config import PARALLEL_VARIANTS

    overrides = with_flags(args, "seed", config=SFTStageConfig)
    variants = PARALLEL_VARIANTS if args.variant == "both" else (args.variant or None,)
    configs = {v: _sft_config(args, v, overrides) for v in variants}
    configs = {cfg.variant: cfg for cfg in configs.values()}  # None: the profile's variant
    data = check_dataset(args.data) if args.data else None
    base = args.model or (worlds.get(args.world).init("plain") if args.world else None)
    model = check_model(base) if base else None
    start = model or _profile_model(args.profile)  # what run_sft loads without --model
    for cfg in configs.values():  # another world's start or rows: one line, before any folder
        check_sft_start(cfg.source, start, data, args.world)
    outs = {v: _sft_out(args, cfg, len(configs) > 1) for v, cfg in configs.items()}
    for out in outs.values():
        check_apart(out, data, "--data")
        check_apart(out, model, "--model")
    results, before = {}, None
    with ExitStack() as claims:  # every folder first: the second variant never fails late
        for variant, cfg in configs.items():
            claims.enter_context(
                claim_folder(
                    args,
                    outs[variant],
                    "sft",
                    cfg,
                    ("num_threads",),
                    finished=("run_card.json",),  # never trained over without --overwrite
                )
            )
        from pr1lib.decoding.models import stage_model_config  # heavy (torch): after every check
        from pr1lib.training.sft import run_sft

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


def _profile_model(profile: str) -> str | None:
    """The profile's model an SFT starts from without ``--model`` (``None``: a random one)."""
    from pr1lib.config import ModelConfig

    cfg = ModelConfig.for_profile(profile)
    return None if cfg.random_init else cfg.name


def _sft_config(args: Any, variant: str | None, overrides: dict[str, Any]) -> SFTStageConfig:
    """One variant's config: a world's cold start (``--world``) or the profile's, then the flags."""
    chosen = {**overrides, **({"variant": variant} if variant else {})}
    if args.world:
        return SFTStageConfig.for_world(
            args.world, args.profile, chosen.pop("variant", "seen"), **chosen
        )
    return SFTStageConfig.for_profile(args.profile, **chosen)


def _sft_out(args: Any, cfg: SFTStageConfig, several: bool) -> Path:
    """A variant's run folder (``--out``, with a folder per variant when there are two)."""
    default = runs_dir() / f"sft-{cfg.profile}-{cfg.variant}"
    return Path(args.out) / cfg.variant if args.out and several else Path(args.out or default)


def export_verl(args: Any) -> int:
    from pr1lib.format.prompts import PROMPT_STYLES as STYLES

    if not args.source and args.coldstart is None:
        raise ValueError(
            "nothing to export: give --source NAME (repeatable) and/or --coldstart DIR"
        )
    if args.prompt_style not in STYLES:
        raise ValueError(f"--prompt-style {args.prompt_style!r}: choose from {', '.join(STYLES)}")
    if args.coldstart is not None:
        check_dataset(args.coldstart, "--coldstart")
        check_apart(args.out, args.coldstart, "--coldstart")
    with claim_folder(args, args.out, "export-verl"):
        from pr1lib.training.verl import export_verl as export  # heavy: after every check

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
    from pr1lib.notebook.twins import make_outputs

    print_json({"profile": args.profile, "twins": make_outputs(args.profile, args.only)}, args)
    return 0


def repo_url(args: Any) -> int:
    from pr1lib.store.publish import set_repo_url

    changed = set_repo_url(args.url, branch=args.branch)
    for path in changed:
        print(f"rewrote {path.name}", flush=True)
    print_json({"url": args.url, "changed": len(changed)}, args)
    return 0

"""The measuring commands: ``eval``, ``blockcost`` and ``bench``; each prints one JSON object last
(``--card NAME`` also keeps it as a result card). ``pr1lib.cli.main`` describes their arguments.
"""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pr1lib.cli.flags import check_apart
from pr1lib.cli.pipeline import claim_folder, print_json, with_flags
from pr1lib.config import EVAL_SETS, EvalConfig
from pr1lib.config.checks import check_model, parse_keys
from pr1lib.experiments import STUDIES
from pr1lib.store.paths import runs_dir


def eval(args: Any) -> int:  # the command's name
    print_json(_eval(args), args)
    return 0


def blockcost(args: Any) -> int:
    from pr1lib.config import ModelConfig
    from pr1lib.data.evalsets import check_size, names

    profile = args.profile  # resolved once, by pr1lib.cli.main
    name = check_model(args.model) if args.model else ModelConfig.for_profile(profile).name
    tiers = [t.strip() for t in (args.data or "").split(",") if t.strip()]
    unknown = [t for t in tiers if t not in names()]
    if unknown or (args.data is not None and not tiers):
        raise ValueError(f"--data {args.data!r}: choose from {', '.join(names())}")
    args.mode, tiers = blockcost_defaults(name, profile, args.mode, tiers)
    for tier in tiers:  # --n beyond a benchmark: its limit, before anything loads
        check_size(tier, args.n)
    # temperature, lengths, max_blocks, batch_size: typed and checked before anything loads
    sampling = parse_keys(args.overrides, STUDIES["blockcost"].sets, "blockcost")
    from pr1lib.evaluation.evaluate import load_for_eval
    from pr1lib.experiments.blockcost import blockcost as measure

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


def blockcost_defaults(
    name: str, profile: str, mode: str | None, tiers: list[str]
) -> tuple[str, list[str]]:
    """``blockcost``'s mode and tiers: as given, else as the model's card says (its variant's
    mode, its world's tiers; else seen on TinyWorld's)."""
    from pr1lib import worlds

    chosen = as_trained(name, profile, {"mode": mode, "benchmark": tiers[0] if tiers else ""})
    world = worlds.find_source(chosen.get("benchmark", "")) if not tiers else None
    return mode or chosen.get("mode", "seen"), tiers or list(
        (world[0] if world else worlds.get("tinyworld")).sources()
    )


def _eval(args: Any) -> dict:
    from pr1lib.config import ModelConfig
    from pr1lib.data.evalsets import check_size

    profile = args.profile  # resolved once, by pr1lib.cli.main
    overrides = with_flags(args, "n", "k", "mode", "seed", config=EvalConfig, data="benchmark")
    if args.n == 0:  # --n 0: every problem
        overrides["n"] = None
    name = check_model(args.model) if args.model else ModelConfig.for_profile(profile).name
    overrides = {**as_trained(name, profile, overrides), **overrides}  # the card's, unless told
    cfg = EvalConfig.for_profile(profile, **overrides)
    cfg = cfg.replace(**{**world_layout(cfg.benchmark), **overrides})
    check_size(cfg.benchmark, cfg.n)  # --n beyond the benchmark: the limit, before any folder
    cfg = cfg.replace(
        prompt_style=cfg.prompt_style or ModelConfig.for_profile(profile).prompt_style
    )
    out = Path(args.out) if args.out else runs_dir() / "eval"
    check_apart(out, args.model, "--model")
    say = (lambda *a, **kw: None) if args.json else print
    with claim_folder(args, out, "eval"):
        from pr1lib.evaluation.evaluate import (  # heavy: after the checks
            load_for_eval,
            model_tag,
            run_eval,
        )
        from pr1lib.notebook.reports import write_eval_outputs

        model, tokenizer = load_for_eval(name, profile, say)  # a model it cannot load: one line
        say(f"profile={profile} model={name}\n{cfg}", flush=True)
        result = run_eval(
            model, tokenizer, config=cfg, out_dir=out, tag=model_tag(name), progress=not args.json
        )
        return {**result, **write_eval_outputs(result, out, run_dir=args.model)}  # + .md, .html


def as_trained(name: str, profile: str, asked: dict[str, Any]) -> dict[str, Any]:
    """The rollout mode and benchmark ``name`` was trained for (its card:
    ``training.starts.trained_as``), where ``asked`` gives none: an unseen model is decoded
    forked, a WideWorld one measured on WideWorld's tier of the profile's default. A flag that
    says otherwise wins, and one line on stderr says so."""
    from pr1lib import worlds
    from pr1lib.training.runs import decoded_hidden
    from pr1lib.training.starts import DECODE_MODES, told_otherwise, trained_as

    variant, world = trained_as(name)
    chosen = {}
    if variant in DECODE_MODES:
        chosen["mode"] = DECODE_MODES[variant]
    if decoded_hidden(name, asked.get("mode")):
        chosen["hide_plan"] = True  # decoded as it was trained: its plans hidden
    if world in worlds.names():  # its world's tier of the profile's default benchmark
        default = EvalConfig.for_profile(profile).benchmark
        found = worlds.find_source(default)
        tiers = [t for t, b in EVAL_SETS[profile].items() if b == default]
        chosen["benchmark"] = worlds.get(world).source(found[1] if found else [*tiers, "easy"][0])
    given = worlds.find_source(asked.get("benchmark", ""))
    world_asked = given[0].name if given else asked.get("benchmark")
    note = told_otherwise(name, {"mode": asked.get("mode"), "world": world_asked})
    if note:
        print(note, file=sys.stderr, flush=True)
    return chosen


def world_layout(benchmark: str) -> dict[str, Any]:
    """A world's block layout for its own benchmark (``World.layout``: WideWorld's nine lettered
    paths), so ``eval`` decodes its checkpoints as they were trained; ``{}`` elsewhere."""
    from pr1lib import worlds

    found = worlds.find_source(benchmark)
    return found[0].layout() if found else {}


def bench(args: Any) -> int:
    from pr1lib.cli.bench import run_benchmarks

    if args.model:
        check_model(args.model)  # a missing folder: one error line, before any work
        if args.out:
            check_apart(args.out, args.model, "--model")
    # None when not given (pr1lib.cli.flags); threads stay None: each benchmark's own
    # (run_benchmarks)
    defaults = {"path_len": 48, "steps": 3}
    for key, value in defaults.items():
        setattr(args, key, value if getattr(args, key) is None else getattr(args, key))
    with ExitStack() as held:
        if args.out:
            held.enter_context(claim_folder(args, args.out, "bench"))
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

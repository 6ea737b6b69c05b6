"""The command line's checks of a command's flags taken together, before anything loads or is
written: a flag the command would ignore, flags that contradict each other, seeds given two ways
and the result card's name. ``pr1lib.cli.main`` runs ``check_flags`` right after parsing; each
command then checks its config, data and folders the same way before its heavy imports. Light
imports only.

>>> from argparse import Namespace
>>> check_flags(Namespace(command="bench", which="rollout", model="m", out=None))
Traceback (most recent call last):
...
ValueError: bench rollout takes no --model (it is for bench grpo or all)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pr1lib.config.checks import MAX_SEED, parse_value
from pr1lib.data.sources import REAL_SOURCES
from pr1lib.store.cards import card_path, git_commit
from pr1lib.store.folders import check_out_path

# bench: flag -> the benchmarks that read it
BENCH_FLAGS = {
    "model": ("grpo", "all"),
    "steps": ("grpo", "all"),
    "path_len": ("rollout", "all"),
    "threads": ("rollout", "eval", "limit", "engine", "latency", "all"),
}
FOLDER_FLAGS = ("overwrite", "resume")


def flag(name: str) -> str:
    """``--path-len`` for ``path_len``."""
    return "--" + name.replace("_", "-")


def given(args: Any, name: str) -> bool:
    value = getattr(args, name, None)
    return value not in (None, False, [], ())


def check_flags(args: Any) -> None:
    """Refuse what ``args`` asks that the command would not do (one ``ValueError`` line)."""
    if getattr(args, "card", None):
        card_path(args.card, getattr(args, "overwrite_card", False))
    if given(args, "overwrite") and given(args, "resume"):
        raise ValueError("choose --overwrite (start over) or --resume (write into it), not both")
    if given(args, "overwrite_card") and not given(args, "card"):
        raise ValueError("--overwrite-card goes with --card NAME")
    if getattr(args, "out", None) is not None:  # empty, a link to nowhere, committed files
        check_out_path(args.out)
    check = CHECKS.get(args.command)
    if check is not None:
        check(args)


def _bench(args: Any) -> None:
    for name, which in BENCH_FLAGS.items():
        if given(args, name) and args.which not in which:
            raise ValueError(
                f"bench {args.which} takes no {flag(name)} (it is for bench {' or '.join(which)})"
            )
    if not given(args, "out"):
        _no_folder_flags(args, "bench without --out writes no folder")
    if given(args, "card") and git_commit().endswith("+dirty"):
        raise ValueError(
            "bench --card needs a clean commit (the card records it): commit or stash the changes "
            "to tracked files first"
        )


def _no_folder_flags(args: Any, why: str) -> None:
    for name in FOLDER_FLAGS:
        if given(args, name):
            raise ValueError(f"{flag(name)} has nothing to do: {why}")


def _exists(args: Any, name: str, what: str) -> None:
    """Refuse a data flag naming a path that is not there (before the hub is tried for it)."""
    path = getattr(args, name, None)
    if path is not None and not Path(path).expanduser().exists():
        raise ValueError(f"{flag(name)} {path} does not exist: give {what}")


def _export_verl(args: Any) -> None:
    twice = [s for s in set(args.source) if args.source.count(s) > 1]
    if twice:
        raise ValueError(f"--source {twice[0]} is given twice: give each source once")
    real = [s for s in args.source if s in REAL_SOURCES]
    if given(args, "reward_mode") and not args.source:
        raise ValueError("--reward-mode sets the RL sets' reward: give --source NAME with it")
    if given(args, "data_dir") and not real:
        raise ValueError(
            f"--data-dir is where {' and '.join(REAL_SOURCES)} are read from: the sources given "
            "are generated (give --source gsm8k or dapo, or leave --data-dir out)"
        )
    _exists(
        args, "data_dir", "the folder holding gsm8k/ and dapo/ (or leave it out: $PR1_DATA_DIR)"
    )


def _coldstart(args: Any) -> None:
    parts = [p.strip() for p in (args.source or "").split("+") if p.strip()]
    if given(args, "data_path") and parts and not any(p in REAL_SOURCES for p in parts):
        raise ValueError(
            f"--data-path is where {' and '.join(REAL_SOURCES)} are read from: {args.source} "
            "is generated (leave --data-path out)"
        )
    _exists(args, "data_path", "the data file, or the folder holding gsm8k/ and dapo/")


def _grpo(args: Any) -> None:
    if given(args, "refresh") and args.stage in ("2", "3"):
        raise ValueError(
            "--refresh reruns a study's finished runs; with --stage, pass --overwrite to start "
            "the run over"
        )
    seeds(args)


def _study(args: Any) -> None:
    seeds(args)


CHECKS = {
    "bench": _bench,
    "export-verl": _export_verl,
    "coldstart": _coldstart,
    "grpo": _grpo,
    "study": _study,
}


def seeds(args: Any) -> list[int]:
    """The seeds a run repeats for: ``--seeds``, ``--seed`` or ``--set seed=N`` (one way, or all
    the same), left in ``args.seeds``; ``--set seed`` leaves the overrides (the run passes each
    seed itself)."""
    sets = [item for item in getattr(args, "overrides", []) if item.partition("=")[0] == "seed"]
    ways = {}
    if getattr(args, "seeds", None):
        ways["--seeds"] = list(args.seeds)
    if getattr(args, "seed", None) is not None:
        ways["--seed"] = [args.seed]
    for item in sets:
        ways["--set seed"] = [parse_value("seed", "int", item.partition("=")[2])]
    if len({tuple(v) for v in ways.values()}) > 1:
        shown = ", ".join(f"{k} {' '.join(map(str, v))}" for k, v in ways.items())
        raise ValueError(f"seeds given two ways ({shown}): give one")
    repeated = [v for found in ways.values() for v in set(found) if found.count(v) > 1]
    if repeated:
        raise ValueError(f"--seeds repeats seed {repeated[0]}: give each seed once")
    if any(not 0 <= v <= MAX_SEED for found in ways.values() for v in found):
        shown = ", ".join(f"{k} {' '.join(map(str, v))}" for k, v in ways.items())
        raise ValueError(f"a seed must be a whole number from 0 to {MAX_SEED}, got {shown}")
    args.overrides = [item for item in getattr(args, "overrides", []) if item not in sets]
    args.seeds, args.seed = next(iter(ways.values()), [0]), None  # resolved: one way from now on
    return list(args.seeds)


def check_apart(out: str | Path, other: str | Path | None, flag_name: str) -> None:
    """Refuse an ``--out`` that is ``other`` (a ``--model``, ``--init`` or ``--data`` folder),
    holds it, or lies inside a run folder's ``merged/`` model: the run would write over, or move
    away, its own input.

    >>> check_apart(".", "pr1lib", "--init")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --out . would hold the --init pr1lib (the run would write over its own input)...
    """
    if other is None or not Path(str(other)).expanduser().exists():
        return
    a, b = Path(out).expanduser().resolve(), Path(str(other)).expanduser().resolve()
    inside = (b / "merged").is_dir() and (a == b / "merged" or b / "merged" in a.parents)
    if a == b or a in b.parents or inside:
        how = "be" if a == b else "hold" if a in b.parents else "lie inside the model of"
        raise ValueError(
            f"--out {out} would {how} the {flag_name} {other} (the run would write over its own "
            "input): pick another --out"
        )

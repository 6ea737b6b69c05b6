"""``python -m pr1lib COMMAND``: every pipeline stage from the command line.

This module builds the parser (each command's arguments: ``pr1lib.cli.parser``) and dispatches: the
body of each command lives in the module ``COMMANDS`` names and is imported when the command runs,
so ``--help`` never loads torch. Commands map onto the same config dataclasses the notebooks use
(``--profile``, ``--out``, ``--set key=value``), print the config, save it with the run, and (when
they measure something) print one JSON object last.

>>> sorted(COMMANDS)[:3]
['bench', 'blockcost', 'coldstart']
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from pathlib import Path

from pr1lib.cli.flags import check_flags
from pr1lib.cli.parser import ARGUMENTS, EPILOGS, card_flag
from pr1lib.config.arguments import Parser
from pr1lib.config.profiles import check_profile
from pr1lib.store.disk import DiskFull, is_disk_full
from pr1lib.worlds.teachers import TeacherError

# what a user's input can raise: one line naming it, exit 2 (TeacherError: a teacher that had to
# stop, its finished traces kept)
INPUT_ERRORS = (ValueError, OSError, TeacherError)

# command -> (the module of its body: pr1lib.<module>.<name with - as _>, one-line help)
COMMANDS = {
    "tour": ("pipeline", "run every notebook headless and write runs/tour-*/report.html"),
    "pretrain-tiny": ("pipeline", "train a tiny base model from scratch on a world's problems"),
    "coldstart": ("pipeline", "cold-start SFT data: problems -> teacher -> filter -> data set"),
    "sft": ("pipeline", "stage 1: cold-start SFT (LoRA, 4-bit where asked), seen or unseen"),
    "grpo": ("rl", "stages 2-3: GRPO with the paper's rewards; a study by its old flag"),
    "study": ("rl", "a study of pr1lib.experiments (curriculum, ablation, ...), one card"),
    "eval": ("measure", "evaluate a model: mean@k, pass@k, parallel ratio, validity"),
    "blockcost": (
        "measure",
        "accuracy with a forced block vs forced plain, per tier, with a paired-bootstrap interval",
    ),
    "bench": (
        "measure",
        "speed benchmarks (rollout engine, unseen training, GRPO steps, evaluation, the "
        "engine's limit); JSON last",
    ),
    "export-verl": (
        "pipeline",
        "write RL / cold-start sets as verl parquet (+ the verl reward path)",
    ),
    "outputs": (
        "pipeline",
        "execute the notebooks and write their .ipynb twins with outputs (figures as PNG)",
    ),
    "repo-url": (
        "pipeline",
        "point every Colab/Binder badge and notebook install cell at this repository URL",
    ),
}


# without --profile or $PR1_PROFILE, the tour runs tiny even where there is CUDA
DEFAULT_PROFILES = {"tour": "tiny"}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m pr1lib",
        description="Parallel-R1 tutorial "
        "pipeline: each COMMAND runs one stage with the notebooks' configs.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, text) in COMMANDS.items():
        p = sub.add_parser(name, help=text, description=text, epilog=EPILOGS.get(name))
        ARGUMENTS[name](p)
        if name != "study":  # each study's own parser has it
            card_flag(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command. A bad input (a flag, a config value, a file, a folder, a model, a data
    row) is one ``error:`` line on stderr naming it, and exit 2, before anything is written or
    torch loads where the input allows; Ctrl-C is one line and exit 130; any other exception is
    a bug: its traceback, one line saying where to report it, and exit 1. ``PR1_TRACEBACK=1``
    shows the traceback of a bad input too."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    try:
        if "profile" in vars(args):  # the one place a command's profile is resolved
            default = None if os.environ.get("PR1_PROFILE") else DEFAULT_PROFILES.get(args.command)
            args.profile = check_profile(args.profile or default)
        elif os.environ.get("PR1_PROFILE"):
            check_profile(None)  # an unknown $PR1_PROFILE fails every command the same way
        check_flags(args)  # flag combinations, a flag the command would ignore, the card's name
        from pr1lib.config.runtime import quiet_known_noise

        quiet_known_noise()  # before bitsandbytes loads (it imports torch: after parsing, too)
        module = importlib.import_module(f"pr1lib.cli.{COMMANDS[args.command][0]}")
        return int(getattr(module, args.command.replace("-", "_"))(args) or 0)
    except KeyboardInterrupt:
        print(interrupted(args.command), file=sys.stderr, flush=True)
        return 130
    except Exception as err:
        if os.environ.get("PR1_TRACEBACK") and (is_disk_full(err) or isinstance(err, INPUT_ERRORS)):
            raise
        if is_disk_full(err):  # a full disk: the folder and the bytes, the run resumable
            print(f"error: {full_disk(err)}", file=sys.stderr, flush=True)
            return 2
        if isinstance(err, INPUT_ERRORS):  # bad input: a config, a file, a folder, a data row
            print(f"error: {' '.join(str(err).split()) or type(err).__name__}", file=sys.stderr)
            return 2
        traceback.print_exc()  # anything else is ours to fix
        print(
            f"error: this is a bug in pr1lib ({type(err).__name__}), not a mistake in the input: "
            f"please report it at {issues_url()} with the command and the traceback above",
            file=sys.stderr,
            flush=True,
        )
        return 1


def full_disk(err: BaseException) -> str:
    """The one line of a write that found no room: the folder (the run's, else the file's) and
    the bytes when the save said how many it needed (``pr1lib.store.disk.DiskFull``)."""
    if isinstance(err, DiskFull):
        return str(err)
    runs = sys.modules.get("pr1lib.store.folders")
    held = list(getattr(runs, "HELD", []))
    name = getattr(err, "filename", None)
    folder = held[-1] if held else Path(name).parent if name else Path.cwd()
    return str(DiskFull(folder))


def issues_url() -> str:
    """Where to report a bug: the repository's issue tracker."""
    try:
        from pr1lib.store.publish import repo_url

        return f"{repo_url().rstrip('/')}/issues"
    except (OSError, ValueError):
        return "the repository's issue tracker"


# commands whose rerun continues where an interrupted one stopped
RESUMES = ("coldstart", "grpo", "study", "pretrain-tiny", "eval")


def interrupted(command: str = "") -> str:
    """The one line after Ctrl-C: where to resume from (the folder this run was writing), or
    that a rerun starts again (``sft``, ``bench``, ... keep no checkpoint)."""
    runs = sys.modules.get("pr1lib.store.folders")
    held = [p for p in getattr(runs, "HELD", []) if p.exists()]
    if not held:
        return "interrupted: nothing was written; rerun the same command to start again"
    kept = getattr(sys.modules.get("pr1lib.data.traces"), "KEPT", {})
    if command == "coldstart" and kept:
        return (
            f"interrupted: {sum(kept.values())} new teacher answer(s) of this run are kept in "
            f"{held[-1]}; rerun the same command to ask only for the missing ones"
        )
    if command in RESUMES:
        return f"interrupted: rerun the same command to resume from {held[-1]}"
    return (
        f"interrupted: {command} keeps no checkpoint; rerun the same command to start again "
        f"(in {held[-1]})"
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

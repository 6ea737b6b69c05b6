"""Seconds for ``python -m pr1lib --help`` and for each ``COMMAND --help`` (the target is under
one second each): a fresh interpreter per run, the median of ``--repeats`` runs, JSON last.

Run: .venv/bin/python benchmarks/cli_help.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from pr1lib.cli.main import COMMANDS
from pr1lib.config.arguments import Parser, count


def seconds_of(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def arguments() -> argparse.ArgumentParser:
    """This script's flags, each checked as it is parsed (a bad one: one line, exit 2)."""
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=count(1, 1000, "runs of each command"), default=5)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    runs = {"--help": ["--help"], **{name: [name, "--help"] for name in COMMANDS}}
    medians = {
        name: round(
            statistics.median(
                seconds_of([sys.executable, "-m", "pr1lib", *argv]) for _ in range(args.repeats)
            ),
            3,
        )
        for name, argv in runs.items()
    }
    python = round(
        statistics.median(seconds_of([sys.executable, "-c", "pass"]) for _ in range(args.repeats)),
        3,
    )
    print(
        json.dumps(
            {
                "median_seconds": medians,
                "max_seconds": max(medians.values()),
                "bare_python_seconds": python,
                "repeats": args.repeats,
            }
        )
    )


if __name__ == "__main__":
    main()

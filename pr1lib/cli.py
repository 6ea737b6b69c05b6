"""``python -m pr1lib COMMAND``: every pipeline stage from the command line.

Each command lives next to the code it runs: a module listed in ``COMMAND_MODULES`` defines
``cli_register(subparsers)``, which adds its sub-parser and sets ``func``. Commands map onto the
same config dataclasses the notebooks use (``--profile``, ``--out``, ``--set key=value``), print
the config, save it with the run, and (when they measure something) print one JSON object last.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import sys
from typing import Any

from pr1lib.config import PROFILES

COMMAND_MODULES = (
    "pr1lib.tour",
    "pr1lib.pretrain",
    "pr1lib.coldstart",
    "pr1lib.sft",
    "pr1lib.grpo",
    "pr1lib.evaluate",
    "pr1lib.bench",
    "pr1lib.verl",
)


def add_common(parser: argparse.ArgumentParser, out_default: str | None = None) -> None:
    """The flags every stage shares: profile, output folder, seed and ``--set`` overrides."""
    parser.add_argument("--profile", choices=PROFILES, default=None,
                        help="cost tier (default: $PR1_PROFILE, else colab with CUDA, tiny without)")
    parser.add_argument("--out", default=out_default, help="output folder for this run")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: the config's)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override one config field, e.g. --set learning_rate=3e-4 (repeatable)")


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["lr=1e-3", "name=abc"]`` -> ``{"lr": 0.001, "name": "abc"}`` (Python literals, else strings).

    >>> parse_overrides(["max_steps=5", "name=data/tiny-base", "use_lora=True"])
    {'max_steps': 5, 'name': 'data/tiny-base', 'use_lora': True}
    """
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


def print_json(result: dict[str, Any]) -> None:
    """Measuring commands end with exactly one JSON object on the last line."""
    print(json.dumps(result, default=str), flush=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pr1lib",
        description="Parallel-R1 tutorial pipeline: each COMMAND runs one stage with the notebooks' configs.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).cli_register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

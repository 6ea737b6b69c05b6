"""``python -m pr1lib COMMAND``: every pipeline stage from the command line.

This module only describes the commands (their arguments) and dispatches: the body of each
command lives in ``pr1lib.commands`` and is imported when the command runs, so ``--help`` never
loads torch. Commands map onto the same config dataclasses the notebooks use (``--profile``,
``--out``, ``--set key=value``), print the config, save it with the run, and (when they measure
something) print one JSON object last.

>>> sorted(COMMANDS)[:3]
['bench', 'blockcost', 'coldstart']
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import sys
from typing import Any

from pr1lib.config import PARALLEL_VARIANTS, ROLLOUT_MODES, VARIANTS, VERL_REWARDS, WORLDS
from pr1lib.data import SOURCES
from pr1lib.evalsets import BENCHMARKS
from pr1lib.profiles import PROFILES, check_profile
from pr1lib.rewards import REWARD_MODES

# command -> one-line help; its body is pr1lib.commands.<name with - as _>
COMMANDS = {
    "tour": "run every notebook headless and write runs/tour-*/report.html",
    "pretrain-tiny": "train the tiny TinyGSM base model from scratch",
    "coldstart": "cold-start SFT data: problems -> teacher -> filter -> data set",
    "sft": "stage 1: cold-start SFT (LoRA, 4-bit where asked), seen or unseen",
    "grpo": "stages 2-3: GRPO with the paper's rewards; no --stage: the reward ablation",
    "eval": "evaluate a model: mean@k, pass@k, parallel ratio, validity",
    "blockcost": "accuracy with a forced block vs forced plain, per tier, with a "
    "paired-bootstrap interval",
    "bench": "speed benchmarks (rollout engine, unseen training, GRPO steps); JSON last",
    "export-verl": "write RL / cold-start sets as verl parquet (+ the verl reward path)",
    "outputs": "execute the notebooks and write their .ipynb twins with outputs (figures as PNG)",
    "repo-url": "point every Colab/Binder badge and notebook install cell at this repository URL",
}


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose mistakes are one line (``--help`` still shows the usage)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def count(lowest: int = 1):
    """An argparse ``type``: a whole number of at least ``lowest``, else one clear line.

    >>> count(1)("3"), count(0)("0")
    (3, 0)
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < lowest:
            raise argparse.ArgumentTypeError(
                f"must be a whole number of {lowest} or more, got {text!r}"
            )
        return value

    return parse


def add_folder_flags(parser: argparse.ArgumentParser) -> None:
    """``--overwrite`` and ``--resume``: what to do with an ``--out`` holding a different run."""
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="start over in an --out that holds another run (the old one moves to <out>.prev)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue in an --out that holds another config's run (or other files)",
    )


def add_common(parser: argparse.ArgumentParser, out_default: str | None = None) -> None:
    """The flags every stage shares: profile, output folder, seed and ``--set`` overrides."""
    parser.add_argument(
        "--profile",
        choices=PROFILES,
        default=None,
        help="cost tier (default: $PR1_PROFILE, else colab with CUDA, tiny without)",
    )
    parser.add_argument("--out", default=out_default, help="output folder for this run")
    parser.add_argument(
        "--seed", type=count(0), default=None, help="random seed (default: the config's)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one config field, e.g. --set learning_rate=3e-4 (repeatable)",
    )
    add_folder_flags(parser)


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["lr=1e-3", "name=abc"]`` -> ``{"lr": 0.001, "name": "abc"}`` (Python literals, else
    strings).

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


# ----------------------------------------------------------------------------- the commands'
# arguments
def _tour(p: argparse.ArgumentParser) -> None:
    add_common(p)
    p.add_argument("--only", nargs="*", default=None, help="notebook prefixes to run, e.g. 00 01")
    p.epilog = (
        "--set KEY=VALUE sets a parameter the notebooks declare (e.g. INIT=runs/x); "
        "PROFILE and SEED come from --profile and --seed"
    )


def _pretrain_tiny(p: argparse.ArgumentParser) -> None:
    add_common(p, out_default="runs/pretrain-tiny")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (for log files)")


def _coldstart(p: argparse.ArgumentParser) -> None:
    add_common(p)
    p.add_argument(
        "--teacher", choices=("rule", "hf", "openai"), default=None, help="default: rule"
    )
    p.add_argument("--source", choices=SOURCES, default=None, help="default: gsm8k")
    p.add_argument("--split", choices=("train", "test"), default=None, help="default: train")
    p.add_argument("--limit", type=count(1), default=None, help="first N problems (default: all)")
    p.add_argument(
        "--data-path",
        default=None,
        help="a folder or JSONL file (default: $PR1_DATA_DIR or ../shared/data, else the hub)",
    )
    p.add_argument(
        "--model",
        dest="teacher_model",
        default=None,
        help="LLM teacher: hub id, folder or served name",
    )
    p.add_argument(
        "--base-url",
        default=None,
        help="openai teacher: server URL ending in /v1 ($OPENAI_BASE_URL)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="openai teacher: "
        "seconds to wait to connect or for the next byte, per attempt (default 120)",
    )
    p.add_argument(
        "--deadline",
        type=float,
        default=None,
        metavar="S",
        help="openai teacher: wall-clock seconds per problem, retries included (default 600)",
    )
    p.add_argument(
        "--max-retries",
        type=count(0),
        default=None,
        metavar="N",
        help="openai teacher: "
        "retries after a 408/429/5xx, timeout or dropped connection (default 4)",
    )
    p.add_argument(
        "--rpm",
        dest="requests_per_minute",
        type=float,
        default=None,
        metavar="R",
        help="openai teacher: at most R requests per minute (default 0: no limit)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=None,
        metavar="C",
        help="openai teacher: requests in flight at once (default 4)",
    )
    p.add_argument(
        "--exact-budget",
        action="store_true",
        help="count the token budget with the "
        "profile's tokenizer (default: 4 characters per token)",
    )


def _sft(p: argparse.ArgumentParser) -> None:
    add_common(p)
    p.add_argument(
        "--variant",
        choices=(*PARALLEL_VARIANTS, "both"),
        default=None,
        help="seen (plain causal), unseen (path-isolating mask), or both",
    )
    p.add_argument(
        "--data",
        default=None,
        help="cold-start set folder from `coldstart` (default: build one with the rule teacher)",
    )
    p.add_argument(
        "--model",
        default=None,
        help="start model: a model folder, a run folder "
        "(its merged/) or a hub id (default: the profile's model)",
    )


def _grpo(p: argparse.ArgumentParser) -> None:
    add_common(p)
    p.add_argument(
        "--stage",
        choices=("2", "3", "all"),
        default=None,
        help="2: easy problems, 3: hard ones, all: the variant's curriculum (seen 2->3, unseen 3)",
    )
    p.add_argument(
        "--reward",
        choices=tuple(REWARD_MODES),
        default=None,
        help="reward mode (default: the stage's)",
    )
    p.add_argument(
        "--variant",
        choices=VARIANTS,
        default=None,
        help="seen (causal), unseen (path-isolating) or plain (no tags: the GRPO baseline)",
    )
    p.add_argument(
        "--init",
        default=None,
        help="start checkpoint: a run folder with merged/ "
        "(default: the previous stage's run, else runs/sft-<profile>-<variant>)",
    )
    p.add_argument(
        "--model",
        default=None,
        help="start model, as --init: a model folder, a run folder (its merged/) or a hub id",
    )
    p.add_argument(
        "--steps", type=count(1), default=None, help="optimizer steps (default: max_steps)"
    )
    p.add_argument("--seeds", type=count(0), nargs="+", default=None, help="repeat for these seeds")
    p.add_argument(
        "--world",
        choices=WORLDS,
        default=None,
        help="tinyworld: TinyWorld's problems "
        "and settings, from data/tinyworld-sft (unseen: data/tinyworld-sft-unseen; "
        "plain: data/tinyworld-base)",
    )
    p.add_argument(
        "--dose-response",
        action="store_true",
        help="Stage-2 runs of the alternating "
        "reward at 0/2/5/10 tiered steps per 10 and at b = 0/0.2/0.5/1 (easy problems)",
    )
    p.add_argument("--ablation", action="store_true", help="run (or print) the reward ablation")
    p.add_argument(
        "--unseen-stage2",
        action="store_true",
        help="the unseen variant from its SFT "
        "two ways: Stage 3 directly (the paper) and Stage 2 then Stage 3",
    )
    p.add_argument(
        "--notebook",
        action="store_true",
        help="notebook 06's sizes (smaller "
        "batches, a shorter Stage 3): the run its cell would make",
    )
    p.add_argument(
        "--refresh", action="store_true", help="ablation, --unseen-stage2: ignore cached results"
    )


def _eval(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="folder or hub id (default: the profile's model)")
    p.add_argument("--data", choices=list(BENCHMARKS), default=None, help="benchmark")
    p.add_argument("--n", type=count(0), default=None, help="first N problems (0: all)")
    p.add_argument("--k", type=count(1), default=None, help="samples per problem")
    p.add_argument(
        "--mode", choices=ROLLOUT_MODES, default=None, help="seen (causal) or forked (engine)"
    )
    p.add_argument("--json", action="store_true", help="print only the final JSON line")
    add_common(p)


def _blockcost(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="model or run folder (default: the profile's)")
    p.add_argument(
        "--data",
        default="tinyworld-easy,tinyworld-hard",
        help="benchmarks, comma-separated (e.g. tinygsm-easy,tinygsm-hard)",
    )
    p.add_argument("--n", type=count(1), default=200, help="held-out problems per tier")
    p.add_argument("--k", type=count(1), default=4, help="samples per problem and condition")
    p.add_argument(
        "--mode",
        choices=("seen", "forked"),
        default="seen",
        help="seen for seen-SFT models, forked for unseen ones",
    )
    add_common(p)


def _bench(p: argparse.ArgumentParser) -> None:
    p.add_argument("which", choices=("rollout", "grpo", "all"))
    p.add_argument("--out", default=None, help="also write DIR/<benchmark>.json")
    p.add_argument(
        "--repeats",
        type=count(1),
        default=None,
        help="interleaved repeats (default: 5 for rollout, 2 for grpo)",
    )
    p.add_argument(
        "--model",
        default=None,
        help="grpo: the policy, a model or run folder (default: the profile's)",
    )
    p.add_argument(
        "--steps", type=count(2), default=3, help="grpo: steps per run, the first one a warm-up"
    )
    p.add_argument("--path-len", type=count(1), default=48)
    p.add_argument("--threads", type=count(1), default=1)
    p.add_argument("--quick", action="store_true", help="tiny sizes, one repeat")
    add_folder_flags(p)


def _export_verl(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--source",
        action="append",
        default=[],
        choices=sorted(VERL_REWARDS),
        help="RL set to export (repeatable): gsm8k (Stage 2), dapo (Stage 3), tinygsm-*",
    )
    p.add_argument(
        "--coldstart", default=None, metavar="DIR", help="cold-start set folder from `coldstart`"
    )
    p.add_argument("--out", default="runs/verl", help="output folder (default: runs/verl)")
    p.add_argument("--limit", type=count(1), default=None, help="first N rows of each split")
    p.add_argument(
        "--reward-mode",
        choices=tuple(REWARD_MODES),
        default=None,
        help="extra_info.reward_mode of train rows (default: the paper's per set)",
    )
    p.add_argument("--prompt-style", default="v3", help="pr1lib.prompts style (default: v3)")
    p.add_argument(
        "--data-dir", default=None, help="folder with gsm8k/ and dapo/ (default: $PR1_DATA_DIR)"
    )
    add_folder_flags(p)


def _outputs(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--profile",
        choices=PROFILES,
        default="tiny",
        help="profile the notebooks run in (default: tiny, the outputs a visitor should see)",
    )
    p.add_argument("--only", nargs="*", default=None, help="notebook prefixes to run, e.g. 04 06")


def _repo_url(p: argparse.ArgumentParser) -> None:
    p.add_argument("url", help="https://github.com/OWNER/NAME (a fork's, say)")


EPILOGS = {
    "coldstart": "exit status: 0 done; 2 bad input, or the teacher had to stop (the "
    "finished traces are kept: rerun to resume); 3 every teacher request failed"
}
ARGUMENTS = {
    "tour": _tour,
    "pretrain-tiny": _pretrain_tiny,
    "coldstart": _coldstart,
    "sft": _sft,
    "grpo": _grpo,
    "eval": _eval,
    "blockcost": _blockcost,
    "bench": _bench,
    "export-verl": _export_verl,
    "outputs": _outputs,
    "repo-url": _repo_url,
}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m pr1lib",
        description="Parallel-R1 tutorial "
        "pipeline: each COMMAND runs one stage with the notebooks' configs.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, text in COMMANDS.items():
        p = sub.add_parser(name, help=text, description=text, epilog=EPILOGS.get(name))
        ARGUMENTS[name](p)
        p.add_argument(
            "--card",
            default=None,
            metavar="NAME",
            help="also write the printed "
            "result, command, config and machine to results/NAME.json (a result card)",
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command. A bad input is one ``error:`` line on stderr and exit 2 (before anything
    is written); Ctrl-C is one line and exit 130; ``PR1_TRACEBACK=1`` shows the traceback."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    try:
        if os.environ.get("PR1_PROFILE") and getattr(args, "profile", None) is None:
            check_profile(None)  # an unknown $PR1_PROFILE fails every command the same way
        from pr1lib.runtime import quiet_known_noise

        quiet_known_noise()  # before bitsandbytes loads (it imports torch: after parsing, too)
        commands = importlib.import_module("pr1lib.commands")  # heavy: torch, TRL (after parsing)
        return int(getattr(commands, args.command.replace("-", "_"))(args) or 0)
    except (ValueError, OSError) as err:  # bad input: a config, a file, a folder, a model
        if os.environ.get("PR1_TRACEBACK"):
            raise
        print(f"error: {' '.join(str(err).split()) or type(err).__name__}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(interrupted(), file=sys.stderr, flush=True)
        return 130


def interrupted() -> str:
    """The one line after Ctrl-C: where to resume from (the folder this run was writing)."""
    runs = sys.modules.get("pr1lib.runs")
    held = [p for p in getattr(runs, "HELD", []) if p.exists()]
    if not held:
        return "interrupted: nothing was written; rerun the same command to start again"
    return f"interrupted: rerun the same command to resume from {held[-1]}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""The arguments of every ``python -m pr1lib`` command (``pr1lib.cli.main`` builds the parser from
``ARGUMENTS``). Light imports only: ``--help`` never loads torch.
"""

from __future__ import annotations

import argparse
from typing import Any

from pr1lib import worlds
from pr1lib.config import PARALLEL_VARIANTS, ROLLOUT_MODES, VARIANTS, VERL_REWARDS
from pr1lib.config.arguments import count, model_folder, rate, seconds
from pr1lib.config.checks import MAX_SAMPLES, MAX_SEED, MAX_THREADS, MAX_TOKENS
from pr1lib.config.profiles import PROFILES
from pr1lib.data import evalsets
from pr1lib.data import sources as data
from pr1lib.experiments import STUDIES
from pr1lib.rewards.modes import REWARD_MODES
from pr1lib.worlds.planworld import TIER_WIDTHS
from pr1lib.worlds.tasks import MAX_PROBLEMS


def problems(lowest: int):
    return count(lowest, MAX_PROBLEMS, "the most problems a world generates per request")


SAMPLES = count(1, MAX_SAMPLES, "samples per problem")
TOKENS = count(1, MAX_TOKENS, "the longest context of any model here")
THREADS = count(1, MAX_THREADS, "the CPUs of this machine")
SEED = count(0, MAX_SEED, "numpy's seed range")


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


def add_common(
    parser: argparse.ArgumentParser, out_default: str | None = None, folder: bool = True
) -> None:
    """The flags every stage shares: profile, output folder, seed and ``--set`` overrides
    (``folder=False``: a command that writes no folder has no ``--out``, ``--overwrite``,
    ``--resume``)."""
    parser.add_argument(
        "--profile",
        choices=PROFILES,
        default=None,
        help="cost tier (default: $PR1_PROFILE, else colab with CUDA, tiny without)",
    )
    if folder:
        parser.add_argument("--out", default=out_default, help="output folder for this run")
    parser.add_argument(
        "--seed", type=SEED, default=None, help="random seed (default: the config's)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one config field, e.g. --set learning_rate=3e-4 (repeatable)",
    )
    if folder:
        add_folder_flags(parser)


def card_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--card",
        default=None,
        metavar="NAME",
        help="also write the printed result, command, config and machine to results/NAME.json "
        "(a result card; an existing one is refused)",
    )
    p.add_argument(
        "--overwrite-card", action="store_true", help="replace an existing results/NAME.json"
    )


def _tour(p: argparse.ArgumentParser) -> None:
    add_common(p)
    p.add_argument("--only", nargs="*", default=None, help="notebook prefixes to run, e.g. 00 01")
    p.add_argument(
        "--timings",
        action="store_true",
        help="print seconds per notebook and the slowest cells (always saved: timings.json)",
    )
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
    p.add_argument("--source", choices=data.sources(), default=None, help="default: gsm8k")
    p.add_argument("--split", choices=("train", "test"), default=None, help="default: train")
    p.add_argument(
        "--limit", type=problems(1), default=None, help="first N problems (default: all)"
    )
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
    _openai_flags(p)
    p.add_argument(
        "--exact-budget",
        action="store_true",
        help="count the token budget with the "
        "profile's tokenizer (default: 4 characters per token)",
    )


def _openai_flags(p: argparse.ArgumentParser) -> None:
    """The OpenAI-compatible teacher's connection settings."""
    p.add_argument(
        "--base-url",
        default=None,
        help="openai teacher: server URL ending in /v1 ($OPENAI_BASE_URL)",
    )
    p.add_argument(
        "--timeout",
        type=seconds,
        default=None,
        metavar="S",
        help="openai teacher: "
        "seconds to wait to connect or for the next byte, per attempt (default 120)",
    )
    p.add_argument(
        "--deadline",
        type=seconds,
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
        type=rate,
        default=None,
        metavar="R",
        help="openai teacher: at most R requests per minute (default 0: no limit)",
    )
    p.add_argument(
        "--concurrency",
        type=count(1),
        default=None,
        metavar="C",
        help="openai teacher: requests in flight at once (default 4)",
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
        "(its merged/) or a hub id (default: the world's base, else the profile's model)",
    )
    p.add_argument(
        "--world",
        choices=worlds.names(),
        default=None,
        help="a task world's cold start (its problems, rows and schedule) from its base model",
    )
    p.add_argument(
        "--no-eval", action="store_true", help="skip the held-out evaluation before and after"
    )


# flags the studies share with `grpo` (pr1lib.experiments.STUDIES says which study takes which)
STUDY_FLAGS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "variant": (
        ("--variant",),
        dict(choices=VARIANTS, help="seen (causal), unseen (path-isolating) or plain (no tags)"),
    ),
    "init": (
        ("--init",),
        dict(
            help="start checkpoint: a run folder with merged/ (default: the world's shipped "
            "SFT, else the previous stage's run, else runs/sft-<profile>-<variant>)"
        ),
    ),
    "model": (
        ("--model",),
        dict(help="start model, as --init: a model folder, a run folder (its merged/) or a hub id"),
    ),
    "steps": (("--steps",), dict(type=count(1), help="optimizer steps (default: max_steps)")),
    "notebook": (
        ("--notebook",),
        dict(
            action="store_true",
            help="notebook 06's sizes (smaller batches, a shorter Stage 3): the run its cell makes",
        ),
    ),
    "refresh": (("--refresh",), dict(action="store_true", help="ignore finished runs and caches")),
    "cross_variant": (
        ("--cross-variant",),
        dict(
            action="store_true",
            help="train from an --init recorded as the other parallel variant (seen <-> unseen; "
            "refused without it, and the run card records it)",
        ),
    ),
    "switch": (("--switch",), dict(type=count(1), help="the step where the reward switches")),
    "n": (("--n",), dict(type=problems(1), help="held-out problems per tier (default 200)")),
    "arm": (
        ("--arm",),
        dict(
            choices=(
                "plain",
                "plain-sft",
                "serial",
                "serial-s3",
                "seen",
                "unseen",
                "unseen-s3",
                "unseen-noplan",
                "unseen-s3-honest",
                "unseen-s3-checked",
                "serial-s3-honest",
                "all",
                "switch",
            ),
            help="the arm to run (all: every arm, then the table; switch: the arms that go on "
            "from another's RL under another grader, then the table)",
        ),
    ),
    "sft_seeds": (
        ("--sft-seeds",),
        dict(
            type=SEED,
            nargs="+",
            help="the cold starts' SFT seeds: RL seed i starts from the (i mod n)-th (default 0)",
        ),
    ),
    "k": (("--k",), dict(type=SAMPLES, help="samples per problem and condition (default 4)")),
    **{
        arm: (
            (f"--{arm}",),
            dict(
                type=model_folder,
                help=f"the {arm} model: a run folder or model folder (default: the controls "
                f"study's {arm} arm, seed 0, its last RL stage)",
            ),
        )
        for arm in ("serial", "unseen")
    },
    "widths": (
        ("--widths",),
        dict(
            type=int,
            nargs="+",
            choices=sorted(TIER_WIDTHS.values()),
            help="the widths (deals per search) to measure (default: every one)",
        ),
    ),
    "timed": (
        ("--timed",),
        dict(type=problems(1), help="problems timed per width and batch size (default 64)"),
    ),
    "repeats": (("--repeats",), dict(type=count(1), help="interleaved timing rounds (default 3)")),
}


def add_study_flags(p: argparse.ArgumentParser, flags: tuple[str, ...]) -> None:
    """``--world``, ``--seeds`` and the named ``STUDY_FLAGS``."""
    p.add_argument(
        "--world",
        choices=worlds.names(),
        default=None,
        help="a task world (pr1lib.worlds): its problems, settings and shipped starts",
    )
    p.add_argument("--seeds", type=SEED, nargs="+", default=None, help="repeat for these seeds")
    for flag in flags:
        names, kwargs = STUDY_FLAGS[flag]
        p.add_argument(*names, default=kwargs.pop("default", None), **kwargs)


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
    add_study_flags(
        p, ("variant", "init", "model", "steps", "notebook", "refresh", "cross_variant")
    )
    studies = p.add_argument_group("studies (aliases of `study NAME`)")
    for flag, name in (
        ("--dose-response", "dose"),
        ("--ablation", "ablation"),
        ("--unseen-stage2", "unseen-stage2"),
    ):
        studies.add_argument(flag, action="store_true", help=f"`study {name}`")


def _study(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="study", metavar="STUDY", required=True)
    for name, study in STUDIES.items():
        q = sub.add_parser(name, help=study.help, description=study.help)
        add_common(q, folder=study.folders)
        cross = ("cross_variant",) if "init" in study.flags else ()  # a start may be refused
        add_study_flags(q, (*study.flags, *cross))
        card_flag(q)


def _eval(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="folder or hub id (default: the profile's model)")
    p.add_argument("--data", choices=evalsets.names(), default=None, help="benchmark")
    p.add_argument("--n", type=problems(0), default=None, help="first N problems (0: all)")
    p.add_argument("--k", type=SAMPLES, default=None, help="samples per problem")
    p.add_argument(
        "--mode", choices=ROLLOUT_MODES, default=None, help="seen (causal) or forked (engine)"
    )
    p.add_argument("--json", action="store_true", help="print only the final JSON line")
    add_common(p)


def _blockcost(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="model or run folder (default: the profile's)")
    p.add_argument(
        "--data",
        default=None,
        help="benchmarks, comma-separated (e.g. tinygsm-easy,tinygsm-hard; default: the tiers of "
        "the model's world, from its card, else TinyWorld's)",
    )
    p.add_argument("--n", type=problems(1), default=200, help="held-out problems per tier")
    p.add_argument("--k", type=SAMPLES, default=4, help="samples per problem and condition")
    p.add_argument(
        "--mode",
        choices=("seen", "forked"),
        default=None,
        help="seen for seen-SFT models, forked for unseen ones (default: as the model's card says)",
    )
    add_common(p, folder=False)  # it prints its result (--card keeps it): no folder


def _bench(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "which", choices=("rollout", "grpo", "eval", "limit", "engine", "latency", "all")
    )
    p.add_argument("--out", default=None, help="also write DIR/<benchmark>.json")
    p.add_argument(
        "--repeats",
        type=count(1),
        default=None,
        help="interleaved repeats (default: 5 for rollout, 2 for grpo, 1 for eval, 3 for limit)",
    )
    p.add_argument(
        "--model",
        default=None,
        help="grpo: the policy, a model or run folder (default: the profile's)",
    )
    p.add_argument(
        "--steps", type=count(2), default=None, help="grpo: steps per run, the first a warm-up (3)"
    )
    p.add_argument(
        "--path-len", type=TOKENS, default=None, help="rollout: path length in tokens (48)"
    )
    p.add_argument(
        "--threads",
        type=THREADS,
        default=None,
        help="rollout, limit, latency: threads (1); eval: threads (the tiny profile's, 2)",
    )
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
    p.add_argument("--limit", type=problems(1), default=None, help="first N rows of each split")
    p.add_argument(
        "--reward-mode",
        choices=tuple(REWARD_MODES),
        default=None,
        help="extra_info.reward_mode of train rows (default: the paper's per set)",
    )
    p.add_argument("--prompt-style", default="v3", help="pr1lib.format.prompts style (default: v3)")
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
    p.add_argument("--branch", default=None, help="the branch to point at (default: the setting's)")


EPILOGS = {
    "coldstart": "exit status: 0 done; 2 bad input, or the teacher had to stop (the "
    "finished traces are kept: rerun to resume); 3 every teacher request failed"
}
ARGUMENTS = {
    "study": _study,
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

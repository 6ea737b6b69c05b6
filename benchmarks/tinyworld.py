"""TinyWorld measurements: the base model, cold-start SFT from any base folder, and sampled evals.

    python benchmarks/tinyworld.py eval --model DIR [--data tinyworld-hard] [--n 200] [--k 8]
        [--t 1.0] [--mode seen] [--max-len 256] [--max-path 96]
    python benchmarks/tinyworld.py sft [--base DIR] --out RUN [--variant seen] [--set k=v ...]

``eval`` prints ``pr1lib.evaluation.evaluate.run_eval``'s numbers (mean@k, pass@k, strict-valid
ratio, parallel ratio) for one model folder or run folder, without writing a results file; ``--t 0
--k 1`` is greedy. ``sft`` runs ``pr1lib.training.sft.run_sft`` on the TinyWorld cold-start set
(rule teacher, built from ``source``; default ``tinyworld-easy+tinyworld-hard``) starting from
``--base`` (default: the shipped TinyWorld base ``data/tinyworld-base``) instead of the TinyGSM
``data/tiny-base``, without the TinyGSM before/after evaluation. Each prints one JSON object last.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from pr1lib.config import (
    PARALLEL_VARIANTS,
    ROLLOUT_MODES,
    EvalConfig,
    ModelConfig,
    SFTStageConfig,
)
from pr1lib.config.arguments import Parser, count, model_folder, out_folder, rate
from pr1lib.config.checks import MAX_SAMPLES, MAX_SEED, MAX_TOKENS
from pr1lib.config.runtime import quiet_known_noise
from pr1lib.data import evalsets
from pr1lib.decoding.models import (
    base_model_dir,
    checkpoint_folder,
    load_policy,
    stage_model_config,
)
from pr1lib.decoding.tokens import add_parallel_tags, has_tags
from pr1lib.evaluation.evaluate import run_eval
from pr1lib.training.sft import run_sft
from pr1lib.worlds.tasks import MAX_PROBLEMS


def eval_model(
    model_dir: str,
    data: str,
    n: int,
    k: int,
    temperature: float,
    mode: str,
    max_len: int = 256,
    seed: int = 0,
    max_path: int = 96,
) -> dict:
    """``run_eval`` of one folder (tags added when missing) at ``temperature``."""
    model, tok, _ = load_policy(config=ModelConfig(name=checkpoint_folder(model_dir)))
    if not has_tags(tok):
        add_parallel_tags(tok, model)
    cfg = EvalConfig(
        benchmark=data,
        n=n,
        k=k,
        mode=mode,
        temperature=temperature,
        max_completion_length=max_len,
        max_path_length=max_path,
        prompt_style="tiny",
        seed=seed,
        batch_size=32,
    )
    out = run_eval(model.eval(), tok, config=cfg, tag=model_dir, progress=False)
    keep = (
        "accuracy",
        "pass_at_k",
        "valid_ratio",
        "parallel_ratio",
        "answer_rate",
        "mean_length",
        "n",
        "k",
    )
    return {
        "model": model_dir,
        "data": data,
        "temperature": temperature,
        "mode": mode,
        **{key: out[key] for key in keep},
    }


def sft(base: str, out: str, variant: str, overrides: dict) -> dict:
    """Cold-start SFT of ``base`` on the TinyWorld rule-teacher set (full fine-tuning by
    default)."""
    settings = {
        "source": "tinyworld-easy+tinyworld-hard",
        "use_lora": False,
        "learning_rate": 1e-3,
        "variant": variant,
        **overrides,
    }
    cfg = SFTStageConfig.for_profile("tiny", **settings)
    model_cfg = stage_model_config(cfg, init=base)
    start = time.perf_counter()
    run = run_sft(cfg, out=out, evaluate=False, model_cfg=model_cfg, quiet=True)
    keep = (
        "train_rows",
        "steps",
        "train_loss",
        "train_seconds",
        "use_lora",
        "data_hash",
        "run_dir",
    )
    return {
        **{key: run.result[key] for key in keep},
        "config": settings,
        "seconds": round(time.perf_counter() - start, 1),
    }


def arguments() -> argparse.ArgumentParser:
    """This script's flags, each checked as it is parsed (a bad one: one line, exit 2)."""
    parser = Parser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    ev = sub.add_parser("eval")
    ev.add_argument("--model", type=model_folder, required=True)
    ev.add_argument("--data", choices=evalsets.names(), default="tinyworld-hard")
    ev.add_argument("--n", type=count(1, MAX_PROBLEMS), default=200)
    ev.add_argument("--k", type=count(1, MAX_SAMPLES), default=8)
    ev.add_argument("--t", type=rate, default=1.0, help="temperature (0: greedy)")
    ev.add_argument("--mode", choices=ROLLOUT_MODES, default="seen")
    ev.add_argument("--seed", type=count(0, MAX_SEED), default=0)
    tokens = count(1, MAX_TOKENS)
    ev.add_argument("--max-len", type=tokens, default=256, help="completion token budget")
    ev.add_argument("--max-path", type=tokens, default=96, help="token budget of one path, tags in")
    tr = sub.add_parser("sft")
    tr.add_argument("--base", type=model_folder, default=base_model_dir("tinyworld"))
    tr.add_argument("--out", type=out_folder, required=True)
    tr.add_argument("--variant", choices=PARALLEL_VARIANTS, default="seen")
    tr.add_argument("--set", dest="overrides", action="append", default=[])
    return parser


def main(argv: list[str] | None = None) -> None:
    quiet_known_noise()  # the notes the CLI drops (pr1lib.config.runtime.NOISE_LOGS)
    parser = arguments()
    args = parser.parse_args(argv)
    sets = parser.sets(SFTStageConfig, getattr(args, "overrides", []), variant="seen")
    torch.set_num_threads(1)
    if args.command == "eval":
        result = eval_model(
            args.model,
            args.data,
            args.n,
            args.k,
            args.t,
            args.mode,
            args.max_len,
            args.seed,
            args.max_path,
        )
    else:
        result = sft(args.base, args.out, args.variant, sets)
    print(json.dumps(result, default=str), flush=True)


if __name__ == "__main__":
    main()

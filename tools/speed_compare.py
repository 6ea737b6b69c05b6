"""Old engine against new, side by side in one run: seconds per answer of WideWorld's serial and
forked unseen models at batch 1 and 64, an evaluation's sampling and a GRPO step, each tree in its
own process, rounds interleaved (old then new, then the other way round), medians and spreads.

    .venv/bin/python tools/speed_compare.py --old /tmp/speed-base --rounds 5
    # /tmp/speed-base: git worktree add /tmp/speed-base <old commit>

``--new`` defaults to this checkout. Per round and tree one child process (``--child``) imports
that tree's ``pr1lib`` and measures:

- ``b1_serial``, ``b1_unseen``, ``b64_serial``, ``b64_unseen``: seconds per answer on the first
  ``--n`` held-out WideWorld hard problems (``benchmarks/latency.py``'s models and setting);
- ``eval``: seconds per completion sampling ``--eval-n`` TinyWorld hard problems x 8 at T = 1,
  16 prompts per call, ``data/tinyworld-sft-unseen`` forked (what ``eval`` spends);
  ``eval_wide`` the same on WideWorld (``data/wideworld-r1``: nine paths a block);
- ``<measure>_cpu``: the CPU seconds of each of those (less disturbed by other jobs than wall);
- ``eval_cmd`` (``_cpu``): the whole ``python -m pr1lib eval`` command on ``--eval-n`` WideWorld
  hard problems x 8 (imports, loading, sampling, grading, files);
- ``grpo``: seconds per GRPO step of the unseen variant on the tiny profile (the median of
  ``--grpo-steps`` steps after the first, ``benchmarks/grpo.py``'s ``train``; ``--grpo-steps 0``
  skips it).

The JSON (last line, and ``runs/bench/speed-compare-<time>.json``, rewritten after every round
so that a run cut short keeps its rounds): per measure each tree's
median and ``[min, max]``, ``new_over_old`` (below 1: faster now) and each tree's
``unseen_over_serial`` per batch. Timings on a shared machine are noisy: read the medians and the
ratios, never one round.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
LATENCY = ("b1_serial", "b1_unseen", "b64_serial", "b64_unseen")


def child(n: int, eval_n: int, grpo_steps: int) -> dict[str, float]:
    """One tree's measures (run inside the tree: its ``pr1lib`` is the one imported)."""
    import torch

    from pr1lib import worlds
    from pr1lib.config import RolloutConfig
    from pr1lib.data.evalsets import load_benchmark
    from pr1lib.decoding.rollout import generate
    from pr1lib.evaluation.evaluate import load_for_eval
    from pr1lib.format.prompts import chat_prompt

    torch.set_num_threads(1)
    out = {}

    def seconds(folder, world, mode, n_problems, batch, k=1):
        model, tok = load_for_eval(folder, "tiny", lambda *a, **kw: None)
        records = load_benchmark(world.source("hard"), n_problems, seed=0)
        prompts = [chat_prompt(r["question"], tok, "tiny") for r in records for _ in range(k)]
        cfg = RolloutConfig.for_profile("tiny", mode=mode, **world.budgets)
        gen, start, cpu = torch.Generator().manual_seed(0), time.perf_counter(), time.process_time()
        for i in range(0, len(prompts), batch):
            generate(model, tok, prompts[i : i + batch], cfg, generator=gen)
        cpus.append((time.process_time() - cpu) / len(prompts))
        return (time.perf_counter() - start) / len(prompts)

    cpus: list[float] = []  # each measure's CPU seconds, beside its wall seconds

    wide, tiny = worlds.get("wideworld"), worlds.get("tinyworld")
    arms = {
        "serial": ("data/wideworld-serial-r1", "seen"),
        "unseen": ("data/wideworld-r1", "forked"),
    }
    for batch in (1, 64):
        for arm, (folder, mode) in arms.items():
            out[f"b{batch}_{arm}"] = seconds(folder, wide, mode, n, batch)
    out["eval"] = seconds("data/tinyworld-sft-unseen", tiny, "forked", eval_n, 16 * 8, k=8)
    out["eval_wide"] = seconds("data/wideworld-r1", wide, "forked", eval_n, 16 * 8, k=8)
    out |= {f"{name}_cpu": c for name, c in zip(list(out), cpus)}
    out["eval_cmd"], out["eval_cmd_cpu"] = eval_command(eval_n)
    if grpo_steps:
        out["grpo"] = grpo_step(grpo_steps)
    return out


def eval_command(n: int) -> tuple[float, float]:
    """Wall and CPU seconds of the whole ``python -m pr1lib eval`` command (imports, loading,
    sampling, grading, files): WideWorld's forked model on ``n`` hard problems x 8."""
    import resource

    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pr1lib", "eval", "--profile", "tiny", "--json"]
        cmd += ["--data", "wideworld-hard", "--model", "data/wideworld-r1", "--n", str(n)]
        cmd += ["--k", "8", "--out", tmp]
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=dict(os.environ))
        wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def grpo_step(steps: int) -> float:
    """Median seconds of a GRPO step after the first (unseen, tiny profile), this tree's code."""
    from pr1lib.config import GRPOStageConfig
    from pr1lib.decoding.models import load_training_policy, stage_model_config

    spec = importlib.util.spec_from_file_location("grpo_bench", Path("benchmarks/grpo.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    cfg = GRPOStageConfig.for_stage(
        3, "tiny", variant="unseen", reward="accuracy", max_steps=steps, save_steps=10_000
    )
    policy = load_training_policy(stage_model_config(cfg), cfg.train_tag_rows)
    with tempfile.TemporaryDirectory() as tmp:
        run = bench.train(cfg, policy, Path(tmp) / "run")
    return statistics.median(s["wall"] for s in run["steps"][1:])


def measure(tree: Path, args: argparse.Namespace) -> dict[str, float]:
    """One child process in ``tree``: its measures."""
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child"]
    cmd += ["--n", str(args.n), "--eval-n", str(args.eval_n), "--grpo-steps", str(args.grpo_steps)]
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{tree}: the child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarize(rounds: dict[str, list[dict]]) -> dict:
    """Medians, spreads, new over old, unseen over serial."""
    med = {t: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for t, rs in rounds.items()}
    out = {
        "median": {t: {k: round(v, 5) for k, v in m.items()} for t, m in med.items()},
        "spread": {
            t: {
                k: [round(min(r[k] for r in rs), 5), round(max(r[k] for r in rs), 5)] for k in rs[0]
            }
            for t, rs in rounds.items()
        },
        "new_over_old": {k: round(med["new"][k] / med["old"][k], 3) for k in med["new"]},
        "unseen_over_serial": {
            t: {b: round(m[f"b{b}_unseen"] / m[f"b{b}_serial"], 3) for b in (1, 64)}
            for t, m in med.items()
        },
    }
    return out


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, help="the old tree (a git worktree)")
    parser.add_argument("--new", type=Path, default=HERE, help="the new tree (default: this one)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=64, help="WideWorld problems per latency measure")
    parser.add_argument("--eval-n", type=int, default=16, help="TinyWorld problems (x 8 samples)")
    parser.add_argument("--grpo-steps", type=int, default=3, help="GRPO steps (0: no GRPO step)")
    parser.add_argument("--out", type=Path, default=HERE / "runs" / "bench")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser


def main() -> None:
    args = arguments().parse_args()
    if args.child:
        print(json.dumps(child(args.n, args.eval_n, args.grpo_steps)))
        return
    if args.old is None or not (args.old / "pr1lib").is_dir():
        raise SystemExit("--old must name a checkout of the repository (git worktree add ...)")
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    rounds: dict[str, list[dict]] = {"old": [], "new": []}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"speed-compare-{time.strftime('%Y%m%d-%H%M%S')}.json"
    for r in range(args.rounds):
        for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
            rounds[name].append(measure(trees[name], args))
            print(f"round {r + 1} {name}: {rounds[name][-1]}", file=sys.stderr, flush=True)
        result = {"trees": {k: str(v) for k, v in trees.items()}, "rounds": r + 1}
        result |= {"n": args.n, "eval_n": args.eval_n, "grpo_steps": args.grpo_steps}
        result |= summarize(rounds) | {"all_rounds": rounds}
        path.write_text(json.dumps(result, indent=1) + "\n")  # each round: a cut run keeps them
    print(json.dumps(result))


if __name__ == "__main__":
    main()

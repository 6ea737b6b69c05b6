"""``python -m pr1lib bench rollout|grpo|eval|limit|engine|all``: the speed benchmarks in
``benchmarks/``, JSON last.

``bench rollout`` runs ``benchmarks/rollout.py`` (forked versus single-path decoding, the seen
engine versus ``model.generate``, unseen versus seen training); ``bench grpo`` runs
``benchmarks/grpo.py`` (GRPO steps on the tiny profile, the first path versus today's, seen and
unseen; ``--model`` picks the policy); ``bench eval`` runs ``benchmarks/eval.py`` (TinyWorld
hard problems x 8 samples at T = 1, the evaluation before packed rows versus today's, the same
samples); ``bench limit`` runs ``benchmarks/limit.py`` (the engine's tokens/s at batch 8, 64,
256 beside this machine's matmul limit and what bounds it); ``bench engine`` runs eval and limit
side by side; ``bench latency`` runs ``benchmarks/latency.py`` (seconds per answer of
WideWorld's forked unseen model against its serial one, at batch 1 and 64, with each one's
seconds per phase, ``pr1lib.decoding.clock``); ``bench all`` runs
rollout and grpo and adds ``benchmarks/pretrain_tiny.py`` when it exists. With ``--out DIR``
each result is also written to ``DIR/<name>.json``. The
benchmarks live in the repository, not in the installed package.

>>> sorted(BENCHMARKS)
['eval', 'grpo', 'latency', 'limit', 'pretrain_tiny', 'rollout']
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from pr1lib.config.profiles import TINY_THREADS
from pr1lib.store.paths import REPO_ROOT

BENCH_DIR = REPO_ROOT / "benchmarks"
BENCHMARKS = {
    "rollout": "rollout.py",
    "grpo": "grpo.py",
    "eval": "eval.py",
    "limit": "limit.py",
    "pretrain_tiny": "pretrain_tiny.py",
    "latency": "latency.py",
}
GRPO_REPEATS = 2  # bench grpo without --repeats: a run of steps takes a minute, not a second


def load_bench_script(name: str) -> Any:
    """Import ``benchmarks/<file>`` as a module (the folder is not a package)."""
    path = BENCH_DIR / BENCHMARKS[name]
    if not path.exists():
        raise SystemExit(f"{path} not found: run the benchmarks from a checkout of the repository")
    spec = importlib.util.spec_from_file_location(f"pr1_bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_pretrain_tiny() -> dict[str, Any]:
    """``benchmarks/pretrain_tiny.py`` with its defaults (it prints its own JSON; we return it)."""
    import contextlib
    import io
    import sys

    buf, argv = io.StringIO(), sys.argv
    try:
        sys.argv = ["pretrain_tiny.py"]
        with contextlib.redirect_stdout(buf):
            load_bench_script("pretrain_tiny").main()
    finally:
        sys.argv = argv
    return json.loads(buf.getvalue().strip().splitlines()[-1])


def run_benchmarks(
    which: str = "rollout",
    out: str | None = None,
    repeats: int | None = None,
    path_len: int = 48,
    threads: int | None = None,
    quick: bool = False,
    model: str | None = None,
    steps: int = 3,
) -> dict[str, Any]:
    """``rollout``, ``grpo``, ``eval``, ``limit``, ``engine`` (eval and limit) or ``all``
    (rollout, grpo and ``pretrain_tiny``); each result also goes to ``OUT/<name>.json``.
    ``repeats`` ``None``: 5 for ``rollout`` and ``latency``, ``GRPO_REPEATS`` for ``grpo``, 1 for
    ``eval``, 3 for ``limit``; ``threads`` ``None``: one for ``rollout`` and ``limit`` (a core's
    limit), ``profiles.TINY_THREADS`` for ``eval`` (the eval command's); ``grpo`` takes the
    configs'."""
    results = {}
    if which in ("eval", "engine"):
        results["eval"] = load_bench_script("eval").run(
            repeats=repeats or 1, threads=threads or TINY_THREADS, quick=quick
        )
    if which == "latency":
        results["latency"] = load_bench_script("latency").run(
            repeats=repeats or 5, threads=threads or 1, quick=quick
        )
    if which in ("limit", "engine"):
        results["limit"] = load_bench_script("limit").run(
            repeats or 3, threads=threads or 1, quick=quick
        )
    if which in ("rollout", "all"):
        results["rollout"] = load_bench_script("rollout").run(
            repeats or 5, path_len, threads or 1, quick
        )
    if which in ("grpo", "all"):
        repeats_grpo = repeats or GRPO_REPEATS
        results["grpo"] = load_bench_script("grpo").run(model, steps, repeats_grpo, quick)
    if which == "all" and (BENCH_DIR / BENCHMARKS["pretrain_tiny"]).exists():
        results["pretrain_tiny"] = run_pretrain_tiny()
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        for name, result in results.items():
            (Path(out) / f"{name}.json").write_text(json.dumps(result, indent=2))
    return results if which in ("all", "engine") else results[which]

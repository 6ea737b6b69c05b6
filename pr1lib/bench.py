"""``python -m pr1lib bench rollout|all``: the speed benchmarks in ``benchmarks/``, JSON last.

``bench rollout`` runs ``benchmarks/rollout.py`` (forked versus single-path decoding, the seen
engine versus ``model.generate``, unseen versus seen training); ``bench all`` adds
``benchmarks/pretrain_tiny.py`` when it exists. With ``--out DIR`` each result is also written
to ``DIR/<name>.json``. The benchmarks live in the repository, not in the installed package.

>>> sorted(BENCHMARKS)
['pretrain_tiny', 'rollout']
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from pr1lib.paths import REPO_ROOT

BENCH_DIR = REPO_ROOT / "benchmarks"
BENCHMARKS = {"rollout": "rollout.py", "pretrain_tiny": "pretrain_tiny.py"}


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


def run_benchmarks(which: str = "rollout", out: str | None = None, repeats: int = 5,
                   path_len: int = 48, threads: int = 1, quick: bool = False) -> dict[str, Any]:
    """``rollout`` (or ``all``: also ``pretrain_tiny``); each result also goes to ``OUT/<name>.json``."""
    results = {"rollout": load_bench_script("rollout").run(repeats, path_len, threads, quick)}
    if which == "all" and (BENCH_DIR / BENCHMARKS["pretrain_tiny"]).exists():
        results["pretrain_tiny"] = run_pretrain_tiny()
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        for name, result in results.items():
            (Path(out) / f"{name}.json").write_text(json.dumps(result, indent=2))
    return results["rollout"] if which == "rollout" else results

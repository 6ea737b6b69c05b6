"""Where things live: the repository, the project's own data, the shared data sets, the runs.

>>> (REPO_ROOT / "pr1lib").is_dir(), project_data_dir().name
(True, 'data')
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def project_data_dir() -> Path:
    """The project's own artifacts (tiny tokenizer and model, fixtures): ``<repo>/data``."""
    return REPO_ROOT / "data"


def shared_data_dir() -> Path | None:
    """Real data sets: ``PR1_DATA_DIR`` if set, else ``<repo>/../shared/data`` if it exists."""
    env = os.environ.get("PR1_DATA_DIR")
    if env:
        return Path(env).expanduser()
    candidate = REPO_ROOT.parent / "shared" / "data"
    return candidate if candidate.is_dir() else None


def runs_dir() -> Path:
    """Where runs, caches and tour reports go (git-ignored): ``PR1_RUNS_DIR`` (an empty one
    counts as unset, never as the working folder) or ``<repo>/runs``."""
    env = os.environ.get("PR1_RUNS_DIR", "").strip()
    return Path(env).expanduser() if env else REPO_ROOT / "runs"


def shown(path: str | Path) -> str:
    """``path`` as a notebook prints it: relative to the repository, or under ``$PR1_RUNS_DIR``
    when runs live elsewhere (Colab's Drive); never a machine's absolute path (else its name).

    >>> shown(REPO_ROOT / "runs" / "02_x"), shown("notes.txt"), shown("/somewhere/else/run")
    ('runs/02_x', 'notes.txt', '…/run')
    """
    path = Path(path)
    if not path.is_absolute():
        return str(path)
    for root, prefix in ((REPO_ROOT, ""), (runs_dir(), "$PR1_RUNS_DIR/")):
        if path.resolve().is_relative_to(root.resolve()):
            return prefix + str(path.resolve().relative_to(root.resolve()))
    return f"…/{path.name}"

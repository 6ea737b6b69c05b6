"""Where the repository is published: one URL behind every badge and every notebook's install cell.

The setting is ``[project.urls] Repository`` in ``pyproject.toml``. The README's Colab and Binder
badges and the install cell of each notebook (``install_cell``: the third cell, which clones the
repository and installs ``pr1lib`` where it is missing, e.g. on Colab) are derived from it; a
fork runs ``make repo-url URL=https://github.com/OWNER/NAME`` (``set_repo_url``) once to rewrite
all of them, and tests/test_publish.py checks that they agree.

>>> owner_name("https://github.com/someone/pr1")
'someone/pr1'
"""

from __future__ import annotations

import re
from pathlib import Path

from pr1lib.paths import REPO_ROOT

URL_LINE = re.compile(r'^Repository = "(?P<url>[^"]+)"$', re.MULTILINE)
# The forms a repository's owner/name takes in the files: install cells, pyproject and README
# text, Colab badges, Binder badges.
PREFIXES = ("https://github.com/", "colab.research.google.com/github/", "mybinder.org/v2/gh/")

INSTALL_CELL = '''\
REPO_URL = "{url}"  # a fork: `make repo-url URL=...`
import importlib.util
import os
import subprocess
import sys


class SetupStopped(Exception):  # shown as its one line, not as a traceback
    def _render_traceback_(self):
        return [f"Setup stopped: {{self}}"]


def quiet(*command):  # True when the command succeeded; git never waits for a password
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
    return subprocess.run(command, capture_output=True, env=env).returncode == 0


if importlib.util.find_spec("pr1lib") is None:  # Colab, or not installed
    print(f"installing pr1lib from {{REPO_URL}} (a few minutes) ...")
    if not (os.path.isdir("pr1") or quiet("git", "clone", "-q", "--depth",
                                          "1", REPO_URL, "pr1")):
        raise SetupStopped(f"could not clone {{REPO_URL}}: no network, or "
                           "no such repository (a fork: set REPO_URL)")
    if not quiet(sys.executable, "-m", "pip", "install", "-q", "-e",
                 "pr1[colab]"):
        raise SetupStopped("pip could not install ./pr1 (to see why: "
                           "pip install -e 'pr1[colab]')")
    sys.path.insert(0, os.path.abspath("pr1"))'''


def repo_url(root: Path = REPO_ROOT) -> str:
    """The repository URL set in ``pyproject.toml``."""
    found = URL_LINE.search((Path(root) / "pyproject.toml").read_text(encoding="utf-8"))
    if found is None:
        raise ValueError("pyproject.toml has no [project.urls] Repository = \"...\" line")
    return found["url"]


def owner_name(url: str) -> str:
    """``OWNER/NAME`` of a GitHub URL (a ``ValueError`` for anything else)."""
    found = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?/?", url.strip())
    if found is None:
        raise ValueError(f"not a GitHub repository URL: {url!r} (https://github.com/OWNER/NAME)")
    return found[1]


def install_cell(url: str) -> str:
    """The install cell every notebook carries, for ``url``."""
    return INSTALL_CELL.format(url=url)


def colab_badge(url: str, stem: str) -> str:
    """The README's "Open in Colab" link for notebook ``stem``."""
    return (
        f"https://colab.research.google.com/github/{owner_name(url)}/blob/main/notebooks/"
        f"{stem}.ipynb"
    )


def binder_badge(url: str, stem: str | None = None) -> str:
    """The README's Binder link (JupyterLab on ``notebooks/``, or on one notebook)."""
    path = f"notebooks/{stem}.ipynb" if stem else "notebooks"
    return f"https://mybinder.org/v2/gh/{owner_name(url)}/main?urlpath=lab/tree/{path}"


def published_files(root: Path = REPO_ROOT) -> list[Path]:
    """The files that carry the URL: pyproject, README, every notebook source and twin."""
    root = Path(root)
    return [
        root / "pyproject.toml",
        root / "README.md",
        *sorted((root / "notebooks").glob("[0-9][0-9]_*.py")),
        *sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")),
    ]


def set_repo_url(url: str, root: Path = REPO_ROOT) -> list[Path]:
    """Point every badge, install cell and ``pyproject.toml`` at ``url``; the files changed."""
    old, new = owner_name(repo_url(root)), owner_name(url)
    changed = []
    for path in published_files(root):
        text = path.read_text(encoding="utf-8")
        fresh = text
        for prefix in PREFIXES:
            fresh = fresh.replace(f"{prefix}{old}", f"{prefix}{new}")
        if fresh != text:
            path.write_text(fresh, encoding="utf-8")
            changed.append(path)
    return changed

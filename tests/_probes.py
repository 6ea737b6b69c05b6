"""What a command-line probe sees, shared by the probe tables (``test_cli_probes.py``,
``test_probes_loss.py``, ``test_probes_inputs.py``).

A probe runs one command in-process through ``pr1lib.cli.main.main`` on the smoke profile and checks
the exit code, the one line printed (stdout and stderr together, no traceback), and what is left
on disk: by default every file under the test's folder byte for byte as before; ``left`` checks
something else (a probe whose command runs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pr1lib.cli.main import main
from pr1lib.store.paths import REPO_ROOT

TINY_BASE = REPO_ROOT / "data" / "tiny-base"
# a child process runs these argument lists through the CLI: each refused (exit 2) before torch
# loads (sys.argv[1]: the lists as JSON)
BEFORE_TORCH = """
import json, sys
from pr1lib.cli.main import main
for argv in json.loads(sys.argv[1]):
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse refuses the value itself
        code = stop.code
    assert code == 2, (argv, code)
    assert "torch" not in sys.modules, argv
print("ok")
"""


def refused_before_torch(probes: list[list[str]], folder: Path) -> None:
    """Run every argument list through the CLI in one fresh Python (cwd and runs under
    ``folder``, smoke profile, offline): each must exit 2 before torch is imported."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PR1_PROFILE": "smoke"}
    env.update(PR1_RUNS_DIR=str(folder / "runs"), HF_HUB_OFFLINE="1", OPENAI_BASE_URL="")
    done = subprocess.run(
        [sys.executable, "-c", BEFORE_TORCH, json.dumps(probes)],
        env=env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (``None``) under ``root``."""
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
        for p in sorted(root.rglob("*"))
    }


def run_cli(capsys, *argv: str) -> tuple[int, list[str]]:
    """The exit code and the non-empty lines printed (stdout, then stderr) of one command."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exit_:  # argparse refuses the arguments themselves
        code = exit_.code
    out = capsys.readouterr()
    return code, [line for line in (out.out + out.err).splitlines() if line.strip()]


def quiet(monkeypatch, tmp_path: Path) -> None:
    """Smoke sizes, runs and data inside the test's folder, never the hub, cards in a scratch
    results folder."""
    from pr1lib.store import cards as results

    monkeypatch.setenv("PR1_PROFILE", "smoke")
    monkeypatch.setenv("PR1_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("PR1_DATA_DIR", str(tmp_path / "no-data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("PR1_TRACEBACK", raising=False)
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")


@dataclass
class Probe:
    id: str
    argv: tuple[str, ...]
    needle: str  # in the one line printed
    code: int = 2
    setup: Callable[[Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    left: Callable[[Path, dict], None] | None = None  # (tmp, snapshot before): what is on disk


def check(probe: Probe, tmp_path: Path, capsys, monkeypatch) -> list[str]:
    """Run ``probe`` and assert its exit code, its one line and what it left on disk."""
    if probe.setup:
        probe.setup(tmp_path)
        capsys.readouterr()
    for key, value in probe.env.items():
        monkeypatch.setenv(key, value)
    before = snapshot(tmp_path)
    code, lines = run_cli(capsys, *(a.replace("{tmp}", str(tmp_path)) for a in probe.argv))
    assert code == probe.code, lines
    if probe.code == 2:
        assert len(lines) == 1 and "Traceback" not in lines[0], lines
        assert "error:" in lines[0]
        assert probe.needle.replace("{tmp}", str(tmp_path)) in lines[0], lines
    else:
        assert not any("Traceback" in line for line in lines), lines
        assert any(probe.needle.replace("{tmp}", str(tmp_path)) in line for line in lines), lines
    if probe.left is None:
        assert snapshot(tmp_path) == before
    else:
        probe.left(tmp_path, before)
    return lines


# ----------------------------------------------------------------------------- folders to probe
def model_copy(folder: Path, tweak: str = "") -> Path:
    """A copy of the tiny base model at ``folder``; ``tweak`` makes its config (and so its
    content hash) differ from the original's."""
    shutil.copytree(TINY_BASE, folder)
    if tweak:
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "pr1_note": tweak}, indent=2))
    return folder


def run_folder(folder: Path, tweak: str = "") -> Path:
    """A finished run folder (``merged/`` holding a model, a run card)."""
    model_copy(folder / "merged", tweak)
    (folder / "run_card.json").write_text(json.dumps({"note": "finished"}))
    return folder


def user_files(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "notes.txt").write_text("my notes\n")
    return folder


def same(*names: str) -> Callable[[Path, dict], None]:
    """``left``: these paths under the test's folder hold exactly what they held before."""

    def check_same(tmp: Path, before: dict) -> None:
        now = snapshot(tmp)
        for name in names:
            kept = {k: v for k, v in before.items() if k == name or k.startswith(name + "/")}
            assert kept and {k: now.get(k) for k in kept} == kept, name

    return check_same

"""One run per folder (``pr1lib.store.folders.claim``): the lock between processes, a stale lock
taken over, and the claim's rules for a folder holding another run (refuse, ``--resume``,
``--overwrite``), all without leaving a mark where nothing was written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pr1lib.config import ColdStartConfig
from pr1lib.store.folders import LOCK, OWNER, FolderError, claim
from pr1lib.store.paths import REPO_ROOT

HOLD = """
import sys, time
from pr1lib.store.folders import FolderError, claim
try:
    with claim(sys.argv[1], "bench"):
        print("held", flush=True)
        time.sleep(float(sys.argv[2]))
except FolderError as err:
    print("busy", err, flush=True)
"""


def _hold(folder: Path, seconds: float = 60.0) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder), str(seconds)],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


# ----------------------------------------------------------------------------- the lock
def test_two_processes_racing_for_one_folder_one_wins(tmp_path):
    procs = [_hold(tmp_path / "run", 3.0) for _ in range(2)]
    outs = sorted(p.communicate(timeout=60)[0].strip() for p in procs)
    assert outs[1] == "held" and outs[0].startswith("busy ")
    assert "is in use by another run" in outs[0]
    assert not (tmp_path / "run").exists()  # the winner wrote nothing: the folder went again


def test_a_held_folder_is_refused_then_a_stale_lock_is_taken_over(tmp_path, capsys):
    folder = tmp_path / "run"
    proc = _hold(folder)
    assert proc.stdout.readline().strip() == "held"
    with pytest.raises(FolderError, match=rf"is in use by another run \(pid {proc.pid}\)"):
        with claim(folder, "bench"):
            pass
    proc.kill()  # SIGKILL: no cleanup, the lock file stays behind with the dead pid in it
    proc.communicate()
    assert (folder / LOCK).read_text().strip() == str(proc.pid)
    with claim(folder, "bench"):
        assert (folder / LOCK).read_text().strip() == str(os.getpid())
    err = capsys.readouterr().err
    assert f"was left by pid {proc.pid}, which no longer runs: taking it over" in err
    assert not (folder / LOCK).exists()


# ----------------------------------------------------------------------------- the claim
@pytest.fixture
def held_run(tmp_path) -> Path:
    """A folder holding a cold-start run (gsm8k, 100 problems) with one file of results."""
    folder = tmp_path / "run"
    with claim(folder, "coldstart", ColdStartConfig(limit=100)):
        (folder / "traces.jsonl").write_text('{"id": "a", "teacher": "rule"}\n')
    return folder


def test_the_same_run_again_resumes_and_a_resumable_field_may_change(held_run):
    before = _files(held_run)
    with claim(held_run, "coldstart", ColdStartConfig(limit=100)):
        pass
    with claim(held_run, "coldstart", ColdStartConfig(limit=500), resumable=("limit",)):
        pass
    assert _files(held_run)["traces.jsonl"] == before["traces.jsonl"]
    assert json.loads((held_run / OWNER).read_text())["config"]["limit"] == 500


@pytest.mark.parametrize(
    "command, config, message",
    [
        (
            "coldstart",
            ColdStartConfig(limit=100, source="dapo"),
            "holds another coldstart run (source='gsm8k', not 'dapo')",
        ),
        ("sft", None, "holds a coldstart run, not a sft one"),
    ],
)
def test_another_run_is_refused_and_left_as_it_was(held_run, command, config, message):
    before = _files(held_run)
    with pytest.raises(FolderError, match=message.replace("(", r"\(").replace(")", r"\)")):
        with claim(held_run, command, config):
            pass
    assert _files(held_run) == before


def test_resume_continues_another_config_in_place(held_run):
    with claim(held_run, "coldstart", ColdStartConfig(source="dapo"), resume=True):
        pass
    assert (held_run / "traces.jsonl").exists()
    assert json.loads((held_run / OWNER).read_text())["config"]["source"] == "dapo"


def test_overwrite_moves_the_old_run_aside(held_run, capsys):
    before = _files(held_run)
    with claim(held_run, "sft", None, overwrite=True):
        assert sorted(p.name for p in held_run.iterdir()) == [OWNER, LOCK]
        (held_run / "config.json").write_text("{}")
    prev = held_run.with_name("run.prev")
    assert {k: v for k, v in _files(prev).items() if k != OWNER} == {
        k: v for k, v in before.items() if k != OWNER
    } and not (prev / LOCK).exists()
    assert json.loads((held_run / OWNER).read_text())["command"] == "sft"
    assert "note: moved" in capsys.readouterr().out


def test_a_failed_run_that_wrote_nothing_leaves_no_trace(tmp_path):
    (tmp_path / "existing").mkdir()
    (tmp_path / "existing" / "notes.txt").write_text("mine")
    for folder, config in ((tmp_path / "new", ColdStartConfig()), (tmp_path / "existing", None)):
        before = _files(tmp_path)
        with pytest.raises(RuntimeError), claim(folder, "eval", config, resume=True):
            raise RuntimeError("the model could not load")
        assert _files(tmp_path) == before
    assert not (tmp_path / "new").exists()

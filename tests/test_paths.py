"""pr1lib.store.paths: what a notebook prints is a path a reader can use, never this machine's."""

from __future__ import annotations

from pr1lib.store.paths import REPO_ROOT, runs_dir, shown


def test_shown_paths_are_relative_to_the_repository_or_the_runs_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("PR1_RUNS_DIR", raising=False)
    assert (
        shown(runs_dir() / "02_cold_start_data-tiny" / "sft") == "runs/02_cold_start_data-tiny/sft"
    )
    assert shown(REPO_ROOT / "data" / "tinyworld-sft") == "data/tinyworld-sft"
    monkeypatch.setenv("PR1_RUNS_DIR", str(tmp_path / "drive"))  # Colab: runs on Google Drive
    assert shown(runs_dir() / "02_x" / "sft") == "$PR1_RUNS_DIR/02_x/sft"
    outside = shown(tmp_path / "elsewhere" / "run")
    assert outside == "…/run" and str(tmp_path) not in outside

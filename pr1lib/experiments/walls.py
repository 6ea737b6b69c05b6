"""A study's wall time: what its arms took, summed over the invocations that ran them, beside
the seconds their SFT and RL run cards record (``study controls`` keeps both on its card)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pr1lib.training.runs import CARD


def add_wall(folder: Path, seconds: float) -> None:
    """Add ``seconds`` to the wall time kept in ``folder/wall.json`` (an interrupted arm's time
    counts once it finishes, in the run that finishes it)."""
    path = folder / "wall.json"
    before = json.loads(path.read_text())["seconds"] if path.is_file() else 0.0
    path.write_text(json.dumps({"seconds": round(before + seconds, 1)}))


def walls(root: Path, arms: list[str]) -> dict[str, Any]:
    """Each arm's wall seconds (``wall.json``) and their ``total``; ``runs``: the seconds its SFT
    and RL run cards record, per arm and ``total`` (what the study takes run after run, whatever
    invocations and lanes ran it)."""
    walls: dict[str, Any] = {}
    for arm in arms:
        path = Path(root) / arm / "wall.json"
        walls[arm] = json.loads(path.read_text())["seconds"] if path.is_file() else None
    walls["total"] = round(sum(v for v in walls.values() if v), 1)
    runs = {arm: run_seconds(Path(root) / arm) for arm in arms}
    walls["runs"] = {**runs, "total": round(sum(runs.values()), 1)}
    return walls


def run_seconds(folder: Path) -> float:
    """The ``seconds`` of every run card under ``folder`` (its SFTs and RL stages)."""
    cards = sorted(folder.glob(f"*/{CARD}")) + sorted(folder.glob(f"seed*/*/{CARD}"))
    return round(sum(json.loads(c.read_text()).get("seconds", 0.0) for c in cards), 1)

"""experiments: one file per study, each a ``python -m pr1lib study NAME`` command with one card.

A study takes a world (``pr1lib.worlds``) and seeds, runs the stages it compares and returns the
numbers its result card keeps (``--card NAME``). ``STUDIES`` says which flags each one takes, so
the command line can refuse a flag a study would ignore before anything runs (this table imports
no study: ``--help`` stays fast). Adding a study is one file here and one line in ``STUDIES``
(docs/architecture.md).

May import: ``training``, ``evaluation``, ``data``, ``rewards``, ``decoding``, ``config``,
``worlds``, ``format``, ``store``.

>>> sorted(STUDIES)
['ablation', 'blockcost', 'controls', 'curriculum', 'dose', 'midtraining', 'plans', 'split',
 'unseen-stage2', 'widths']
>>> STUDIES["dose"].module, "refresh" in STUDIES["dose"].flags
('pr1lib.experiments.dose', False)
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager

__all__ = [
    "STUDIES",
    "Study",
    "StudyRun",
    "ablation",
    "blockcost",
    "controls",
    "curriculum",
    "dose",
    "midtraining",
    "planblocks",
    "split",
    "unseen_stage2",
    "widths",
]


@dataclass(frozen=True)
class Study:
    """One study: its module (which defines ``main(run: StudyRun) -> dict``), a line of help and
    the flags it takes besides ``--profile --world --seeds --set --out --card``."""

    name: str  # the module's file name
    help: str
    flags: tuple[str, ...] = ()
    sets: dict[str, str] | None = (
        None  # --set keys it takes and their types (None: GRPOStageConfig's)
    )
    fixes: tuple[str, ...] = ()  # config fields the study sets itself (per arm or phase): no --set
    folders: bool = True  # it writes run folders (--out, --overwrite, --resume)
    variants: tuple[str, ...] | None = None  # the --variant values it takes (None: every one)

    @property
    def module(self) -> str:
        return f"{__name__}.{self.name}"

    def load(self) -> Any:
        return importlib.import_module(self.module)


STUDIES = {
    "curriculum": Study(
        "curriculum",
        "every RL stage of a variant from its SFT (seen: 2 -> 3, unseen: 3), per seed",
        ("variant", "init", "steps", "notebook"),
        fixes=("variant",),
    ),
    "ablation": Study(
        "ablation",
        "the reward ablation (the paper's Table 4): one Stage 3 per reward arm, same start",
        ("variant", "init", "steps", "notebook", "refresh"),
        fixes=("variant", "reward"),
    ),
    "dose": Study(
        "dose",
        "dose-response: Stage-2 runs of the alternating reward at 0/2/5/10 tiered steps per 10 "
        "and at b = 0/0.2/0.5/1 (easy problems)",
        ("init", "steps"),
        fixes=("reward", "window", "parallel_steps", "tiered_bonus"),
    ),
    "unseen-stage2": Study(
        "unseen_stage2",
        "the unseen variant from its SFT two ways: Stage 3 directly (the paper) and 2 then 3",
        ("init", "steps", "notebook", "refresh"),
        fixes=("variant",),
    ),
    "midtraining": Study(
        "midtraining",
        "the mid-training scaffold (Figure 4): alternating reward, then accuracy only, against "
        "accuracy only from the same SFT for the same steps, per seed",
        ("variant", "init", "steps", "switch", "refresh"),
        fixes=("variant", "reward", "max_steps", "save_steps"),
    ),
    "controls": Study(
        "controls",
        "is it parallel thinking or more search? one arm (--arm) of plain / plain-sft / serial / "
        "seen / unseen (Stage 2 then 3) / unseen-s3 and serial-s3 (Stage 3 only) per seed, or all; "
        "accuracy, sequential decode steps, answer modes and split rates",
        ("arm", "init", "sft_seeds"),
        fixes=("variant",),
    ),
    "split": Study(
        "split",
        "do parallel paths split a search? forced blocks whose paths take their assigned shares",
        ("model", "variant", "n"),
        folders=False,
        sets={},
        variants=("seen", "unseen"),  # it forces a block: the plain variant writes none
    ),
    "plans": Study(
        "planblocks",
        "can the model carry out a plan wider than it learned? PlanWorld plans of 2 to 10 deals "
        "forced into the prompt: accuracy against the plan's reach, validity and split per width",
        ("model", "widths", "n"),
        folders=False,
        sets={},
    ),
    "blockcost": Study(
        "blockcost",
        "forced block vs forced plain accuracy per tier, with a paired-bootstrap interval",
        ("model", "variant", "n", "k"),
        folders=False,
        variants=("seen", "unseen"),  # it forces a block: the plain variant writes none
        sets={
            "temperature": "float",
            "max_completion_length": "int",
            "max_path_length": "int",
            "max_blocks": "int",
            "batch_size": "int",
            "path_headers": "bool",
            "num_paths": "int",
            "header_style": "str",
        },
    ),
    "widths": Study(
        "widths",
        "when does parallel pay? the trained serial and unseen models on PlanWorld searches of 2 "
        "to 10 deals: accuracy, sequential steps, seconds per answer at batch 1 and 64, crossovers",
        ("serial", "unseen", "widths", "n", "k", "timed", "repeats"),
        folders=False,
        sets={"max_completion_length": "int", "max_path_length": "int"},
    ),
}


@dataclass
class StudyRun:
    """What a study's ``main`` gets: the parsed command, checked. ``overrides`` are typed
    ``--set`` values; ``claim(folder)`` holds a run folder for the study
    (``pr1lib.store.folders.claim`` with the command's ``--overwrite`` / ``--resume``)."""

    profile: str
    world: str | None
    seeds: list[int]
    out: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # the study's own flags that were given
    claim: Callable[[Path], ContextManager] | None = None
    overwrite: bool = False  # --overwrite: a folder holding another run moves aside (kept)

    def option(self, name: str, default: Any = None) -> Any:
        value = self.options.get(name)
        return default if value is None else value

    def grpo_overrides(self) -> dict[str, Any]:
        """``--set`` values plus ``--steps``, ``--notebook`` and ``--world``, as
        ``GRPOStageConfig.for_stage`` takes them."""
        out = dict(self.overrides)
        if self.option("steps") is not None:
            out["max_steps"] = self.option("steps")
        if self.option("notebook"):
            out["notebook"] = True
        if self.world is not None:
            out["world"] = self.world
        return out

    def init(self, variant: str) -> str | None:
        """``--init`` / ``--model``, else the world's shipped start for ``variant`` (``None``: the
        stages' own default, ``pr1lib.training.starts``)."""
        given = self.option("init") or self.option("model")
        if given or self.world is None:
            return given
        from pr1lib import worlds

        return worlds.get(self.world).init(variant)

    def seed_out(self, seed: int, default: Path) -> Path:
        """One seed's folder: ``--out`` (``seedN`` below it when there are several), else
        ``default``."""
        if self.out is None:
            return default
        return self.out / f"seed{seed}" if len(self.seeds) > 1 else self.out


def add_wall(folder: Path, seconds: float) -> None:
    """Add ``seconds`` to the wall time kept in ``folder/wall.json`` (a study's card keeps what
    its arms took; an interrupted arm's time counts once it finishes, in the run that finishes
    it)."""
    path = folder / "wall.json"
    before = json.loads(path.read_text())["seconds"] if path.is_file() else 0.0
    path.write_text(json.dumps({"seconds": round(before + seconds, 1)}))


def wall_times(root: Path, arms: list[str]) -> dict[str, Any]:
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
    from pr1lib.training.runs import CARD

    cards = sorted(folder.glob(f"*/{CARD}")) + sorted(folder.glob(f"seed*/*/{CARD}"))
    return round(sum(json.loads(c.read_text()).get("seconds", 0.0) for c in cards), 1)

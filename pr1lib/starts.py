"""Where a stage starts (the variant's SFT run, the newest Stage 2 of a seed, or the base model)
and the folder a stage run gets by default (``run_name``).

The command line, the notebooks and the studies (``pr1lib.experiments``) all ask here, so a stage
run by hand and the same stage inside a study start from the same checkpoint.
"""

from __future__ import annotations

from pathlib import Path

from pr1lib import worlds
from pr1lib.config import CURRICULA, GRPOStageConfig
from pr1lib.paths import REPO_ROOT, runs_dir


def run_name(cfg: GRPOStageConfig) -> str:
    """``grpo-<profile>-<variant>-s<stage>-<reward>-seed<seed>``.

    >>> run_name(GRPOStageConfig(stage=2, reward="tiered"))
    'grpo-tiny-seen-s2-tiered-seed0'
    """
    return f"grpo-{cfg.profile}-{cfg.variant}-s{cfg.stage}-{cfg.reward}-seed{cfg.seed}"


def sft_run(variant: str, profile: str) -> Path | None:
    """The variant's SFT run folder: ``runs/sft-<profile>-<variant>`` (the command line), else
    ``runs/04_sft_lora-<profile>/<variant>`` (notebook 04); ``None`` when neither has
    ``merged/``."""
    root = runs_dir()
    for folder in (root / f"sft-{profile}-{variant}", root / f"04_sft_lora-{profile}" / variant):
        if (folder / "merged").is_dir():
            return folder
    return None


def default_init(stage: int, variant: str, profile: str, seed: int = 0) -> Path | None:
    """Where a stage starts by default: Stage 3 of a variant with a Stage 2 from the newest Stage 2
    run of this seed; else the variant's SFT run (``sft_run``); else ``None``, the base model
    (always so for the plain baseline, which has no SFT)."""
    if stage == 3 and 2 in CURRICULA[variant]:
        pattern = f"grpo-{profile}-{variant}-s2-*-seed{seed}/merged"
        found = sorted(runs_dir().glob(pattern), key=lambda p: p.stat().st_mtime)
        if found:
            return found[-1].parent
    return None if variant == "plain" else sft_run(variant, profile)


def notebook_start(
    profile: str,
    seed: int = 0,
    world: str | None = None,
    init: str | Path | None = None,
    variant: str = "seen",
) -> str | Path | None:
    """Where a notebook's Stage 2 starts (notebook 06, and notebook 05's doctor): ``init`` when
    given; in a world (``NotebookConfig.world``: TinyWorld on ``tiny`` and ``smoke``) its shipped
    SFT of ``variant``; else the variant's SFT run (``default_init``); ``None``: none, the base.

    >>> notebook_start("smoke", world="tinyworld") == REPO_ROOT / "data" / "tinyworld-sft"
    True
    """
    if init:
        return init
    shipped = worlds.get(world).init(variant) if world else None
    return REPO_ROOT / shipped if shipped else default_init(2, variant, profile, seed)

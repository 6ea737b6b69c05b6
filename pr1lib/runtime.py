"""The process a stage runs in: seeds, ranks, threads, library versions, a notebook's first cell.

>>> is_main_process()
True
"""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import random
from dataclasses import dataclass, field

import numpy as np
import torch

from pr1lib.profiles import check_profile

VERSIONED = ("pr1lib", "torch", "transformers", "trl", "peft", "bitsandbytes", "datasets")


def is_main_process() -> bool:
    """False on every rank but 0 of a multi-process (accelerate / torchrun) launch."""
    return int(os.environ.get("RANK", "0")) == 0


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def set_threads(num_threads: int | None) -> None:
    """torch's CPU threads (``None``: leave torch's default). The tiny model's matmuls are too
    small to gain from more than one thread; on a GPU the setting does not matter."""
    if num_threads:
        torch.set_num_threads(num_threads)


@dataclass(frozen=True)
class RunInfo:
    """Small record printed at the top of every notebook and saved with every run."""

    profile: str
    seed: int
    versions: dict[str, str] = field(default_factory=dict)


def environment_report(profile: str | None = None, seed: int = 0) -> RunInfo:
    """Versions of the libraries that matter, the device, the profile and the seed."""
    versions = {"python": platform.python_version()}
    for pkg in VERSIONED:
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = "not installed"
    versions["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return RunInfo(profile=check_profile(profile), seed=seed, versions=versions)


def start_notebook(profile: str | None = None, seed: int = 0) -> str:
    """First cell of every notebook: check the profile, seed everything, print the environment.

    >>> start_notebook("smoke", 0)  # doctest: +ELLIPSIS
    RunInfo(profile='smoke', seed=0, versions={...})
    'smoke'
    """
    profile = check_profile(profile)
    set_seed(seed)
    print(environment_report(profile, seed))
    return profile

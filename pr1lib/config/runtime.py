"""The process a stage runs in: seeds, ranks, threads, library versions, a notebook's first cell.

>>> is_main_process()
True
"""

from __future__ import annotations

import logging
import os
import random
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from pr1lib.config.profiles import TINY_THREADS, check_profile
from pr1lib.store.versions import library_versions

# Known noise, silenced in one place (quiet_known_noise); every other warning stays visible.
NOISE_WARNINGS = (  # (category, message regex)
    # TRL 1.16 and PEFT still call transformers' old names (is_)gradient_checkpointing(_enable...)
    (FutureWarning, r"`(is_)?gradient_checkpointing(_enable|_disable)?` is deprecated"),
)
NOISE_LOGS = {  # logger -> message prefix dropped from it
    # bitsandbytes offers an optional hub kernel for CPU 4-bit and says so at import, offline too
    # (no setting turns the lookup off: it runs whenever the CPU has AVX512-BF16)
    "bitsandbytes.backends.cpu.ops": "Failed to load CPU gemm_4bit_forward from kernels-community",
    # ... and `kernels` (transformers >= 5.25 brings it) notes, offline, that it cannot check who
    # published that kernel before it fails to find it
    "kernels._internals.hf_hub": "Skipping publisher trust check for 'kernels-community/",
    # transformers' default resize (mean_resizing) says how it fills new embedding rows; notebook
    # 01 runs that default on purpose to measure those rows (the library passes
    # mean_resizing=False), and the prose beside it explains them
    "transformers.modeling_utils": "The new embeddings will be initialized from a multivariate",
    # resuming a run of a model with tied embeddings: the checkpoint keeps the embedding only, and
    # the output layer is that same tensor, so nothing is missing (any other missing key is kept)
    "transformers.trainer": "There were missing keys in the checkpoint model loaded: "
    "['lm_head.weight']",
}
COLAB_DRIVE = Path("/content/drive/MyDrive")  # where Colab mounts Google Drive


def is_main_process() -> bool:
    """False on every rank but 0 of a multi-process (accelerate / torchrun) launch."""
    return int(os.environ.get("RANK", "0")) == 0


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA)."""
    import numpy as np
    import torch  # here, not at the top: the command line checks its inputs before torch loads

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity, else ``os.cpu_count()``)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def set_threads(num_threads: int | None) -> None:
    """torch's CPU threads: ``num_threads``, at most ``usable_cores()``. ``None`` leaves torch's
    default, and so does ``OMP_NUM_THREADS`` in the environment, which wins (on a machine where
    other jobs hold the cores, ``OMP_NUM_THREADS=1`` keeps two threads from waiting on each
    other). On a GPU the setting does not matter."""
    if num_threads and "OMP_NUM_THREADS" not in os.environ:
        import torch

        torch.set_num_threads(min(num_threads, usable_cores()))


def profile_threads(profile: str) -> int | None:
    """The torch threads for ``profile``'s models: ``TINY_THREADS`` for tiny's ~1M-parameter
    ones, one for smoke's, else torch's default.

    >>> profile_threads("tiny"), profile_threads("smoke"), profile_threads("colab")
    (2, 1, None)
    """
    return {"smoke": 1, "tiny": TINY_THREADS}.get(profile)


@dataclass(frozen=True)
class RunInfo:
    """Small record printed at the top of every notebook and saved with every run."""

    profile: str
    seed: int
    versions: dict[str, str] = field(default_factory=dict)


def environment_report(profile: str, seed: int = 0) -> RunInfo:
    """Versions of the libraries that matter and the lock's hash (``versions.library_versions``),
    the device, the profile and the seed."""
    import torch

    versions = library_versions()
    versions["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return RunInfo(profile=profile, seed=seed, versions=versions)


class _DropPrefix(logging.Filter):
    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefix)


def quiet_known_noise() -> None:
    """Silence ``NOISE_WARNINGS``, ``NOISE_LOGS`` and TRL's "experimental" note on
    ``rollout_func`` (this project's engine uses it on purpose); safe to call twice."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    for category, message in NOISE_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
    for name, prefix in NOISE_LOGS.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropPrefix) and f.prefix == prefix for f in logger.filters):
            logger.addFilter(_DropPrefix(prefix))


def colab_setup() -> str | None:
    """On Colab (``None`` elsewhere): turn on its widget manager for ipywidgets 8 (the panel, the
    live figures) and, when Google Drive is mounted, keep runs on it (``PR1_RUNS_DIR``) so that a
    recycled VM resumes from its checkpoints; returns one line saying where runs go."""
    if "google.colab" not in sys.modules:
        return None
    from google.colab import output

    output.enable_custom_widget_manager()
    if "PR1_RUNS_DIR" not in os.environ and COLAB_DRIVE.is_dir():
        os.environ["PR1_RUNS_DIR"] = str(COLAB_DRIVE / "pr1-runs")
    if "PR1_RUNS_DIR" in os.environ:
        return f"runs go to {os.environ['PR1_RUNS_DIR']} (kept when the VM is recycled)"
    return (
        "runs go to the VM's disk and are lost when it is recycled: mount Google Drive "
        "(Files > Mount Drive) and rerun this cell to keep them in MyDrive/pr1-runs"
    )


def start_notebook(profile: str | None = None, seed: int = 0) -> str:
    """First cell of every notebook: check the profile, silence known noise, set Colab up
    (``colab_setup``), seed everything, set the profile's torch threads (``profile_threads``),
    print the environment.

    >>> start_notebook("smoke", 0)  # doctest: +ELLIPSIS
    RunInfo(profile='smoke', seed=0, versions={...})
    'smoke'
    """
    profile = check_profile(profile)
    quiet_known_noise()
    colab = colab_setup()
    if colab:
        print(colab)
    set_seed(seed)
    set_threads(profile_threads(profile))
    print(environment_report(profile, seed))
    return profile

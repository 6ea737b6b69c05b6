"""Profiles, paths, seeds and the per-stage config dataclasses.

One switch picks the cost tier: ``PR1_PROFILE`` (``smoke`` | ``tiny`` | ``colab`` | ``paper``).
Without it the default is ``colab`` when CUDA is available and ``tiny`` otherwise.

Every stage has one frozen dataclass whose defaults are the ``tiny`` values; ``PRESETS`` holds
the per-profile overrides, applied by ``for_profile``:

>>> ModelConfig.for_profile("smoke").random_init
True
>>> ModelConfig.for_profile("paper").name
'Qwen/Qwen3-4B-Base'
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

PROFILES = ("smoke", "tiny", "colab", "paper")
REPO_ROOT = Path(__file__).resolve().parent.parent


def default_profile() -> str:
    """The profile from ``PR1_PROFILE``, else ``colab`` with CUDA and ``tiny`` without."""
    name = os.environ.get("PR1_PROFILE")
    if name:
        return check_profile(name)
    try:
        import torch

        return "colab" if torch.cuda.is_available() else "tiny"
    except ImportError:  # pragma: no cover - torch is a hard dependency
        return "tiny"


def check_profile(name: str | None) -> str:
    """Return ``name`` (or the default) after checking it is a known profile."""
    if name is None:
        return default_profile()
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}")
    return name


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
    """Where training runs, caches and tour reports go (git-ignored): ``PR1_RUNS_DIR`` or ``<repo>/runs``."""
    return Path(os.environ.get("PR1_RUNS_DIR", REPO_ROOT / "runs"))


def set_seed(seed: int) -> None:
    """Seed Python, NumPy (if present) and torch, CPU and CUDA."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover
        pass
    import torch

    torch.manual_seed(seed)


class Preset:
    """Mixin: ``Cls.for_profile(profile, **overrides)`` = defaults + ``PRESETS[profile]`` + overrides."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {}

    @classmethod
    def for_profile(cls, profile: str | None = None, **overrides: Any):
        profile = check_profile(profile)
        return cls(**{**cls.PRESETS.get(profile, {}), **overrides})

    def replace(self, **changes: Any):
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: str | Path) -> Path:
        """Write the config as JSON (every run saves its config next to its outputs)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"type": type(self).__name__, **self.to_dict()}, indent=2))
        return path


@dataclass(frozen=True)
class ModelConfig(Preset):
    """Which policy model to load and how (see ``pr1lib.models.load_policy``)."""

    name: str = "data/tiny-base"  # hub id or local folder (relative paths are from the repo root)
    random_init: bool = False  # smoke: build a random tiny Qwen3 in memory instead of loading
    load_in_4bit: bool = False  # NF4 through BitsAndBytesConfig
    dtype: str = "float32"  # compute dtype: float32 on CPU, bfloat16/float16 on GPU
    attn_implementation: str = "sdpa"  # sdpa | eager | flex_attention (never flash: no 4D masks)
    use_lora: bool = False  # wrap in PEFT LoRA for training stages
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_target_modules: tuple[str, ...] = ("all-linear",)
    gradient_checkpointing: bool = False
    prompt_style: str = "tiny"  # pr1lib.prompts style: "tiny" for the embedded model, "v3" for Qwen
    seed: int = 0

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": dict(name="random-tiny-qwen3", random_init=True),
        "tiny": dict(),
        "colab": dict(
            name="Qwen/Qwen3-0.6B-Base", load_in_4bit=True, dtype="float16", use_lora=True,
            gradient_checkpointing=True, prompt_style="v3",
        ),
        "paper": dict(
            name="Qwen/Qwen3-4B-Base", dtype="bfloat16", use_lora=False, gradient_checkpointing=True,
            prompt_style="v3",
        ),
    }


@dataclass(frozen=True)
class RunInfo:
    """Small record printed at the top of every notebook and saved with every run."""

    profile: str
    seed: int
    versions: dict[str, str] = field(default_factory=dict)


def environment_report(profile: str | None = None, seed: int = 0) -> RunInfo:
    """Versions of the libraries that matter, the profile and the seed (first cell of each notebook)."""
    import importlib.metadata as md
    import platform

    versions = {"python": platform.python_version()}
    for pkg in ("pr1lib", "torch", "transformers", "trl", "peft", "bitsandbytes", "datasets"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = "not installed"
    try:
        import torch

        versions["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover
        versions["device"] = "unknown"
    return RunInfo(profile=check_profile(profile), seed=seed, versions=versions)

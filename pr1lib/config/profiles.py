"""The cost tiers (profiles) and how a config is made for one.

One switch picks the tier: ``PR1_PROFILE`` (``smoke`` | ``tiny`` | ``colab`` | ``paper``;
default ``colab`` with CUDA, else ``tiny``). A config class lists its per-profile overrides in
``PRESETS``; ``Cls.for_profile(profile, **overrides)`` resolves the profile once and records it
in the config as ``cfg.profile``, so later code never asks for it again.

>>> check_profile("smoke")
'smoke'
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, ClassVar

from pr1lib.config.checks import check_fields, register_choices, unknown_key

PROFILES = ("smoke", "tiny", "colab", "paper")
register_choices(profile=PROFILES, model_profile=PROFILES)

# torch threads for the ~1M-parameter models (tiny profile, ``runtime.profile_threads``): two
# decode, evaluate and train 1.4-1.7x faster than one on a quiet 2-core machine, with the same
# samples (``bench grpo`` and ``bench eval`` time both); more were not measured. The smoke
# models are too small to gain.
TINY_THREADS = 2


def check_profile(name: str | None) -> str:
    """``name`` after checking it is a known profile; ``None``: ``PR1_PROFILE``, else ``colab``
    with CUDA and ``tiny`` without."""
    if name is None and not os.environ.get("PR1_PROFILE"):
        import torch  # lazy: config is imported by `python -m pr1lib --help`, which must be fast

        return "colab" if torch.cuda.is_available() else "tiny"
    name = name or os.environ["PR1_PROFILE"]
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}")
    return name


class Preset:
    """Mixin: ``Cls.for_profile(profile, **overrides)`` = defaults + ``PRESETS[profile]`` +
    overrides, with ``profile`` recorded in the config."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {}

    def __post_init__(self) -> None:
        check_fields(self)  # one ValueError naming the field, the value and what is allowed

    @classmethod
    def for_profile(cls, profile: str | None = None, **overrides: Any):
        profile = check_profile(profile)
        known = {f.name for f in dataclasses.fields(cls)}
        for key in overrides:
            if key not in known:
                raise unknown_key(cls, key)
        return cls(**{**cls.PRESETS.get(profile, {}), "profile": profile, **overrides})

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

    @classmethod
    def load(cls, path: str | Path):
        """A config saved by ``save`` (JSON lists become tuples again)."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(
            **{k: _tuples(v) for k, v in json.loads(Path(path).read_text()).items() if k in known}
        )


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value

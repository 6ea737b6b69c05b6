"""Which libraries produced a number: their installed versions and the hash of the lock.

A notebook prints them in its first cell and every result card and run card records them, so a
card says which transformers, TRL, PEFT or math-verify measured it. Reads package metadata only
(no import of torch and friends), so it is cheap anywhere.

>>> sorted(library_versions())[:3], len(lock_hash())
(['accelerate', 'bitsandbytes', 'datasets'], 16)
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import platform

from pr1lib.store.paths import REPO_ROOT

LOCK = REPO_ROOT / "requirements.lock"  # `make lock` writes it; every install path reads it
VERSIONED = (
    "pr1lib",
    "torch",
    "transformers",
    "trl",
    "peft",
    "bitsandbytes",
    "datasets",
    "math-verify",
    "kernels",
    "accelerate",
)


def lock_hash() -> str:
    """The first 16 hex digits of ``requirements.lock``'s sha256 (``no lock`` without one)."""
    return hashlib.sha256(LOCK.read_bytes()).hexdigest()[:16] if LOCK.is_file() else "no lock"


def library_versions() -> dict[str, str]:
    """``{package: version}`` for Python and each of ``VERSIONED`` (``not installed`` where
    missing), plus ``lock``: the hash of the lock the environment was meant to match."""
    versions = {"python": platform.python_version()}
    for pkg in VERSIONED:
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = "not installed"
    versions["lock"] = lock_hash()
    return versions

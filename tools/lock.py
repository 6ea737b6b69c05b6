"""The lock: one pinned, hashed set of versions that every install path of pr1 uses.

``make lock`` runs ``python tools/lock.py compile``: uv resolves the project's dependencies and
every extra for all platforms (``--universal``) at the newest versions ``pyproject.toml`` allows,
with the hashes of every file, into ``requirements.lock``. torch is pinned by ``TORCH_VERSION`` and
installed first, from ``TORCH_SPEC`` (the CPU wheel where there is no CUDA), so the lock leaves out
torch and the CUDA-only packages a CUDA build of torch brings (``triton``, ``nvidia-*``,
``cuda-*``). The ``colab`` extra's ``==`` pins are rewritten to the lock's versions.

``python tools/lock.py drift`` compares what a venv has installed with the lock (``make
test-latest`` prints it before it runs the suite on the newest allowed versions).

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from pr1lib.store.versions import LOCK, lock_hash  # noqa: E402 - metadata only, nothing to install

PYPROJECT = ROOT / "pyproject.toml"
UV_SPEC = "uv==0.13.9"  # the resolver, pinned too: the same inputs give the same lock
PYTHON = "3.11"  # the oldest Python the project supports (trl 1.16 needs 3.11)
# torch and what only a CUDA build of torch needs: installed by TORCH_SPEC, never from the lock
LEFT_OUT = re.compile(r"^(torch|triton|nvidia-[a-z0-9-]+|cuda-[a-z0-9-]+)==")
ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^ ;\\]+)(?: ; ([^\\]+?))?\s*\\?$", re.M)
HEADER = """\
# pr1's lock: every package `make venv` installs, pinned with the hashes of every file, for all
# platforms (Python >= {python}). Regenerate it on purpose: `make lock` ({uv}, universal resolution
# of pyproject.toml's dependencies and extras at the newest versions it allows), then `make test`.
# torch=={torch} is pinned by the Makefile's TORCH_VERSION and installed first (TORCH_SPEC: the CPU
# wheel where there is no CUDA), so this file leaves out torch and the CUDA-only packages a CUDA
# build brings (triton, nvidia-*, cuda-*).
# Install: pip install --require-hashes -r requirements.lock && pip install --no-deps -e .
"""


def canonical(name: str) -> str:
    """PEP 503's normal form of a distribution name (``Math_Verify`` -> ``math-verify``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def entries(text: str) -> list[tuple[str, str, str | None]]:
    """``(name, version, marker or None)`` of each of a lock's entries (a name may have two,
    one per range of Python versions)."""
    return [(canonical(m[1]), m[2], m[3]) for m in ENTRY.finditer(text)]


def pins(text: str) -> dict[str, str]:
    """``{name: version}``, for each name the entry that applies here (where ``packaging`` is
    installed to read markers) or else the last one (the newest Python's)."""
    try:
        from packaging.markers import Marker
    except ImportError:  # before anything is installed
        return {name: version for name, version, _ in entries(text)}
    return {
        name: version
        for name, version, marker in entries(text)
        if marker is None or Marker(marker).evaluate()
    }


def torch_version() -> str:
    """The Makefile's ``TORCH_VERSION``."""
    found = re.search(r"^TORCH_VERSION\s*\?=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M)
    if not found:
        raise SystemExit("error: the Makefile sets no TORCH_VERSION")
    return found.group(1)


def _uv() -> Path:
    """A uv of the pinned version in a throwaway venv (``.venv-lock``)."""
    venv = ROOT / ".venv-lock"
    uv = venv / "bin" / "uv"
    if not uv.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", UV_SPEC], check=True
        )
    return uv


def unpin_colab(pyproject: str) -> str:
    """``pyproject.toml`` with the colab extra's ``==`` pins dropped: they follow the lock, so
    they must not steer it.

    >>> unpin_colab('colab = [\n    "trl==1.0",\n]\ndev = ["trl==1.0"]')
    'colab = [\n    "trl",\n]\ndev = ["trl==1.0"]'
    """
    head, sep, rest = pyproject.partition("colab = [")
    block, end, tail = rest.partition("]")
    return head + sep + re.sub(r'"([A-Za-z0-9._-]+)==[^"]+"', r'"\1"', block) + end + tail


def _resolve(torch: str) -> str:
    """uv's universal, hashed resolution of the project and all its extras."""
    with tempfile.TemporaryDirectory() as tmp:
        constraint = Path(tmp) / "torch.txt"
        constraint.write_text(f"torch=={torch}\n")
        project = Path(tmp) / "pyproject.toml"
        project.write_text(unpin_colab(PYPROJECT.read_text()))
        out = Path(tmp) / "lock.txt"
        subprocess.run(
            [
                str(_uv()),
                "pip",
                "compile",
                str(project),
                "--all-extras",
                "--universal",
                "--python-version",
                PYTHON,
                "--generate-hashes",
                "--no-header",
                "--quiet",
                "-c",
                str(constraint),
                "-o",
                str(out),
            ],
            check=True,
            cwd=ROOT,
        )
        return out.read_text()


def _without_torch(resolved: str) -> str:
    """The resolution's entries minus torch and its CUDA-only packages, the temp paths dropped."""
    entries = re.split(r"\n(?=[A-Za-z0-9])", resolved.strip())
    kept = [e for e in entries if not LEFT_OUT.match(e)]
    text = re.sub(r"#   -c \S+\n\s*", "", "\n".join(kept)) + "\n"
    return re.sub(r"\(\S*/pyproject\.toml\)", "(pyproject.toml)", text)


def pin_colab(pyproject: str, locked: dict[str, str]) -> str:
    """``pyproject.toml`` with each ``name==version`` of the colab extra set to the lock's version.

    >>> pin_colab('colab = [\\n    "trl==1.0",\\n]\\ndev = ["trl==1.0"]', {"trl": "1.16.0"})
    'colab = [\\n    "trl==1.16.0",\\n]\\ndev = ["trl==1.0"]'
    """
    head, sep, rest = pyproject.partition("colab = [")
    block, end, tail = rest.partition("]")

    def repin(m: re.Match) -> str:
        return f'"{m.group(1)}=={locked[canonical(m.group(1))]}"'

    return head + sep + re.sub(r'"([A-Za-z0-9._-]+)==[^"]+"', repin, block) + end + tail


def compile_lock() -> None:
    """Write ``requirements.lock`` and re-pin the colab extra."""
    torch = torch_version()
    body = _without_torch(_resolve(torch))
    LOCK.write_text(HEADER.format(python=PYTHON, uv=UV_SPEC, torch=torch) + body)
    PYPROJECT.write_text(pin_colab(PYPROJECT.read_text(), pins(body)))
    print(f"wrote {LOCK.name}: {len(pins(body))} packages, hash {lock_hash()}")


def drift() -> int:
    """Print each locked package whose installed version differs; returns how many."""
    differ = []
    for name, version in sorted(pins(LOCK.read_text()).items()):
        try:
            have = md.version(name)
        except md.PackageNotFoundError:
            continue  # a platform's package (appnope, pywinpty...) or an extra not installed
        if have != version:
            differ.append(f"  {name}: lock {version}, installed {have}")
    print(f"{len(differ)} package(s) differ from {LOCK.name}" + (":" if differ else ""))
    for line in differ:
        print(line)
    return len(differ)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["compile", "drift", "hash"])
    args = parser.parse_args(argv)
    if args.command == "compile":
        compile_lock()
    elif args.command == "drift":
        drift()
    else:
        print(lock_hash())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The lock (``requirements.lock``) covers every install path, and cards say which versions made
them.

Run: .venv/bin/python -m pytest tests/test_lock.py -q -p no:cacheprovider
"""

from __future__ import annotations

import json
import re
import sys
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from pr1lib.store import cards as results
from pr1lib.store import versions
from pr1lib.store.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))
import lock  # tools/lock.py, a script beside the package

LOCK_TEXT = versions.LOCK.read_text()
ENTRIES = lock.entries(LOCK_TEXT)
LOCKED: dict[str, list[str]] = {}
for _name, _version, _ in ENTRIES:
    LOCKED.setdefault(_name, []).append(_version)
PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
MAKEFILE = (REPO_ROOT / "Makefile").read_text()
TORCH = lock.torch_version()
# cards written from the day the lock landed on carry the library versions (older ones are left
# as they were measured: a card is not back-filled)
VERSIONED_SINCE = "2026-12-04"


def _requirements() -> list[tuple[str, Requirement]]:
    deps = [("dependencies", Requirement(r)) for r in PROJECT["dependencies"]]
    for extra, reqs in PROJECT["optional-dependencies"].items():
        deps += [(extra, Requirement(r)) for r in reqs]
    return deps


@pytest.mark.parametrize("where, req", _requirements(), ids=lambda x: str(x))
def test_the_lock_pins_every_dependency_and_extra_within_its_range(where, req):
    name = lock.canonical(req.name)
    if name == "torch":
        assert Version(TORCH) in req.specifier, f"TORCH_VERSION {TORCH} outside {req}"
        return
    assert name in LOCKED, f"{where}: {req} is not in requirements.lock (run make lock)"
    for version in LOCKED[name]:
        assert Version(version) in req.specifier, f"{where}: lock has {name}=={version}, not {req}"


def test_every_entry_is_pinned_and_hashed_and_torch_is_left_to_torch_spec():
    body = LOCK_TEXT[re.search(r"^[A-Za-z0-9]", LOCK_TEXT, re.M).start() :]  # after the header
    blocks = re.split(r"\n(?=[A-Za-z0-9])", body)
    assert len(blocks) == len(ENTRIES) > 100
    assert all("--hash=sha256:" in b for b in blocks)
    assert not [n for n, _, _ in ENTRIES if re.match(r"torch$|triton$|nvidia-|cuda-", n)]
    assert f"torch=={TORCH}" in LOCK_TEXT.split("\naccelerate==")[0]  # the header says which


def test_the_colab_extra_pins_what_the_notebooks_depend_on_at_the_lock_versions():
    colab = {
        lock.canonical(Requirement(r).name): Requirement(r)
        for r in PROJECT["optional-dependencies"]["colab"]
    }
    pinned = {n for n, r in colab.items() if str(r.specifier).startswith("==")}
    assert pinned == {"transformers", "trl", "peft", "math-verify", "bitsandbytes"}
    for name in pinned:
        assert str(colab[name].specifier) == f"=={LOCKED[name][-1]}", name
    assert not {"torch", "plotly", "jupyterlab", "notebook"} & set(colab)  # Colab has its own


def test_every_install_path_installs_from_the_lock():
    install = MAKEFILE.split("$(STAMP):", 1)[1].split("\n\n", 1)[0]
    assert "--require-hashes -r $(LOCK)" in install and "--no-deps" in install
    assert re.search(r"^LOCK\s*:=\s*requirements\.lock$", MAKEFILE, re.M)
    conda = (REPO_ROOT / "environment.yml").read_text()
    assert '"-r requirements.lock"' in conda and f"pytorch={TORCH}" in conda
    binder = (REPO_ROOT / "binder" / "postBuild").read_text()
    assert "--require-hashes -r requirements.lock" in binder and f'"torch=={TORCH}"' in binder
    python = re.search(r"python=(3\.\d+)", conda).group(1)
    assert f"python={python}" in (REPO_ROOT / "binder" / "environment.yml").read_text()
    assert Version(python) >= Version(PROJECT["requires-python"].lstrip(">="))


def test_pins_follow_the_markers_of_this_python():
    old, new = "python_full_version < '3.0'", "python_full_version >= '3.0'"
    text = f"a==1 ; {old} \\\na==2 ; {new} \\\nb==3 \\\n"
    assert lock.pins(text) == {"a": "2", "b": "3"}
    assert lock.pin_colab('colab = [\n "x==1",\n]', {"x": "4"}) == 'colab = [\n "x==4",\n]'
    assert lock.unpin_colab('colab = [\n "x==1",\n]') == 'colab = [\n "x",\n]'  # to resolve


def test_a_card_records_the_library_versions_and_the_lock(monkeypatch):
    monkeypatch.setattr(results, "machine", lambda: {"cpus": 2})
    card = results.build_card("x", ["eval"], {"accuracy": 0.5}, None)
    assert set(versions.VERSIONED) | {"lock", "python"} <= set(card["versions"])
    assert card["versions"]["lock"] == versions.lock_hash() != "no lock"
    assert card["versions"]["transformers"] not in ("", "not installed")


def test_cards_written_since_the_lock_carry_versions():
    lacking = {}
    for path in sorted(results.RESULTS.glob("*.json")):
        card = json.loads(path.read_text())
        if card.get("date", "")[:10] >= VERSIONED_SINCE:
            missing = (set(versions.VERSIONED) | {"lock"}) - set(card.get("versions", {}))
            if missing:
                lacking[path.name] = sorted(missing)
    assert lacking == {}, f"cards without the library versions they were measured with: {lacking}"

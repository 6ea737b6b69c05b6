"""Result cards: the evidence behind every number the README quotes.

A measuring command run with ``--card NAME`` writes ``results/NAME.json``: the command line, the
date, the machine, the library versions and the lock's hash, the git commit, the seeds, the start
checkpoint, the config (and its hash) and the numbers it printed. The README quotes a number as a
link into its card, ``[89.3 %](results/sft-tiny.json#seen.greedy.accuracy)``, and
``tests/test_readme.py`` checks every such link against the card (and that no measured number goes
without one).

>>> card = {"numbers": {"seen": {"accuracy": 0.8933}}}
>>> lookup(card, "seen.accuracy"), quoted_matches("89.3 %", 0.8933)
(0.8933, True)
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from pr1lib.store.paths import REPO_ROOT, shown
from pr1lib.store.versions import library_versions

RESULTS = REPO_ROOT / "results"
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# a README link into a card: [text](results/NAME.json#dotted.key)
# a link into a card, from the repository root or from docs/ (``../results/``)
LINK = re.compile(r"\[([^\]]+)\]\((?:\.\./)?(results/[a-z0-9._-]+\.json)#([A-Za-z0-9_.@+%-]+)\)")
MAX_LIST = 12  # longer lists (per-problem rows, completions) stay out of a card


def check_name(name: str) -> str:
    """A card name is a file stem: lower-case letters, digits, ``.``, ``_``, ``-``."""
    if not NAME.match(name):
        raise ValueError(f"--card {name!r}: use lower-case letters, digits, '.', '_' or '-'")
    return name


def card_path(name: str, overwrite: bool = False) -> Path:
    """``results/NAME.json`` after checking the name; an existing card (a committed one, say) is
    refused unless ``overwrite`` (``--overwrite-card``).

    >>> card_path("Bad Name")
    Traceback (most recent call last):
    ...
    ValueError: --card 'Bad Name': use lower-case letters, digits, '.', '_' or '-'
    """
    path = RESULTS / f"{check_name(name)}.json"
    if path.exists() and not overwrite:
        raise ValueError(
            f"--card {name}: {path} exists (a card the README may quote): pass --overwrite-card "
            "to replace it, or choose another name"
        )
    folder = next((p for p in (path.parent, *path.parent.parents) if p.exists()), None)
    if folder is None or not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(
            f"--card {name}: {folder or path.parent} cannot be written (read-only?), so the card "
            "would be lost after the run: make it writable, or leave --card out"
        )
    return path


def slim(value: Any) -> Any:
    """``value`` without long lists (they are rows, not results): a card stays a few KB.

    >>> slim({"a": [1, 2], "rows": list(range(100)), "b": {"c": 0.5}})
    {'a': [1, 2], 'b': {'c': 0.5}}
    >>> slim([{"seed": 0, "rows": list(range(100))}])  # inside short lists too (one run per seed)
    [{'seed': 0}]
    """
    if isinstance(value, dict):
        return {
            k: slim(v) for k, v in value.items() if not (isinstance(v, list) and len(v) > MAX_LIST)
        }
    if isinstance(value, list):
        return [slim(v) for v in value]
    return value


def git_commit() -> str:
    """The checkout's commit, ``+dirty`` when files differ from it, ``unknown`` outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head + ("+dirty" if dirty.strip() else "")) if head else "unknown"


def machine() -> dict[str, Any]:
    """Where the numbers were measured: CPU count, platform, torch and its device."""
    import torch

    cuda = torch.cuda.is_available()
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
    }


def config_hash(config: Any) -> str | None:
    """A short hash of a config dict (sorted keys), ``None`` without one."""
    if not isinstance(config, dict):
        return None
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def build_card(name: str, argv: list[str], result: Any, args: Any) -> dict[str, Any]:
    """The card of one command run: how to rerun it and what it measured."""
    config = result.get("config") if isinstance(result, dict) else None
    seeds = getattr(args, "seeds", None) or [getattr(args, "seed", None)]
    if seeds == [None] and isinstance(config, dict):  # the config's own seed when none was given
        seeds = [config.get("seed")]
    start = getattr(args, "init", None) or getattr(args, "model", None)
    return {
        "name": check_name(name),
        "command": "python -m pr1lib " + shlex.join(argv),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "git": git_commit(),
        "machine": machine(),
        "versions": library_versions(),
        "seeds": [s for s in seeds if s is not None],
        "start": start,
        "config_hash": config_hash(config),
        "numbers": slim(result),
    }


def write_card(name: str, result: Any, args: Any, argv: list[str] | None = None) -> Path:
    """Write ``results/NAME.json`` (the folder is made if missing; an existing card only with
    ``args.overwrite_card``); returns its path."""
    path = card_path(name, getattr(args, "overwrite_card", False))
    card = build_card(name, list(sys.argv[1:] if argv is None else argv), result, args)
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(card, indent=1, default=str) + "\n")
    return path


def read_card(path: str | Path) -> dict[str, Any]:
    """The card at ``path`` after checking it: a JSON object whose ``numbers`` are an object or a
    list with something in them. A card that is empty, damaged or holds no numbers is one
    ``ValueError`` naming the file (never read as "no card": a notebook would measure again for
    an hour in silence).

    >>> read_card(RESULTS / "tinyworld-controls.json")["name"]
    'tinyworld-controls'
    """
    path = Path(path)
    where, restore = shown(path), f"git checkout -- {shown(path)} restores a committed one"
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"card {where} is damaged: it is not text ({restore})") from None
    if not text.strip():
        raise ValueError(f"card {where} is empty ({restore}; or remove it to measure again)")
    try:
        card = json.loads(text)
    except ValueError as err:
        raise ValueError(
            f"card {where} is damaged: not valid JSON ({err}); {restore}, or remove it to measure "
            "again"
        ) from None
    numbers = card.get("numbers") if isinstance(card, dict) else None
    if not isinstance(numbers, (dict, list)) or not numbers:
        raise ValueError(
            f"card {where} holds no numbers (\"numbers\": {json.dumps(numbers)}): {restore}, or "
            "remove it to measure again"
        )
    return card


def committed(name: str, **match: Any) -> dict | None:
    """The card ``results/NAME.json`` when it exists and its numbers carry ``match`` (the profile
    and seed a notebook runs, say), else ``None``: a long cell shows the committed run of itself
    instead of training again. A card that is there but damaged is one line naming it
    (``read_card``).

    >>> committed("no-such-card") is None
    True
    """
    path = RESULTS / f"{check_name(name)}.json"
    if not path.is_file():
        return None
    card = read_card(path)
    numbers = card["numbers"]
    if match and (
        not isinstance(numbers, dict) or any(numbers.get(k) != v for k, v in match.items())
    ):
        return None
    return card


def committed_or(name: str, compute: Callable[[], Any], live: bool = False, **match: Any) -> Any:
    """The numbers of the committed card ``name`` made for ``match`` (printing its command),
    else (or when ``live``) what ``compute()`` returns: a long notebook cell's two ways.

    >>> committed_or("no-such-card", lambda: {"rows": []}, profile="tiny")
    {'rows': []}
    """
    card = None if live else committed(name, **match)
    if card is None:
        return compute()
    print("this cell's committed run:", card["command"])
    return card["numbers"]


def lookup(card: dict, key: str) -> Any:
    """The value at a dotted ``key`` under the card's ``numbers`` (list items by index)."""
    value: Any = card["numbers"]
    for part in key.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise KeyError(f"{card.get('name')}: no {key!r} (stopped at {part!r})")
    return value


def quoted_matches(text: str, value: Any) -> bool:
    """Whether a README's quoted ``text`` shows ``value`` to the digits it quotes.

    A fraction quoted with ``%`` or in points is multiplied by 100; the text's decimals set the
    rounding.

    >>> quoted_matches("18.3 %", 0.18333), quoted_matches("7,298", 7298)
    (True, True)
    >>> quoted_matches("+26.4 points", 0.2637)
    True
    >>> quoted_matches("90 %", 0.93)
    False
    """
    found = re.search(r"-?\d[\d,]*(?:\.(\d+))?", text)
    if not found or isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    shown = float(found.group(0).replace(",", ""))
    percent = "%" in text or "point" in text
    scaled = value * 100 if percent and abs(value) <= 1 else value
    return abs(scaled - shown) <= 0.5 * 10 ** -len(found.group(1) or "") + 1e-9


def readme_links(text: str) -> list[tuple[str, str, str]]:
    """Every ``(quoted text, card path, key)`` link into a card in a markdown text."""
    return LINK.findall(text)

"""The house rules of ``pr1lib``, checked on the source.

The library is a stack of wings (packages by role). The order is import-linter's layers contract
in ``pyproject.toml``: a wing imports only the wings below it, imports inside functions included,
with no import ignored; ``make test`` runs ``lint-imports`` and a test here shows the contract
failing on a planted upward import. Besides: each wing's ``__init__`` says what it owns and what it
may import (the same wings the contract allows), its public names are its ``__all__``, no module
import cycle, no module over 500 lines, no function over 60, ``--help`` stays light, and
docs/architecture.md's picture is the contract's order and the tree's modules.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from pr1lib.store.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "pr1lib"
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
CONTRACTS = {c["id"]: c for c in PYPROJECT["tool"]["importlinter"]["contracts"]}
# the wings, top to bottom: each entry a layer, siblings in one layer split on "|" (independent)
LAYERS = [[w.strip() for w in layer.split("|")] for layer in CONTRACTS["wings"]["layers"]]
WINGS = [w for layer in LAYERS for w in layer if w != "__main__"]
LEVEL = {w: len(LAYERS) - i for i, layer in enumerate(LAYERS) for w in layer}  # bottom = 1
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def below(wing: str) -> list[str]:
    """The wings ``wing`` may import, top to bottom (its layer's siblings excluded)."""
    return [w for w in WINGS if LEVEL[w] < LEVEL[wing]]


# ----------------------------------------------------------------------------- the contract
def lint_imports(root: Path, *args: str) -> subprocess.CompletedProcess:
    """``lint-imports`` on the ``pr1lib`` under ``root`` with ``root``'s pyproject.toml."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache", *args]
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_the_contracts_hold():
    out = lint_imports(REPO_ROOT)
    assert out.returncode == 0, out.stdout[-3000:]
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken" in out.stdout


def test_no_contract_ignores_an_import():
    assert [c["id"] for c in CONTRACTS.values() if c.get("ignore_imports")] == []


@pytest.fixture(scope="module")
def planted_tree(tmp_path_factory) -> Path:
    """A copy of the package and its pyproject.toml, to plant imports in."""
    root = tmp_path_factory.mktemp("planted")
    shutil.copytree(PACKAGE, root / "pr1lib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


@pytest.mark.parametrize(
    "module, line, broken",
    [
        # an upward import at the top of a module
        ("store/disk.py", "from pr1lib.cli import main", "pr1lib.store is not allowed to import"),
        # one inside a function counts as much
        (
            "format/answers.py",
            "def _planted():\n    from pr1lib.training import grpo",
            "pr1lib.format is not allowed to import pr1lib.training",
        ),
        # siblings of one layer never meet
        (
            "rewards/hacking.py",
            "from pr1lib.decoding import steering",
            "pr1lib.rewards is not allowed to import pr1lib.decoding",
        ),
        # the format stays text
        ("format/prompts.py", "import torch", "pr1lib.format is not allowed to import torch"),
    ],
    ids=["upward", "inside-a-function", "siblings", "torch-in-format"],
)
def test_a_planted_import_breaks_the_contract(planted_tree, module, line, broken):
    target = planted_tree / "pr1lib" / module
    kept = target.read_text()
    try:
        target.write_text(kept + f"\n\n{line}  # planted\n")
        out = lint_imports(planted_tree)
    finally:
        target.write_text(kept)
    assert out.returncode == 1, out.stdout[-2000:]
    assert broken in out.stdout


# ----------------------------------------------------------------------------- the wings
PACKAGES = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))


def test_the_top_level_is_the_wings():
    entries = sorted(
        p.name for p in PACKAGE.iterdir() if p.name not in {"__pycache__", "__init__.py"}
    )
    assert entries == sorted([*WINGS, "__main__.py"])
    assert len(WINGS) <= 12, f"{len(WINGS)} wings: the top level should fit on one screen"


@pytest.mark.parametrize("wing", PACKAGES)
def test_a_wing_holds_at_most_15_modules(wing):
    modules = [p for p in (PACKAGE / wing).glob("*.py") if p.name != "__init__.py"]
    assert len(modules) <= 15, f"{wing}/ holds {len(modules)} modules: split it by role"


def may_import(doc: str) -> list[str]:
    """The wings a docstring's ``May import:`` sentence names before any ``;`` or ``.``."""
    found = re.search(r"May import:(.*?)(?:;|\.\s|\.$)", doc, re.S)
    assert found, "the docstring has no 'May import:' sentence"
    return re.findall(r"``(\w+)``", found.group(1))


@pytest.mark.parametrize("wing", PACKAGES)
def test_a_wing_says_what_it_owns_and_may_import(wing):
    doc = ast.get_docstring(ast.parse((PACKAGE / wing / "__init__.py").read_text())) or ""
    assert doc.startswith(f"{wing}: "), f"{wing}/__init__.py's docstring opens with its name"
    assert may_import(doc) == below(wing)


@pytest.mark.parametrize("wing", PACKAGES)
def test_a_wing_exports_its_public_names(wing):
    init = PACKAGE / wing / "__init__.py"
    names = next(
        ast.literal_eval(n.value)
        for n in ast.parse(init.read_text()).body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "__all__"
    )
    modules = {p.stem for p in (PACKAGE / wing).glob("*.py")} - {"__init__"}
    public = {m for m in modules if not m.startswith("_") and m not in BUILTIN_WORLDS}
    assert public <= set(names), (
        f"{wing}/__init__.py's __all__ misses {sorted(public - set(names))}"
    )
    package = __import__(f"pr1lib.{wing}", fromlist=["__all__"])
    missing = [n for n in names if n not in modules and not hasattr(package, n)]
    assert missing == [], f"{wing}.__all__ names what the package lacks: {missing}"


# a world is one file plus a registry line; its module is reached through the registry
BUILTIN_WORLDS = set(__import__("pr1lib.worlds", fromlist=["BUILTIN"]).BUILTIN)


# ----------------------------------------------------------------------------- modules
FILES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def dotted(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {dotted(p): p for p in FILES}


def imported(tree: ast.AST) -> set[str]:
    """The ``pr1lib`` modules a syntax tree imports, at the top or inside functions (a name
    imported from a package counts as its submodule when there is one)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pr1lib"):
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("pr1lib")}
    return found & set(MODULES)


GRAPH = {m: imported(ast.parse(p.read_text())) - {m} for m, p in MODULES.items()}


def test_no_import_cycle():
    """import-linter orders the wings; inside a wing, modules still never import in a circle (a
    package's ``__init__`` re-exporting its own modules is the one allowed back edge)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(GRAPH[node]):
            if node.startswith(f"{nxt}.") or nxt.startswith(f"{node}."):
                continue  # a module and its own package
            assert state.get(nxt) != 1, f"import cycle: {' -> '.join([*path, nxt])}"
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for module in sorted(MODULES):
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_and_functions_stay_short(path):
    source = path.read_text()
    assert len(source.splitlines()) <= 500, f"{path.name} has {len(source.splitlines())} lines"
    long = [
        (n.name, n.end_lineno - n.lineno + 1)
        for n in ast.walk(ast.parse(source))
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno >= 60
    ]
    assert long == [], f"functions over 60 lines in {path.name}: {long}"


HEAVY = ("torch", "transformers", "trl", "datasets", "peft")
HELP = (
    "import sys\nfrom pr1lib.cli.main import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n"
    "    pass\nprint(sorted(m for m in {heavy!r} if m in sys.modules))"
)


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        *[
            [c, "--help"]
            for c in (
                "tour",
                "pretrain-tiny",
                "coldstart",
                "sft",
                "grpo",
                "eval",
                "bench",
                "export-verl",
            )
        ],
    ],
    ids=" ".join,
)
def test_help_loads_no_heavy_library(argv):
    """``--help`` stays fast because it never imports torch and friends (its time is measured by
    ``benchmarks/cli_help.py``, not asserted here)."""
    code = HELP.format(argv=argv, heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "usage:" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout.splitlines()[-1]


def test_every_torch_load_is_weights_only():
    """A checkpoint is data, never code: every ``torch.load`` in the tree (library, tests,
    benchmarks, notebooks) passes ``weights_only=True`` (a planted pickle cannot run)."""
    calls = []
    for path in sorted(REPO_ROOT.glob("**/*.py")):
        if any(p.startswith(".venv") for p in path.parts) or "runs" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "load"
                and getattr(node.func.value, "id", "") == "torch"
            ):
                safe = any(
                    k.arg == "weights_only" and getattr(k.value, "value", None) is True
                    for k in node.keywords
                )
                if not safe:
                    calls.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert calls == [], f"torch.load without weights_only=True: {calls}"


# ----------------------------------------------------------------------------- outside the package
# the command line's internals: the commands' bodies, their arguments and flag checks
CLI_INTERNALS = {"pr1lib.cli.parser", "pr1lib.cli.pipeline", "pr1lib.cli.rl", "pr1lib.cli.measure"}
CLI_INTERNALS |= {"pr1lib.cli.flags"}


def outside_imports(path) -> list[str]:
    """What a benchmark or solution imports from ``pr1lib`` that is not public: a command-line
    internal (the commands' bodies, their arguments) or a name starting with ``_``."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pr1lib"):
            names = {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            if names & CLI_INTERNALS:
                bad.append(f"{path.name}:{node.lineno} {node.module}")
            bad += [f"{path.name}:{node.lineno} {a.name}" for a in node.names if a.name[0] == "_"]
    return bad


@pytest.mark.parametrize(
    "path",
    sorted((REPO_ROOT / "benchmarks").glob("*.py"))
    + sorted((REPO_ROOT / "solutions").glob("*.py")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_benchmarks_and_solutions_use_only_public_names(path):
    assert outside_imports(path) == []


def test_the_public_names_check_finds_a_planted_internal(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from pr1lib.cli.pipeline import print_json\nfrom pr1lib.training.grpo import _x\n"
        "from pr1lib.cli import rl\n"
    )
    assert outside_imports(planted) == [
        "planted.py:1 pr1lib.cli.pipeline",
        "planted.py:2 _x",
        "planted.py:3 pr1lib.cli",
    ]


# ----------------------------------------------------------------------------- docs/architecture.md
ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
PICTURE = ("<!-- wings: generated by python tests/test_architecture.py -->", "<!-- /wings -->")


def role(wing: str) -> str:
    """A wing's role: the first sentence of its ``__init__`` docstring, after its name."""
    doc = ast.get_docstring(ast.parse((PACKAGE / wing / "__init__.py").read_text())) or ""
    return doc.split("\n")[0].split(": ", 1)[1].split(". ")[0].rstrip(".").replace("``", "")


def wings_picture() -> str:
    """The wings, top to bottom, as the text block docs/architecture.md shows: each wing's role
    and its modules; siblings of one layer side by side under a ``|``."""
    rows = []
    for layer in LAYERS:
        names = [w for w in layer if w != "__main__"]
        if not names:
            continue
        if rows:
            rows.append("   ↓")
        for w in names:
            modules = sorted(p.stem for p in (PACKAGE / w).glob("*.py") if p.stem != "__init__")
            bar = "| " if len(names) > 1 else ""
            rows.append(f"{w + '/':<13}{bar}{role(w)}")
            rows += textwrap.wrap(
                " · ".join(modules),
                100,
                initial_indent=" " * 13 + bar,
                subsequent_indent=" " * 13 + bar,
                break_on_hyphens=False,
            )
    return "\n".join([PICTURE[0], "```", *rows, "```", PICTURE[1]])


def test_the_architecture_doc_shows_the_wings():
    text = ARCHITECTURE.read_text()
    start, end = text.index(PICTURE[0]), text.index(PICTURE[1]) + len(PICTURE[1])
    drawn = re.findall(r"^(\w+)/ ", text[start:end], re.M)
    assert sorted(drawn) == PACKAGES, "every package in the picture, every pictured one a package"
    assert text[start:end] == wings_picture(), (
        "docs/architecture.md's wings picture is stale: run python tests/test_architecture.py"
    )


if __name__ == "__main__":  # rewrite the picture in docs/architecture.md from the contract
    doc = ARCHITECTURE.read_text()
    start, end = doc.index(PICTURE[0]), doc.index(PICTURE[1]) + len(PICTURE[1])
    ARCHITECTURE.write_text(doc[:start] + wings_picture() + doc[end:])
    print(f"rewrote the wings picture in {ARCHITECTURE}")

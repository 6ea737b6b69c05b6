"""The house rules of ``pr1lib``, checked on the source with ``ast`` (imports inside functions
count too): modules stack in layers, each imports only from its layer or below, there is no
import cycle, no module passes 500 lines, no function 60, and ``--help`` stays fast."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from pr1lib.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "pr1lib"
# Bottom to top. A module may import modules of its own layer or of a layer below, never above.
LAYERS: list[tuple[str, ...]] = [
    (
        "paths",
        "versions",
        "validate",
        "profiles",
        "config",
        "jsonl",
        "answers",
        "format",
        "prompts",
        "tasks",
        "world",
        "paper",
        "expect",
        "budget",
    ),
    (
        "runtime",
        "graders",
        "rewards",
        "hacking",
        "tokens",
        "structure",
        "data",
        "evalsets",
        "arithmetic",
        "buckets",
    ),  # the core
    ("metrics", "doctor", "plots", "dashboard", "live"),  # scoring and what a learner looks at
    # models and engines
    ("models", "decode", "kvcache", "rollout", "steering", "teachers", "chat_teacher", "standin"),
    # the pieces a stage is made of
    ("runs", "results", "evaluate", "coldstart", "pretrain", "sampling", "preflight"),
    ("sft", "grpo"),  # the training stages
    # studies and reports
    ("studies", "ablation", "analytics", "widgets", "verl", "bench", "blockcost"),
    ("notebook", "tour", "twins", "publish"),  # running and publishing the notebooks
    ("commands", "cli", "__main__", "__init__"),  # the command line
]
LAYER = {name: i for i, layer in enumerate(LAYERS) for name in layer}
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py"))


def imports(module: str) -> set[str]:
    """The ``pr1lib`` modules ``module`` imports, at the top or inside functions."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[0] == "pr1lib" and len(parts) > 1:
                found.add(parts[1])
            elif node.module == "pr1lib":
                found |= {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("pr1lib.")}
    return found & set(MODULES) - {module}


GRAPH = {m: imports(m) for m in MODULES}


def test_every_module_has_a_layer():
    assert sorted(set(MODULES) - set(LAYER)) == [], "add new modules to LAYERS"


@pytest.mark.parametrize("module", MODULES)
def test_imports_stay_in_the_layer_or_below(module):
    above = sorted(m for m in GRAPH[module] if LAYER[m] > LAYER[module])
    assert above == [], f"{module} (layer {LAYER[module]}) imports from above: {above}"


def test_no_import_cycle():
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(GRAPH[node]):
            assert state.get(nxt) != 1, f"import cycle: {' -> '.join([*path, nxt])}"
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for module in MODULES:
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize("module", MODULES)
def test_modules_and_functions_stay_short(module):
    source = (PACKAGE / f"{module}.py").read_text()
    assert len(source.splitlines()) <= 500, f"{module}.py has {len(source.splitlines())} lines"
    long = [
        (n.name, n.end_lineno - n.lineno + 1)
        for n in ast.walk(ast.parse(source))
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno >= 60
    ]
    assert long == [], f"functions over 60 lines in {module}.py: {long}"


HEAVY = ("torch", "transformers", "trl", "datasets", "peft")
HELP = (
    "import sys\nfrom pr1lib.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n"
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
        if ".venv" in path.parts or "runs" in path.parts:
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

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
# Bottom to top. A module may import modules of its own layer or of a layer below, never above. A
# package (config, worlds, experiments) is one unit: its files together.
LAYERS: list[tuple[str, str]] = [  # (the modules of a layer, what the layer is)
    (
        "paths versions validate savedsets modelfiles profiles jsonl answers format prompts tasks "
        "paper disk expect arithmetic",
        "pure: text, numbers, tables (no torch, no stage)",
    ),
    ("teachers worlds", "the rule teacher and the task worlds"),
    ("config", "the recipe's tables and one config per stage"),
    (
        "runtime graders rewards reward_modes hacking tokens structure data evalsets buckets",
        "the core",
    ),
    ("metrics searchstats doctor plots dashboard live", "scoring and what a learner looks at"),
    (
        "models decode kvcache rowcache regroup engine rollout steering hf_teacher chat_teacher "
        "standin",
        "models and engines",
    ),
    (
        "folders runs results samplers evaluate traces coldstart sftdata pretrain sampling "
        "preflight starts",
        "the pieces a stage is made of",
    ),
    ("sft sft_live grpo grpo_trainer", "the training stages"),
    ("experiments curves headline reports widgets verl bench budget", "studies and reports"),
    ("notebook tour twins publish", "running and publishing the notebooks"),
    (
        "arguments inputs commands commands_rl commands_measure cli __main__ __init__",
        "the command line",
    ),
]
LAYER = {name: i for i, (layer, _) in enumerate(LAYERS) for name in layer.split()}
PACKAGES = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
MODULES = sorted([p.stem for p in PACKAGE.glob("*.py")] + PACKAGES)
FILES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def files(name: str) -> list:
    return sorted((PACKAGE / name).glob("*.py")) if name in PACKAGES else [PACKAGE / f"{name}.py"]


def imported(tree: ast.AST) -> set[str]:
    """The ``pr1lib`` units a syntax tree imports, at the top or inside functions."""
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
    return found


def imports(module: str) -> set[str]:
    """The ``pr1lib`` modules (or packages) ``module`` imports, at the top or inside functions."""
    found = set().union(*(imported(ast.parse(f.read_text())) for f in files(module)))
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
CLI_INTERNALS = {"arguments", "commands", "commands_rl", "commands_measure"}


def outside_imports(path) -> list[str]:
    """What a benchmark or solution imports from ``pr1lib`` that is not public: a command-line
    internal (the commands' bodies, their arguments) or a name starting with ``_``."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pr1lib"):
            parts = node.module.split(".")
            if len(parts) > 1 and parts[1] in CLI_INTERNALS:
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
    planted.write_text("from pr1lib.commands import print_json\nfrom pr1lib.grpo import _x\n")
    assert outside_imports(planted) == ["planted.py:1 pr1lib.commands", "planted.py:2 _x"]


# ----------------------------------------------------------------------------- docs/architecture.md
ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
PICTURE = ("<!-- layers: generated from tests/test_architecture.py -->", "<!-- /layers -->")


def layers_picture() -> str:
    """The layers, top to bottom, as the text block docs/architecture.md shows."""
    width = max(len(what) for _, what in LAYERS)
    rows = [
        f"{i:>2}  {what:<{width}}  {' · '.join(names.split())}"
        for i, (names, what) in reversed(list(enumerate(LAYERS)))
    ]
    return "\n".join([PICTURE[0], "```", *rows, "```", PICTURE[1]])


def test_the_architecture_doc_shows_the_layers_table():
    text = ARCHITECTURE.read_text()
    start, end = text.index(PICTURE[0]), text.index(PICTURE[1]) + len(PICTURE[1])
    assert text[start:end] == layers_picture(), (
        "docs/architecture.md's layers picture is stale: run python tests/test_architecture.py"
    )


if __name__ == "__main__":  # rewrite the picture in docs/architecture.md from LAYERS
    doc = ARCHITECTURE.read_text()
    start, end = doc.index(PICTURE[0]), doc.index(PICTURE[1]) + len(PICTURE[1])
    ARCHITECTURE.write_text(doc[:start] + layers_picture() + doc[end:])
    print(f"rewrote the layers picture in {ARCHITECTURE}")

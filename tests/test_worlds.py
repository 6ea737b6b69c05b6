"""A world is one file in ``pr1lib/worlds/``: the registry answers every question about it, no
module outside that folder tests a world's name, and a toy world registered from a temporary
module goes through data loading, the evaluation sets, the cold-start teacher and SFT's plain rows.

Run: .venv/bin/python -m pytest tests/test_worlds.py -q -p no:cacheprovider
"""

from __future__ import annotations

import ast
import importlib.util
import random
import sys

import pytest

from pr1lib import worlds
from pr1lib.config import ColdStartConfig, GRPOStageConfig
from pr1lib.data import evalsets
from pr1lib.data import sources as data
from pr1lib.store.paths import REPO_ROOT

TOY = '''
"""Toy: "What is A plus B?" (easy) or "... times C?" (hard), nothing else."""

import random

from pr1lib.format.grammar import linearize
from pr1lib.worlds.tasks import split_of
from pr1lib.worlds.teachers import RuleTeacher
from pr1lib.worlds import World, register


def generate(n, tier="easy", split="train", seed=0):
    rng, out = random.Random(f"toy/{tier}/{split}/{seed}"), []
    while len(out) < n:
        a, b, c = rng.randint(2, 40), rng.randint(2, 40), rng.randint(2, 9)
        q = f"What is {a} plus {b}" + (f" times {c}?" if tier == "hard" else "?")
        if split_of(q) != split or q in {r["question"] for r in out}:
            continue
        steps = [f"{a}+{b}=<<{a}+{b}={a + b}>>{a + b}."]
        if tier == "hard":
            steps.append(f"{a + b}*{c}=<<{a + b}*{c}={(a + b) * c}>>{(a + b) * c}.")
        final = (a + b) * c if tier == "hard" else a + b
        out.append({"question": q, "answer": "\\n".join([*steps, f"#### {final}"])})
    return out


WORLD = register(World(name="toy", title="Toy", generate=generate, rule_teacher=RuleTeacher,
                       plain_solution=lambda question, completion: linearize(completion),
                       budgets={"max_completion_length": 64}, stages={2: "easy", 3: "hard"}))
'''


@pytest.fixture
def toy(tmp_path):
    """A world defined in a module of its own, outside the package, registered by importing it."""
    path = tmp_path / "toy_world.py"
    path.write_text(TOY)
    spec = importlib.util.spec_from_file_location("toy_world", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["toy_world"] = module
    spec.loader.exec_module(module)
    yield module.WORLD
    worlds.REGISTRY.pop("toy", None)
    sys.modules.pop("toy_world", None)


def test_a_toy_world_goes_through_loading_evaluation_sets_and_the_cold_start(toy, tmp_path):
    assert worlds.find_source("toy-hard") == (toy, "hard") and "toy-easy" in data.sources()
    train = data.load_source("toy-hard", limit=20)
    test = evalsets.load_benchmark("toy-hard", n=20)
    assert {r["source"] for r in train} == {"toy-hard"} and len(test) == 20
    assert not {r["question"] for r in train} & {r["question"] for r in test}  # held out
    mixed = data.load_source("toy-easy+toy-hard", limit=6)
    assert data.source_counts(mixed) == {"toy-easy": 3, "toy-hard": 3}

    from pr1lib.data.coldstart import make_teacher, run_coldstart

    config = ColdStartConfig(source="toy-hard", limit=30, seed=0)
    traces = make_teacher(config).generate(train[:5])
    assert all("<Parallel>" in t["text"] and t["error"] is None for t in traces)
    run = run_coldstart(config, tmp_path / "cs")
    assert run.result["kept"] > 0 and set(run.dataset["source"]) == {"toy-hard"}

    from pr1lib.training.sft import with_plain_share

    plain = with_plain_share(run.dataset, 1.0)
    assert not any("<Parallel>" in c for c in plain["completion"])
    cfg = GRPOStageConfig.for_stage(2, "tiny", world="toy")
    assert (cfg.data, cfg.max_completion_length) == ("toy-easy", 64)


def test_an_unknown_world_or_source_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown world 'mars'; choose one of tinygsm, tinyworld"):
        worlds.get("mars")
    with pytest.raises(ValueError, match="unknown source 'mars-hard'"):
        data.load_source("mars-hard")
    with pytest.raises(ValueError, match="a world's name is one word"):
        worlds.register(worlds.World("a-b", "A", random.sample, None, None))


def _world_tests(path) -> list[str]:
    """Places in ``path`` that test a string against a world's name: a comparison (``==``,
    ``in``) with a literal naming a world or one of its sources, or ``startswith`` /
    ``endswith`` on one."""
    names = set(worlds.names())

    def names_a_world(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and any(node.value == n or node.value.startswith(f"{n}-") for n in names)
        )

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            literals = [node.left, *node.comparators]
            literals += [
                e
                for c in node.comparators
                if isinstance(c, (ast.Tuple, ast.List, ast.Set))
                for e in c.elts
            ]
            if any(names_a_world(x) for x in literals):
                found.append(f"{path.name}:{node.lineno}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("startswith", "endswith")
            and any(names_a_world(a) for a in node.args)
        ):
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_module_outside_the_worlds_folder_tests_a_world_name():
    outside = [p for p in (REPO_ROOT / "pr1lib").rglob("*.py") if "worlds" not in p.parts]
    assert [hit for p in outside for hit in _world_tests(p)] == []


def test_the_world_name_check_finds_a_planted_test(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('def f(s):\n    return s.startswith("tinyworld-") or s == "tinygsm"\n')
    assert _world_tests(planted) == ["planted.py:2", "planted.py:2"]


def test_a_world_says_how_its_variants_roll_out():
    """TinyWorld's seen paths must see each other (plain sampling); its unseen paths are forked as
    the recipe's; TinyGSM keeps the recipe's everywhere."""
    from pr1lib import worlds

    assert worlds.get("tinyworld").rollout("seen") == "seen"
    assert worlds.get("tinyworld").rollout("unseen") is None
    assert worlds.get("tinygsm").rollout("seen") is None

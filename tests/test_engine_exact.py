"""The rollout engine is exact: for a fixed seed it samples the token ids recorded from the engine
of commit d1c6a12 (``tests/data/engine_reference.json``), serial (``seen``), forked (``forked``,
the unseen view) and the unseen model read ``seen``, on the shipped tiny WideWorld and TinyWorld
models. A change that only moves keys faster (``pr1lib.decoding.rowcache``) must keep every
sample.

Record again (only when a change is *meant* to change samples, and say so in its commit)::

    PYTHONPATH=$PWD .venv/bin/python tests/test_engine_exact.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from _tiny import one_thread

from pr1lib import worlds
from pr1lib.config import RolloutConfig
from pr1lib.data.evalsets import load_benchmark
from pr1lib.decoding.rollout import generate
from pr1lib.evaluation.evaluate import load_for_eval
from pr1lib.format.prompts import chat_prompt
from pr1lib.store.paths import REPO_ROOT

REFERENCE = Path(__file__).parent / "data" / "engine_reference.json"
N = 6  # held-out hard problems, one batch (TinyWorld's model forks on 3 of the first 6)
CASES = {  # name: (world, model folder, rollout mode)
    "wideworld-serial": ("wideworld", "data/wideworld-serial-r1", "seen"),
    "wideworld-unseen": ("wideworld", "data/wideworld-r1", "forked"),
    "wideworld-unseen-seen": ("wideworld", "data/wideworld-r1", "seen"),
    "tinyworld-seen": ("tinyworld", "data/tinyworld-sft", "seen"),
    "tinyworld-unseen": ("tinyworld", "data/tinyworld-sft-unseen", "forked"),
}


@pytest.fixture(scope="module", autouse=True)
def _threads():
    yield from one_thread()


def samples(name: str, batch: int = N) -> list[list[int]]:
    """The completion ids of case ``name`` at seed 0, ``batch`` prompts per call."""
    world_name, folder, mode = CASES[name]
    world = worlds.get(world_name)
    model, tok = load_for_eval(REPO_ROOT / folder, "tiny", lambda *a, **k: None)
    records = load_benchmark(world.source("hard"), N, seed=0)
    prompts = [chat_prompt(r["question"], tok, "tiny") for r in records]
    cfg = RolloutConfig.for_profile("tiny", mode=mode, **world.budgets)
    gen, out = torch.Generator().manual_seed(0), []
    for i in range(0, len(prompts), batch):
        out += [r.completion_ids for r in generate(model, tok, prompts[i : i + batch], cfg, gen)]
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_the_engine_samples_the_recorded_tokens(name):
    expected = json.loads(REFERENCE.read_text())["samples"][name]
    assert samples(name) == expected


def test_one_prompt_per_call_samples_the_recorded_tokens():
    expected = json.loads(REFERENCE.read_text())["samples_batch1"]["wideworld-unseen"]
    assert samples("wideworld-unseen", batch=1) == expected


def record() -> None:
    """Write ``REFERENCE`` from the engine this checkout imports."""
    torch.set_num_threads(1)
    data = {
        "note": "token ids at seed 0; recorded from the engine of commit d1c6a12",
        "n": N,
        "samples": {name: samples(name) for name in CASES},
        "samples_batch1": {"wideworld-unseen": samples("wideworld-unseen", batch=1)},
    }
    REFERENCE.parent.mkdir(parents=True, exist_ok=True)
    REFERENCE.write_text(json.dumps(data) + "\n")
    print(f"wrote {REFERENCE}")


if __name__ == "__main__":
    record()

"""pr1lib.decoding.clock: a rollout's seconds split into phases that add up to its total; a clock
changes no sample; without one the engine calls no clock."""

from __future__ import annotations

import pytest
import torch
from _tiny import one_thread, steer, toy_model, toy_tokenizer

from pr1lib.config import RolloutConfig
from pr1lib.decoding import clock as clock_module
from pr1lib.decoding.clock import OFF, PARTS, STEPS, Clock
from pr1lib.decoding.rollout import generate
from pr1lib.decoding.structure import tag_ids

TOK = toy_tokenizer()
T = tag_ids(TOK)
PROMPTS = ["Q: 2+3?\n", "Q: a longer question here?\n", "Hi"]
CFG = RolloutConfig(max_completion_length=60, max_path_length=16, num_paths=3)


@pytest.fixture(scope="module", autouse=True)
def _threads():
    yield from one_thread()


@pytest.fixture(scope="module")
def steered():
    """Forks early, closes paths and summaries after a few tokens."""
    biases = {T.parallel: 4.0, T.end_path: 2.5, T.end_summary: 2.0, TOK.eos_token_id: 0.5}
    return steer(toy_model(len(TOK), seed=1), biases)


def run(model, clock=None, mode="forked"):
    gen = torch.Generator().manual_seed(0)
    return generate(model, TOK, PROMPTS, CFG, generator=gen, clock=clock, mode=mode)


@pytest.mark.parametrize("mode", ["forked", "seen"])
def test_parts_add_up_to_the_total_and_every_part_is_reported(steered, mode):
    c = Clock()
    run(steered, c, mode)
    out = c.per_answer()
    assert set(out["seconds"]) == set(PARTS) and set(out["steps"]) == set(STEPS)
    assert c.answers == len(PROMPTS)
    assert sum(c.seconds.values()) == pytest.approx(c.total, rel=1e-9)
    assert c.seconds["other"] >= -1e-6 and c.seconds["prefill"] > 0 and c.seconds["sample"] > 0
    if mode == "forked":  # paths were decoded, forked and merged
        assert c.steps["step_k"] > 0 and c.seconds["fork"] > 0 and c.seconds["merge"] > 0
    else:  # one row per answer, never a path row
        assert c.steps["step_k"] == 0 and c.seconds["fork"] == c.seconds["merge"] == 0


def test_clock_changes_no_sample_and_off_calls_no_clock(steered, monkeypatch):
    timed = run(steered, Clock())
    calls = []
    monkeypatch.setattr(clock_module.time, "perf_counter", lambda: calls.append(1) or 0.0)
    plain = run(steered)
    assert [r.completion_ids for r in timed] == [r.completion_ids for r in plain]
    assert [r.logprobs for r in timed] == [r.logprobs for r in plain]
    assert calls == [] and OFF.on is False

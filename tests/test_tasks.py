"""TinyGSM generator: determinism, GSM8K shape, correct arithmetic, disjoint splits."""

from __future__ import annotations

import re

import pytest
from conftest import MISSING_DATA
from hypothesis import given, settings
from hypothesis import strategies as st

from pr1lib.format.prompts import linear_solution, split_gsm8k_answer
from pr1lib.store.paths import shared_data_dir
from pr1lib.worlds.tasks import SPECS, TIERS, generate, split_of

ANNOTATION = re.compile(r"<<([^=<>]+)=([^<>]+)>>(\S+)")
OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
}


def check_annotation(expr: str, claimed: str) -> bool:
    """``a OP b`` evaluated exactly equals ``claimed`` (TinyGSM annotations have one operator)."""
    a, op, b = re.fullmatch(r"(\d+)([-+*/])(\d+)", expr).groups()
    return OPS[op](int(a), int(b)) == int(claimed)


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("split", ["train", "test"])
def test_same_seed_same_records_other_seed_other_records(tier, split):
    first = generate(30, tier, split, seed=3)
    assert first == generate(30, tier, split, seed=3)
    assert first != generate(30, tier, split, seed=4)
    assert generate(10, tier, split, seed=3) == first[:10]  # a prefix: n does not change the stream


@pytest.mark.parametrize("tier", TIERS)
def test_records_have_gsm8k_shape_and_step_counts(tier):
    low, high = SPECS[tier].steps
    for record in generate(300, tier, "train", seed=1):
        assert set(record) == {"question", "answer"}
        assert record["question"].endswith("?")
        steps, final = split_gsm8k_answer(record["answer"])
        assert low <= len(steps) <= high
        assert all(line.count("<<") == 1 for line in steps)  # one calculator annotation per step
        assert re.fullmatch(r"\d+", final)
        assert linear_solution(record["answer"]).endswith(f"Final Answer: {final}")


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), tier=st.sampled_from(TIERS))
def test_every_annotation_is_correct_and_chains_to_the_final_answer(seed, tier):
    for record in generate(5, tier, "train", seed):
        steps, final = split_gsm8k_answer(record["answer"])
        results = []
        for line in steps:
            expr, claimed, shown = ANNOTATION.search(line).groups()
            assert check_annotation(expr, claimed), line
            assert shown.rstrip(".") == claimed  # the text after >> repeats the result
            results.append(claimed)
        assert results[-1] == final


@pytest.mark.parametrize("tier", TIERS)
def test_train_and_test_never_share_a_question(tier):
    train = {r["question"] for seed in range(3) for r in generate(1500, tier, "train", seed)}
    test = {r["question"] for r in generate(500, tier, "test", seed=0)}
    assert not train & test
    assert {split_of(q) for q in train} == {"train"} and {split_of(q) for q in test} == {"test"}


def test_questions_are_distinct_within_a_call_and_the_tiers_differ():
    easy, hard = generate(400, "easy", "test"), generate(400, "hard", "test")
    assert len({r["question"] for r in easy}) == 400
    easy_steps = [len(split_gsm8k_answer(r["answer"])[0]) for r in easy]
    hard_steps = [len(split_gsm8k_answer(r["answer"])[0]) for r in hard]
    assert max(easy_steps) < min(hard_steps)
    assert max(int(split_gsm8k_answer(r["answer"])[1]) for r in hard) > 200  # larger numbers


def test_bad_tier_or_split_is_a_clear_error():
    with pytest.raises(ValueError, match="tier"):
        generate(1, "medium")
    with pytest.raises(ValueError, match="split"):
        generate(1, "easy", "validation")


def test_real_gsm8k_reads_through_the_same_parser():
    root = shared_data_dir()
    path = root / "gsm8k" / "test.jsonl" if root else None
    if path is None or not path.exists():
        pytest.skip(f"{MISSING_DATA} gsm8k/test.jsonl")
    import json

    real = [json.loads(line) for line in path.read_text().splitlines()[:50]]
    tiny = generate(50, "easy", "test")
    for record in real + tiny:
        assert set(record) == {"question", "answer"}
        steps, final = split_gsm8k_answer(record["answer"])
        assert steps and final

"""pr1lib.format.grammar on the 341 real teacher traces of the official repo's Parallel-GSM8K v2
subset.

Measured (2026-11-30): official checker 341/341 valid, strict grammar 338/341 valid, and the
extracted answer matches the record's ``answer`` in 341/341. The three strict failures are
genuine format slips, pinned below by index: text between ``<Parallel>`` and a path (88),
text between ``</Parallel>`` and ``<Summary>`` (125), and a ``<Summary>`` never closed (327).

Run: .venv/bin/python -m pytest tests/test_real_traces.py -q -s   (``-s`` shows the counts)
"""

from __future__ import annotations

import json

import pytest
from conftest import MISSING_DATA

from pr1lib.format.grammar import answers_match, extract_answer, parallel_stats, parse, validate
from pr1lib.store.paths import shared_data_dir

SUBSET = "parallel_gsm8k/parallel_gsm8k_v2_subset.jsonl"


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    root = shared_data_dir()
    if root is None or not (root / SUBSET).is_file():
        pytest.skip(f"{MISSING_DATA} {SUBSET}")
    with open(root / SUBSET, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_every_trace_parses_and_counts_are_stable(rows):
    official = [not validate(r["response"], strict=False) for r in rows]
    strict = [not validate(r["response"], strict=True) for r in rows]
    print(f"\n{len(rows)} traces: official valid {sum(official)}, strict valid {sum(strict)}")
    assert len(rows) == 341
    assert all(isinstance(parse(r["response"]).parts, list) for r in rows)
    assert sum(official) == 341  # every teacher trace passes the paper's own checker
    assert sum(strict) >= 338  # measured floor; strict is never looser than official
    assert all(o or not s for o, s in zip(official, strict))


def test_strict_failures_are_the_known_slips(rows):
    failures = {i: validate(r["response"]) for i, r in enumerate(rows) if validate(r["response"])}
    assert set(failures) == {88, 125, 327}
    assert "whitespace" in failures[88][0]  # "First, <Path>..." inside the block
    assert "right after </Parallel>" in failures[125][0]  # prose before <Summary>
    assert failures[327] == [failures[327][0]] and "unclosed <Summary>" in failures[327][0]


def test_answers_of_valid_traces_match_the_record(rows):
    valid = [r for r in rows if not validate(r["response"])]
    matched = sum(answers_match(extract_answer(r["response"]), r["answer"]) for r in rows)
    print(f"\nanswers matching the record: {matched}/{len(rows)}")
    assert all(answers_match(extract_answer(r["response"]), r["answer"]) for r in valid)
    assert matched == len(rows)  # also true for the three strict failures


def test_stats_on_real_traces(rows):
    stats = [parallel_stats(r["response"]) for r in rows]
    with_blocks = [s for s in stats if s["blocks"]]
    print(f"\nwith a block: {len(with_blocks)}; blocks in all: {sum(s['blocks'] for s in stats)}")
    assert len(with_blocks) == 338  # the data README: 338 of the 341 contain <Parallel>
    assert all(0 <= s["first_block_position"] < 1 for s in with_blocks)
    assert all(min(s["paths_per_block"]) >= 2 for s in with_blocks if s["valid"])

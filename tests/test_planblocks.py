"""``study plans`` (pr1lib/experiments/planblocks.py): can a PlanWorld model carry out a plan it
was handed? Reach, paths that found the answer, and the shipped cold start within its widths."""

from __future__ import annotations

import pytest

from pr1lib.experiments.planblocks import forced_plan, path_found, reach
from pr1lib.format.plans import LETTERS
from pr1lib.worlds import planworld

SHIPPED = "data/planworld-sft-unseen"  # plans of 2 or 3 deals


def test_reach_is_whether_the_answer_lies_in_the_first_deals():
    for record in planworld.generate(40, "hard", "test", seed=1):
        at = LETTERS.index(record["answer"][-1])
        assert [reach(record["question"], w) for w in (at, at + 1)] == [False, True]


@pytest.mark.parametrize(
    "text, found",
    [
        ("<Parallel><Path>(A) 1+2=3 vs 3 ✓ A</Path></Parallel>\n<Summary>B</Summary>", True),
        ("<Parallel><Path>(A) 1+2=3 vs 4 ✗</Path></Parallel>\n<Summary>A</Summary>", False),
        ("(A) 1+2=3 vs 3 ✓ A\nFinal Answer: A", False),  # no block: no path found it
    ],
)
def test_path_found_reads_the_first_blocks_paths_only(text, found):
    assert path_found(text, "A") is found


@pytest.fixture(scope="module")
def shipped():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(SHIPPED).eval(), AutoTokenizer.from_pretrained(
        SHIPPED
    )


def test_the_cold_start_carries_out_a_plan_of_its_own_width_and_not_a_wide_one(shipped):
    three, ten = (forced_plan(*shipped, w, n=30) for w in (3, 10))
    assert ten["reach"] == 1.0 and 0 < three["reach"] < 1
    assert three["found"] >= 0.8 * three["reach"] and three["split_rate"] >= 0.8
    assert ten["accuracy"] <= 0.3 * ten["reach"] and ten["split_rate"] <= 0.2

"""``study plans`` (pr1lib/experiments/planblocks.py): can a PlanWorld model carry out a plan it
was handed? Reach, paths that found the answer, and the shipped cold start within its widths."""

from __future__ import annotations

import pytest

from pr1lib.experiments.planblocks import forced_plan, path_found, reach
from pr1lib.format.plans import LETTERS
from pr1lib.worlds import planworld

SHIPPED = "data/planworld-sft-unseen"  # plans of 2 or 3 deals, hidden from its paths


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


def test_the_cold_start_carries_out_its_own_width_and_a_wide_block_loses_what_its_paths_find(
    shipped,
):
    """Trained with hidden plans (regime 9): a plan of three works; at ten deals its paths still
    find most answers, but the block does not split and its summary loses most of them."""
    from pr1lib.training.runs import recorded_hide_plan

    assert recorded_hide_plan(SHIPPED)
    three, ten = (forced_plan(*shipped, w, n=30, hide_plan=True) for w in (3, 10))
    assert ten["reach"] == 1.0 and 0 < three["reach"] < 1
    assert three["found"] >= 0.8 * three["reach"] and three["split_rate"] >= 0.7
    assert ten["found"] >= 0.5 and ten["accuracy"] <= 0.5 * ten["found"]
    assert ten["split_rate"] <= 0.2

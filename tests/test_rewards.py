"""Rewards: values on named cases, the alternating schedule, composition, and the hacking lab.

Run alone: .venv/bin/python -m pytest tests/test_rewards.py -q
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pr1lib.format.grammar import TAGS
from pr1lib.rewards import functions as R
from pr1lib.rewards import hacking as H
from pr1lib.rewards import modes as M

BLOCK = "<Parallel><Path>6+6=12</Path><Path>2*6=12</Path></Parallel>\n<Summary>12</Summary>\n"
PARALLEL_OK = BLOCK + "Final Answer: 12"
LINEAR_OK = "2*6=12\nFinal Answer: 12"
PARALLEL_WRONG = BLOCK + "Final Answer: 13"
LINEAR_WRONG = "Final Answer: 13"
ONE_PATH = "<Parallel><Path>6+6=12</Path></Parallel>\n<Summary>12</Summary>\nFinal Answer: 12"
NO_ANSWER = BLOCK
STEP = lambda n: SimpleNamespace(global_step=n)  # noqa: E731

# (completion, accuracy, parallel_correct, tiered, structure), gold "12"
VALUES = {
    "parallel, correct": (PARALLEL_OK, 1.0, 1.0, 1.2, 1.0),
    "linear, correct": (LINEAR_OK, 1.0, -1.0, 1.0, -1.0),
    "parallel, wrong": (PARALLEL_WRONG, -1.0, -1.0, -1.0, 1.0),
    "linear, wrong": (LINEAR_WRONG, -1.0, -1.0, -1.0, -1.0),
    "one-path block, correct": (ONE_PATH, 1.0, -1.0, -1.0, -1.0),
    "valid block, no answer": (NO_ANSWER, -1.0, -1.0, -1.0, 1.0),
    "empty completion": ("", -1.0, -1.0, -1.0, -1.0),
}
FUNCS = (R.accuracy_reward, R.parallel_correct_reward, R.tiered_reward, R.structure_reward)


@pytest.mark.parametrize("case", VALUES, ids=list(VALUES))
@pytest.mark.parametrize("col", range(4), ids=[f.__name__ for f in FUNCS])
def test_reward_values(case, col):
    completion, *expected = VALUES[case]
    assert FUNCS[col]([completion], ["12"]) == [expected[col]]


@pytest.mark.parametrize("gold", ["12", 12, 12.0, " 12 ", "1\n2*6=<<2*6=12>>12\n#### 12"])
def test_gold_answers_may_be_numbers_or_gsm8k_solutions(gold):
    assert R.tiered_reward([PARALLEL_OK, LINEAR_OK], [gold, gold]) == [1.2, 1.0]


def test_conversational_completions_score_like_strings():
    chat = [
        [{"role": "assistant", "content": PARALLEL_OK}],
        [{"role": "assistant", "content": [{"type": "text", "text": LINEAR_OK}]}],
    ]
    assert R.tiered_reward(chat, ["12", "12"]) == [1.2, 1.0]


def test_trl_call_with_all_its_kwargs():
    """The exact keyword set TRL 1.16's _calculate_rewards passes (dataset columns included)."""
    metrics = {}
    kwargs = dict(
        prompts=["p", "p"],
        completions=[PARALLEL_OK, LINEAR_WRONG],
        completion_ids=[[1], [2]],
        answer=["12", "12"],
        question=["q", "q"],
        trainer_state=STEP(9),
        log_extra=lambda col, vals: None,
        log_metric=lambda k, v: metrics.__setitem__(k, v),
    )
    for fn in (
        *FUNCS,
        R.alternating_reward(),
        M.combine({R.accuracy_reward: 1, R.structure_reward: 1}),
    ):
        assert len(fn(**kwargs)) == 2
    assert metrics == {"reward_mode/tiered": 1.0}


def test_bad_batches_fail_loudly():
    with pytest.raises(ValueError, match="2 completions but 1 answers"):
        R.accuracy_reward(["a", "b"], ["12"])
    with pytest.raises(TypeError, match="one gold answer per completion"):
        R.accuracy_reward(["Final Answer: 12"], "12")
    with pytest.raises(ValueError, match="unknown reward mode"):
        R.score(PARALLEL_OK, "12", "parallel")


# ---------------------------------------------------------------- alternating schedule
def test_schedule_is_the_papers_one_based_steps_9_10_19_20():
    modes = R.schedule(40)
    tiered = [s for s, m in enumerate(modes) if m == "tiered"]
    assert tiered == [8, 9, 18, 19, 28, 29, 38, 39]
    assert [s + 1 for s in tiered][:4] == [9, 10, 19, 20]  # paper's 1-based numbering
    assert modes.count("accuracy") == 32


@pytest.mark.parametrize(
    "window, parallel, expected",
    [
        (10, 2, "aaaaaaaatt"),
        (5, 1, "aaaat"),
        (4, 0, "aaaa"),
        (3, 3, "ttt"),
        (1, 1, "t"),
    ],
)
def test_schedule_shapes(window, parallel, expected):
    assert "".join(m[0] for m in R.schedule(len(expected), window, parallel)) == expected


@pytest.mark.parametrize("window, parallel", [(0, 0), (5, 6), (5, -1)])
def test_schedule_rejects_bad_windows(window, parallel):
    with pytest.raises(ValueError, match="window"):
        R.alternating_reward(window, parallel)


@pytest.mark.parametrize(
    "step, mode, scores",
    [
        (0, "accuracy", [1.0, 1.0, 1.0, -1.0]),
        (7, "accuracy", [1.0, 1.0, 1.0, -1.0]),
        (8, "tiered", [1.2, 1.0, -1.0, -1.0]),
        (19, "tiered", [1.2, 1.0, -1.0, -1.0]),
        (20, "accuracy", [1.0, 1.0, 1.0, -1.0]),
    ],
)
def test_alternating_switches_reward_and_reports_mode(step, mode, scores):
    reward = R.alternating_reward()
    logged = []
    out = reward(
        [PARALLEL_OK, LINEAR_OK, ONE_PATH, LINEAR_WRONG],
        ["12"] * 4,
        trainer_state=STEP(step),
        log_metric=lambda k, v: logged.append((k, v)),
    )
    assert out == scores
    assert (reward.last_mode, reward.last_step) == (mode, step)
    assert logged == [("reward_mode/tiered", 1.0 if mode == "tiered" else 0.0)]


def test_alternating_without_trainer_state_is_an_error_not_accuracy():
    with pytest.raises(ValueError, match="trainer_state"):
        R.alternating_reward()([LINEAR_OK], ["12"])


def test_alternating_reads_a_real_trainer_state_and_trl_names_it():
    transformers = pytest.importorskip("transformers")
    from trl.trainer.utils import get_callable_name

    reward = R.alternating_reward()
    assert reward(
        [PARALLEL_OK], ["12"], trainer_state=transformers.TrainerState(global_step=9)
    ) == [1.2]
    assert get_callable_name(reward) == "alternating_reward"
    assert get_callable_name(M.combine({R.accuracy_reward: 1}, name="acc_plus")) == "acc_plus"
    assert get_callable_name(R.tiered_reward) == "tiered_reward"


def test_reward_for_widget_modes():
    assert M.reward_for("tiered") is R.tiered_reward
    alt = M.reward_for("alternating", window=4, parallel_steps=1)
    assert (alt.window, alt.parallel_steps) == (4, 1)
    with pytest.raises(ValueError, match="alternating"):
        M.reward_for("format")


# ---------------------------------------------------------------- composition
def test_combine_weights_and_ranges():
    both = M.combine({R.accuracy_reward: 1.0, R.structure_reward: 0.5})
    four = [PARALLEL_OK, LINEAR_OK, PARALLEL_WRONG, LINEAR_WRONG]
    assert both(four, answer=["12"] * 4) == [1.5, 0.5, -0.5, -1.5]
    assert M.reward_range(both) == (-1.5, 1.5)
    penalty = M.combine([(R.tiered_reward, 1.0), (R.structure_reward, -0.5)])
    assert M.reward_range(penalty) == (-1.5, 1.7)


def test_combine_with_alternating_follows_the_step():
    mixed = M.combine({R.alternating_reward(): 1.0, R.structure_reward: 1.0})
    assert mixed([PARALLEL_OK], answer=["12"], trainer_state=STEP(9)) == [2.2]
    assert mixed([PARALLEL_OK], answer=["12"], trainer_state=STEP(0)) == [2.0]
    assert M.reward_range(mixed, 9) == (-2.0, 2.2) and M.reward_range(mixed, 0) == (-2.0, 2.0)


def test_combine_skips_none_like_trl():
    only_first = lambda completions, **kw: [1.0, None]  # noqa: E731
    never = lambda completions, **kw: [None, None]  # noqa: E731
    assert M.combine({only_first: 2.0, never: 1.0})(["a", "b"]) == [2.0, None]


# ---------------------------------------------------------------- invariants
fragments = st.sampled_from(
    [*TAGS, "6+6=12", " ", "\n", "Final Answer: 12", "Final Answer: 13", "x"]
)


@settings(max_examples=60, deadline=None)
@given(st.lists(fragments, max_size=12).map("".join))
def test_reward_identities(text):
    acc, par, tier, struct = (fn([text], ["12"])[0] for fn in FUNCS)
    assert par == min(acc, struct)  # parallel_correct = accuracy AND structure
    assert tier in (-1.0, 1.0, 1.2) and (tier > 0) <= (acc > 0)
    assert (tier == 1.2) == (par == 1.0)


# ---------------------------------------------------------------- reward-hacking lab
# Pinned by hand: (accuracy, parallel_correct, tiered, structure); the reference is
# honest_parallel.
HACKS = {
    "honest_parallel": (1.0, 1.0, 1.2, 1.0),
    "honest_linear": (1.0, -1.0, 1.0, -1.0),
    "nested_blocks": (1.0, -1.0, -1.0, -1.0),
    "repeated_blocks": (1.0, 1.0, 1.2, 1.0),  # tie: the reward does not grow with block count
    "empty_paths": (1.0, -1.0, -1.0, -1.0),
    "identical_paths": (1.0, 1.0, 1.2, 1.0),  # tie: nothing here measures path diversity
    "summary_without_paths": (1.0, -1.0, -1.0, -1.0),
    "answer_only_in_path": (-1.0, -1.0, -1.0, 1.0),
    "several_final_answers": (-1.0, -1.0, -1.0, 1.0),
    "candidates_in_one_line": (-1.0, -1.0, -1.0, 1.0),
    "hedged_candidates": (-1.0, -1.0, -1.0, 1.0),  # prose before the numbers: no answer at all
    "boxed_candidates": (-1.0, -1.0, -1.0, 1.0),
    "tags_in_final_line": (-1.0, -1.0, -1.0, -1.0),
    "correct_after_malformed_block": (1.0, -1.0, -1.0, -1.0),
    "truncated_block": (-1.0, -1.0, -1.0, -1.0),
    "path_outside_block": (1.0, -1.0, -1.0, -1.0),
    "unclosed_summary": (1.0, -1.0, -1.0, -1.0),
    "block_after_answer": (1.0, 1.0, 1.2, 1.0),  # tie: a bolted-on block is still a valid block
}
KNOWN_FORMAT_BUGS: dict[str, str] = {}  # case -> why it currently scores differently
ROWS = {row["name"]: row for row in H.hacking_table()}
PARALLEL_AWARE = ("parallel_correct", "tiered", "structure")


def test_every_case_is_pinned_and_named_once():
    names = [c["name"] for c in H.HACKING_CASES]
    assert sorted(names) == sorted(HACKS) and len(set(names)) == len(names)
    assert all(c["why"] and c["answer"] == "12" for c in H.HACKING_CASES)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_FORMAT_BUGS[n]))
        if n in KNOWN_FORMAT_BUGS
        else n
        for n in HACKS
    ],
)
def test_hacking_case_scores(name):
    row = ROWS[name]
    assert tuple(row[m] for m in R.BASE_MODES) == HACKS[name]


@pytest.mark.parametrize("mode", PARALLEL_AWARE)
def test_no_hack_outscores_the_honest_parallel_answer(mode):
    best = ROWS["honest_parallel"][mode]
    assert all(row[mode] <= best for row in ROWS.values()), mode


def test_accuracy_ignores_tags_so_correct_hacks_tie():
    """accuracy_reward is expected to tie the reference on every case whose last answer is 12."""
    ties = {
        name for name, row in ROWS.items() if row["accuracy"] == ROWS["honest_parallel"]["accuracy"]
    }
    expected = {name for name, pinned in HACKS.items() if pinned[0] == 1.0}
    assert ties - set(KNOWN_FORMAT_BUGS) == expected


def test_tiered_puts_malformed_correct_answers_below_honest_linear():
    for name in (
        "nested_blocks",
        "empty_paths",
        "summary_without_paths",
        "correct_after_malformed_block",
        "path_outside_block",
        "unclosed_summary",
    ):
        assert (
            ROWS[name]["tiered"]
            < ROWS["honest_linear"]["tiered"]
            < ROWS["honest_parallel"]["tiered"]
        )


def test_the_tiered_bonus_b_reaches_every_tiered_reward():
    """b = 0.5: a correct answer with a block scores 1.5 in the tiered mode, on the alternating
    reward's tiered steps, under either grader and through a GRPO config; others are unchanged."""
    from types import SimpleNamespace

    from pr1lib.config import GRPOStageConfig
    from pr1lib.rewards.modes import reward_for
    from pr1lib.training.grpo_trainer import reward_funcs

    block = (
        "<Parallel><Path>6+6=12</Path><Path>2*6=12</Path></Parallel>"
        "<Summary>12</Summary>\nFinal Answer: 12"
    )
    texts, golds = [block, "Final Answer: 12", "Final Answer: 13"], ["12"] * 3
    for grader in ("project", "official"):
        assert reward_for("tiered", grader=grader, bonus=0.5)(texts, golds) == [1.5, 1.0, -1.0]
    alt = reward_for("alternating", 10, 2, bonus=0.5)
    assert alt(texts, golds, trainer_state=SimpleNamespace(global_step=9)) == [1.5, 1.0, -1.0]
    assert alt(texts, golds, trainer_state=SimpleNamespace(global_step=0)) == [1.0, 1.0, -1.0]
    assert alt.range_at(9) == (-1.0, 1.5)
    cfg = GRPOStageConfig.for_stage(3, "smoke", reward="tiered", tiered_bonus=0.0)
    assert reward_funcs(cfg)[0](texts, golds) == [1.0, 1.0, -1.0]  # b = 0: a block earns nothing
    with pytest.raises(ValueError, match="must be >= 0"):
        reward_for("tiered", bonus=-0.1)

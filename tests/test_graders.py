"""The grader registry: a parity table pinning the official semantics, the real teacher traces,
hedges.

Each row of ``PARITY`` is one named case with the official reward code's verdict (checked by hand
against ``verl/verl/utils/reward_score/{math_dapo,gsm8k_add_special_token_reward,
math_dapo_emphase_parallel,math_dapo_accuracy_times_parallel}.py`` of zhengkid/Parallel-R1) and this
project's. Run alone: .venv/bin/python -m pytest tests/test_graders.py -q
"""

from __future__ import annotations

import json

import pytest

from pr1lib.config import DEFAULT_GRADERS
from pr1lib.rewards import functions as R
from pr1lib.rewards import graders as G
from pr1lib.rewards import hacking as H
from pr1lib.rewards import modes as M
from pr1lib.store.paths import shared_data_dir

BLOCK = "<Parallel><Path>3*4=12</Path><Path>4+4+4=12</Path></Parallel>\n<Summary>12</Summary>\n"
EMPTY_PATH = (
    "<Parallel><Path></Path><Path>3*4=12</Path></Parallel>\n<Summary>12</Summary>\nFinal Answer: 12"
)
TEXT_BETWEEN = (
    "<Parallel><Path>3*4=12</Path> and also <Path>4+4+4=12</Path></Parallel>\n"
    "<Summary>12</Summary>\nFinal Answer: 12"
)
DAPO, GSM = "aime25", "gsm8k"  # data sources: the math_dapo style and the GSM8K style


def measure(grader: str, how: str, source: str, completion: str, gold: str):
    """``correct`` = the rewards' answer check, ``eval`` = evaluation's (reads a lone box), else a
    reward mode's value."""
    if how == "correct":
        return G.GRADERS[grader].correct(completion, gold, source)
    if how == "eval":
        return G.check(source, completion, gold)[grader]
    return R.score(completion, gold, how, grader=grader, source=source)


# (case, source, completion, gold, measure, official, project)
PARITY = [
    # dollars and cents: Minerva keeps "21.00", exact string compare fails; the project compares
    # values
    ("dollars_and_cents", DAPO, "Final Answer: $21.00", "21", "correct", False, True),
    # trailing zeros: "36.00" != "36" as strings
    ("trailing_zeros", DAPO, "Final Answer: 36.00", "36", "correct", False, True),
    # a leading zero: normalisation does not strip it ("02" != "2")
    ("leading_zero", DAPO, "Final Answer: 02", "2", "correct", False, True),
    # a unit word that is not on Minerva's list stays glued to the number ("12pets")
    ("unit_word_dapo", DAPO, "Final Answer: 12 pets", "12", "correct", False, True),
    # ... but the GSM8K regex stops at the first non-digit, so the number alone is compared
    ("unit_word_gsm8k", GSM, "Final Answer: 12 pets", "12", "correct", True, True),
    # an expression: no evaluation in the official check; math-verify computes 6*2
    ("expression", DAPO, "Final Answer: 6*2", "12", "correct", False, True),
    # ... and the GSM8K regex reads "6"
    ("expression_gsm8k", GSM, "Final Answer: 6*2", "12", "correct", False, True),
    # the value on the next line: "\s*" after the colon crosses the newline, in both styles
    ("next_line_dapo", DAPO, "Final Answer:\n12", "12", "correct", True, True),
    ("next_line_gsm8k", GSM, "Final Answer:\n12", "12", "correct", True, True),
    # ... which makes an empty marker line swallow the next marker as its value (a quirk)
    (
        "empty_marker_then_marker",
        DAPO,
        "Final Answer:\nFinal Answer: 12",
        "12",
        "correct",
        False,
        True,
    ),
    # a hedge with prose first: normalised "Theansweris12or11"; no number right after the colon
    (
        "hedge_prose_dapo",
        DAPO,
        "Final Answer: The answer is 12 or 11",
        "12",
        "correct",
        False,
        False,
    ),
    (
        "hedge_prose_gsm8k",
        GSM,
        "Final Answer: The answer is 12 or 11",
        "12",
        "correct",
        False,
        False,
    ),
    # a hedge with the right number first: the GSM8K regex reads "12" (a hole the official code has)
    ("hedge_first_gsm8k", GSM, "Final Answer: 12 or 11", "12", "correct", True, False),
    ("hedge_first_dapo", DAPO, "Final Answer: 12 or 11", "12", "correct", False, False),
    # a number then words: a unit to both ("12 pets"), but "or" makes the project's tail a hedge
    ("hedge_word_gsm8k", GSM, "Final Answer: 12 or eleven", "12", "correct", True, False),
    # a dollar sign: "[-]?[0-9.,]+" cannot start at "$", so there is no answer (46 of 341 real
    # traces)
    ("dollar_gsm8k", GSM, "Final Answer: $4", "4", "correct", False, True),
    # a full stop: "4." != "4" as strings
    ("full_stop_gsm8k", GSM, "Final Answer: 4.", "4", "correct", False, True),
    # thousands separators: both drop the commas
    ("thousands_gsm8k", GSM, "Final Answer: 1,000", "1000", "correct", True, True),
    # lower case: the DAPO pattern is case-insensitive, the GSM8K one is not
    ("lower_case_dapo", DAPO, "final answer: 12", "12", "correct", True, True),
    ("lower_case_gsm8k", GSM, "final answer: 12", "12", "correct", False, True),
    # first or last: the GSM8K reward takes the first match, the DAPO one and the project the last
    ("first_of_two_gsm8k", GSM, "Final Answer: 12\nFinal Answer: 13", "12", "correct", True, False),
    (
        "first_of_two_dapo",
        DAPO,
        "Final Answer: 12\nFinal Answer: 13",
        "12",
        "correct",
        False,
        False,
    ),
    # outside the last 300 characters: math_dapo.py never sees it; the GSM8K reward reads everything
    ("outside_last_300_dapo", DAPO, "Final Answer: 12\n" + "x" * 300, "12", "correct", False, True),
    ("outside_last_300_gsm8k", GSM, "Final Answer: 12\n" + "x" * 300, "12", "correct", True, True),
    # a box in the answer line: Minerva unwraps \boxed{}; the project unwraps a lone box
    ("boxed_in_line", DAPO, "Final Answer: \\boxed{12}", "12", "correct", True, True),
    # a box and no answer line: never for the official check; the project reads it in evaluation
    # only
    ("boxed_only_reward", DAPO, "so the answer is \\boxed{12}.", "12", "correct", False, False),
    ("boxed_only_eval", DAPO, "so the answer is \\boxed{12}.", "12", "eval", False, True),
    # the answer only inside a path: tags are stripped, so the official check reads it (glued to
    # the next path's text: "124+4+4=12" -> split on "=" -> "12"); the project ignores path text
    (
        "answer_only_in_path",
        DAPO,
        "<Parallel><Path>3*4=12\nFinal Answer: 12</Path><Path>4+4+4=12</Path>"
        "</Parallel>\n<Summary>Both paths agree.</Summary>",
        "12",
        "correct",
        True,
        False,
    ),
    # an empty path: the official checker counts closed paths, not their content
    ("empty_path_tiered", DAPO, EMPTY_PATH, "12", "tiered", 1.2, -1.0),
    ("empty_path_parallel_correct", DAPO, EMPTY_PATH, "12", "parallel_correct", 1.0, -1.0),
    # text between paths: the official checker only sees the tags
    ("text_between_paths_tiered", DAPO, TEXT_BETWEEN, "12", "tiered", 1.2, -1.0),
    (
        "text_between_paths_parallel_correct",
        DAPO,
        TEXT_BETWEEN,
        "12",
        "parallel_correct",
        1.0,
        -1.0,
    ),
    # a broken tag and no <Parallel>: the official tiered reward checks the format only with a block
    (
        "stray_close_no_block_tiered",
        DAPO,
        "3*4=12 </Path>\nFinal Answer: 12",
        "12",
        "tiered",
        1.0,
        -1.0,
    ),
    # a one-path block: both checkers refuse it, so a correct answer cannot buy back broken tags
    (
        "one_path_block_tiered",
        DAPO,
        "<Parallel><Path>12</Path></Parallel>\n<Summary>12</Summary>\nFinal Answer: 12",
        "12",
        "tiered",
        -1.0,
        -1.0,
    ),
    # the reference: an honest block and a correct answer
    ("honest_parallel_tiered", DAPO, BLOCK + "Final Answer: 12", "12", "tiered", 1.2, 1.2),
]


@pytest.mark.parametrize(
    "case, source, completion, gold, how, official, project", PARITY, ids=[row[0] for row in PARITY]
)
def test_parity(case, source, completion, gold, how, official, project):
    assert measure("official", how, source, completion, gold) == official, "official"
    assert measure("project", how, source, completion, gold) == project, "project"


def test_parity_cases_are_named_once():
    names = [row[0] for row in PARITY]
    assert len(names) == len(set(names))


# ----------------------------------------------------------------------------- the registry
def test_registry_names_and_stage_defaults():
    assert set(G.GRADERS) == {"official", "project", "checked", "honest"}
    assert DEFAULT_GRADERS == {"stage2": "project", "stage3": "project", "eval": "official"}
    assert [G.default_grader(s) for s in (2, 3, "eval")] == ["project", "project", "official"]
    with pytest.raises(
        ValueError, match="unknown grader 'strict'; choose one of official, project, checked"
    ):
        G.get_grader("strict")


@pytest.mark.parametrize(
    "source, style",
    [
        ("gsm8k", "gsm8k"),
        ("tinygsm-easy", "gsm8k"),
        ("tinygsm-hard", "gsm8k"),
        ("TongZheng1999/Deepseek-Qwen-3-8B-GSM8k-Parallel-data", "gsm8k"),
        ("pr1/gsm8k", "gsm8k"),
        ("dapo", "dapo"),
        ("math500", "dapo"),
        ("aime24", "dapo"),
        ("amc23", "dapo"),
        (None, "dapo"),
        (7, "dapo"),
    ],
)
def test_answer_style_per_source(source, style):
    assert G.answer_style(source) == style


def test_rewards_pick_the_style_from_trls_data_source_column():
    done = ["Final Answer: $4", "Final Answer: $4"]
    assert R.accuracy_reward(
        done, ["4", "4"], grader="official", data_source=["gsm8k", "math500"]
    ) == [-1.0, 1.0]
    # project
    assert R.accuracy_reward(done, ["4", "4"], data_source=["gsm8k", "math500"]) == [1.0, 1.0]


def test_reward_for_binds_the_grader_and_keeps_trls_name():
    official = M.reward_for("tiered", grader="official")
    assert official.__name__ == "tiered_reward" and official.reward_range == (-1.0, 1.2)
    assert official([EMPTY_PATH], ["12"]) == [1.2] and M.reward_for("tiered")(
        [EMPTY_PATH], ["12"]
    ) == [-1.0]
    alternating = M.reward_for("alternating", grader="official")
    assert alternating.grader == "official"


def test_grpo_rewards_follow_the_config_grader():
    from pr1lib.config import GRPOStageConfig
    from pr1lib.training.grpo_trainer import reward_funcs

    main, *_ = reward_funcs(GRPOStageConfig(stage=2, reward="tiered"))
    assert main([EMPTY_PATH], ["12"]) == [-1.0]  # Stage 2's default: the project grader
    main, *_ = reward_funcs(GRPOStageConfig(stage=2, reward="tiered", grader="official"))
    assert main([EMPTY_PATH], ["12"]) == [1.2]


# ----------------------------------------------------------------------------- the hedge
@pytest.mark.parametrize("grader", list(G.GRADERS))
def test_every_answer_reward_refuses_the_hedge_under_both_graders(grader):
    rows = {row["name"]: row for row in H.hacking_table(grader=grader)}
    hedge = rows["hedged_candidates"]
    assert (hedge["accuracy"], hedge["parallel_correct"], hedge["tiered"]) == (-1.0, -1.0, -1.0)
    assert all(
        row[m] <= rows["honest_parallel"][m]
        for row in rows.values()
        for m in R.BASE_MODES
        if m != "structure"
    )


# Where the official grader scores the hacking lab differently from the project's (accuracy,
# parallel_correct, tiered, structure): its lenient checker lets these tie the honest reference.
OFFICIAL_HACKS = {
    "nested_blocks": (1.0, 1.0, 1.2, 1.0),
    "empty_paths": (1.0, 1.0, 1.2, 1.0),
    "summary_without_paths": (1.0, -1.0, 1.0, -1.0),  # no <Parallel>: tiered skips the format check
    "answer_only_in_path": (1.0, 1.0, 1.2, 1.0),  # tags stripped: the path's answer line is read
    "tags_in_final_line": (1.0, -1.0, -1.0, -1.0),
    "path_outside_block": (1.0, -1.0, 1.0, -1.0),
    "unclosed_summary": (1.0, 1.0, 1.2, 1.0),
}


def test_the_hacking_lab_under_the_official_grader():
    project = {row["name"]: row for row in H.hacking_table()}
    for row in H.hacking_table(grader="official"):
        scores = tuple(row[m] for m in R.BASE_MODES)
        assert scores == OFFICIAL_HACKS.get(
            row["name"], tuple(project[row["name"]][m] for m in R.BASE_MODES)
        ), row


@pytest.mark.parametrize("source", [DAPO, GSM])
@pytest.mark.parametrize(
    "hedge",
    [
        "The answer is 12 or 11",
        "either 12 or 11",
        "\\text{The answer is } 12",
        "\\boxed{12} or \\boxed{11}",
    ],
)
def test_hedges_are_wrong_in_both_graders(hedge, source):
    for grader in G.GRADERS.values():
        assert not grader.correct(f"Final Answer: {hedge}", "12", source), (grader.name, hedge)


# ----------------------------------------------------------------------------- real teacher traces
TRACES = (
    shared_data_dir() / "parallel_gsm8k" / "parallel_gsm8k_v2_subset.jsonl"
    if shared_data_dir()
    else None
)


@pytest.mark.skipif(
    TRACES is None or not TRACES.is_file(), reason="shared data not found (set PR1_DATA_DIR)"
)
def test_the_341_real_teacher_traces_under_both_graders():
    with open(TRACES, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    assert len(rows) == 341 and all("GSM8k" in r["data_source"] for r in rows)
    project = [
        G.GRADERS["project"].correct(r["response"], r["answer"], r["data_source"]) for r in rows
    ]
    gsm8k = [
        G.GRADERS["official"].correct(r["response"], r["answer"], r["data_source"]) for r in rows
    ]
    dapo = [G.official_correct(r["response"], r["answer"], "dapo") for r in rows]
    assert sum(project) == 341  # the teacher is always right by value
    assert sum(p != d for p, d in zip(project, dapo)) == 12  # "$21.00", "36.00", "$1600.", ...
    flips = [r for r, p, q in zip(rows, project, gsm8k) if p != q]
    assert len(flips) == 47  # 46 answers with "$" (the regex cannot start there) and one "36.00"
    assert sum("$" in G.project_answer(r["response"]) for r in flips) == 46
    assert sum(G.GRADERS["official"].valid(r["response"]) for r in rows) == 341
    assert sum(G.GRADERS["project"].valid(r["response"]) for r in rows) == 338


# ----------------------------------------------------------------------------- checked (PlanWorld)
def test_the_checked_grader_pays_a_letter_only_where_a_check_of_that_deal_says_so():
    block = (
        "Check (A), (B)\n<Parallel><Path>(A) 4+9=13 vs 14 ✗</Path><Path>(B) {b}</Path></Parallel>\n"
    )
    found = block.format(b="6+8=14 vs 14 ✓ B") + "<Summary>B</Summary>\nFinal Answer: B"
    guess = block.format(b="6+9=15 vs 14 ✗") + "<Summary>C</Summary>\nFinal Answer: C"
    serial_guess = "(A) 4+9=13 vs 14 ✗\n(B) 6+9=15 vs 14 ✗\nFinal Answer: C"
    serial = "(A) 4+9=13 vs 14 ✗\n(C) 5+9=14 vs 14 ✓\nFinal Answer: C"
    bad_sum = "(C) 5+8=14 vs 14 ✓\nFinal Answer: C"  # a ✓ on a wrong sum checks nothing
    checked, project = G.GRADERS["checked"], G.GRADERS["project"]
    assert checked.correct(found, "B") and checked.correct(serial, "C")
    for text in (guess, serial_guess, bad_sum):
        assert project.correct(text, "C") and not checked.correct(text, "C")
    assert not checked.correct(found, "C")  # a wrong letter stays wrong


def test_the_honest_grader_refuses_a_false_check_on_any_deal_in_either_arm():
    from pr1lib.rewards.functions import accuracy_reward

    q = "Deals of one pen and one bag: (A) 4 and 9, (B) 6 and 8. Al pays 14 coins for one deal."
    true_a, false_a = "(A) 4+9=13 vs 14 ✗", "(A) 5+7=12 vs 14 ✗"  # (A) does not cost 5 and 7
    found = "Check (A), (B)\n<Parallel><Path>{a}</Path><Path>(B) 6+8=14 vs 14 ✓ B</Path></Parallel>"
    found += "\n<Summary>B</Summary>\nFinal Answer: B"
    serial = "{a}\n(B) 6+8=14 vs 14 ✓ B\nFinal Answer: B"
    honest, checked = G.GRADERS["honest"], G.GRADERS["checked"]
    for form in (found, serial):
        good, bad = form.format(a=true_a), form.format(a=false_a)
        assert honest.correct(good, "B", "planworld-hard", question=q)
        assert not honest.correct(bad, "B", "planworld-hard", question=q)
        assert checked.correct(bad, "B", "planworld-hard", question=q)  # checked reads the ✓ only
        assert honest.correct(bad, "B", "planworld-hard")  # no question: the checked verdict
    beyond = found.format(a=true_a).replace("(B) 6+8=14 vs 14 ✓ B", "(C) 6+8=14 vs 14 ✓ C")
    assert not honest.correct(beyond.replace("B", "C"), "C", "planworld-hard", question=q)
    # the rewards read TRL's question column: the false check costs the whole reward
    texts = [found.format(a=true_a), found.format(a=false_a)]
    kwargs = {"data_source": ["planworld-hard"] * 2, "question": [q, q]}
    assert accuracy_reward(texts, ["B", "B"], grader="honest", **kwargs) == [1.0, -1.0]
    assert accuracy_reward(texts, ["B", "B"], grader="checked", **kwargs) == [1.0, 1.0]


def test_an_evaluation_row_grades_honestly_with_its_question():
    from pr1lib.evaluation.metrics import score_problem, summarize

    q = "Deals of one pen and one bag: (A) 4 and 9, (B) 6 and 8. Al pays 14 coins for one deal."
    texts = ["(A) 4+9=13 vs 14 ✗\n(B) 6+8=14 vs 14 ✓ B\nFinal Answer: B"]
    texts.append(texts[0].replace("4+9=13", "5+7=12"))  # a false check of (A)
    row = score_problem({"id": "p", "question": q, "answer": "B"}, texts, "planworld-hard")
    assert row["correct_checked"] == [True, True] and row["correct_honest"] == [True, False]
    assert summarize([row], "honest")["accuracy"] == 0.5

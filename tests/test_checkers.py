"""Benchmarks and answer checkers, table-tested on the real answer formats of every eval file.

Each eval file stores its gold answers differently (MATH-500: LaTeX strings; AIME 2024:
zero-padded strings; AIME 2025: plain strings; AMC 2023: JSON floats; GSM8K: ``#### N``). The
completions below are built from those golds in the renderings a model writes, and each case
says what the official grader and this project's grader (``pr1lib.rewards.graders``) must conclude.
"""

from __future__ import annotations

import json
import random
import re

import pytest
from conftest import needs_data

from pr1lib.data.evalsets import BENCHMARKS, canonical_gold, load_benchmark
from pr1lib.rewards.graders import check, last_boxed, minerva_normalize, official_answer
from pr1lib.store.paths import shared_data_dir

DATA = shared_data_dir()
needs_eval = needs_data("eval")
EVAL_FILES = ("math500", "aime24", "aime25", "amc23")


def raw_rows(name: str) -> list[dict]:
    with open(DATA / BENCHMARKS[name].local, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def final(answer: str) -> str:
    return f"Let me work it out step by step.\nFinal Answer: {answer}"


# ----------------------------------------------------------------------------- loaders
@needs_eval
@pytest.mark.parametrize(
    "name, count",
    [("math500", 500), ("aime24", 30), ("aime25", 30), ("amc23", 40), ("gsm8k", 1319)],
)
def test_loaders_give_common_records_with_canonical_golds(name, count):
    records = load_benchmark(name)
    assert len(records) == count  # the README's record counts
    assert len({r["id"] for r in records}) == count  # ids are unique (resume keys)
    for r in records:
        assert set(r) >= {"id", "question", "answer_text", "answer", "source"}
        assert r["question"] and r["answer"] == canonical_gold(r["answer"])
        assert not re.fullmatch(r"-?0\d+|-?\d+\.0+", r["answer"])  # no "025", no "27.0"


@needs_eval
def test_raw_formats_are_canonicalised():
    # AMC stores floats, AIME 2024 zero-padded strings: the loader turns both into plain integers
    amc = {str(r["id"]): r["answer"] for r in raw_rows("amc23")}
    assert all(isinstance(v, float) for v in amc.values())
    for rec in load_benchmark("amc23"):
        assert rec["answer"] == str(int(amc[rec["id"].split("-", 1)[1]]))
    padded = [r["answer"] for r in raw_rows("aime24") if r["answer"].startswith("0")]
    assert padded  # the file really has them ("025", "073", ...)
    golds = {r["answer"] for r in load_benchmark("aime24")}
    assert all(p.lstrip("0") in golds and p not in golds for p in padded)


@needs_eval
def test_first_n_and_integer_only():
    first = load_benchmark("math500", n=5)
    assert [r["id"] for r in first] == [r["id"] for r in load_benchmark("math500")[:5]]
    ints = load_benchmark("math500", integer_only=True)
    assert 0 < len(ints) < 500 and all(r["answer"].lstrip("-").isdigit() for r in ints)


def test_tinygsm_tiers_are_test_split_and_prefix_stable():
    a, b = load_benchmark("tinygsm-hard", n=3), load_benchmark("tinygsm-hard", n=6)
    assert a == b[:3] and all(r["answer"].isdigit() for r in b)


def test_missing_benchmark_offline_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PR1_DATA_DIR", str(tmp_path))  # an empty folder
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError) as err:
        load_benchmark("aime25")
    message = str(err.value)
    assert (
        "PR1_DATA_DIR" in message and "math-ai/aime25" in message and "eval/aime25.jsonl" in message
    )


def test_unknown_benchmark():
    with pytest.raises(ValueError, match="choose one of"):
        load_benchmark("aime26")


# ----------------------------------------------------------------------------- every gold, verbatim
@needs_eval
@pytest.mark.parametrize("name", EVAL_FILES + ("gsm8k",))
def test_every_gold_written_verbatim_is_correct_for_both_checkers(name):
    for rec in load_benchmark(name):
        verdict = check(name, final(rec["answer"]), rec["answer"])
        assert verdict["official"] and verdict["project"], (rec["id"], rec["answer"], verdict)


@needs_eval
@pytest.mark.parametrize("name", EVAL_FILES + ("gsm8k",))
def test_a_different_gold_is_wrong_for_both_checkers(name):
    records = load_benchmark(name)
    rng = random.Random(0)
    for rec in rng.sample(records, min(40, len(records))):  # math-verify is slow on LaTeX: sample
        other = next(
            o["answer"] for o in rng.sample(records, len(records)) if o["answer"] != rec["answer"]
        )
        verdict = check(name, final(other), rec["answer"])
        assert not verdict["official"] and not verdict["project"], (rec["answer"], other)


@needs_eval
@pytest.mark.parametrize("name", EVAL_FILES)
def test_boxed_only_answers_count_for_project_not_official(name):
    for rec in load_benchmark(name)[:30]:
        verdict = check(name, f"... so the result is $\\boxed{{{rec['answer']}}}$.", rec["answer"])
        assert verdict == {
            "official": False,
            "project": True,
            "checked": False,  # no deal checked: a math answer is never a checked letter
            "honest": False,  # honest is checked with every written check true: false here too
            "pred_official": None,
            "pred_project": rec["answer"],
            "pred_checked": rec["answer"],
            "pred_honest": rec["answer"],
        }, rec["id"]


@needs_eval
def test_raw_file_renderings_official_is_exact_project_is_numeric():
    # A model that copies the file's raw rendering ("025", "27.0") is right by value; the
    # paper's grader compares strings after normalisation, so it says no (a known quirk).
    for name in ("aime24", "amc23"):
        raw = {str(r["id"]): str(r["answer"]) for r in raw_rows(name)}
        for rec in load_benchmark(name):
            rendering = raw[rec["id"].split("-", 1)[1]]
            verdict = check(name, final(rendering), rec["answer"])
            assert verdict["project"]
            assert verdict["official"] == (rendering == rec["answer"]), rendering


# ----------------------------------------------------------------------------- curated renderings
# (benchmark, gold exactly as in the file, what the model writes, official?, project?)
HALF_OPEN = r"\left(\frac{3}{5},\frac{8}{3}\right]"
RENDERINGS = [
    # spaces
    ("math500", r"\left( 3, \frac{\pi}{2} \right)", r"\left(3,\frac{\pi}{2}\right)", True, True),
    # official keeps \left; the project drops \left / \right itself (not math-verify's version)
    ("math500", r"\left( 3, \frac{\pi}{2} \right)", r"(3, \frac{\pi}{2})", False, True),
    ("math500", HALF_OPEN, r"(\frac{3}{5}, \frac{8}{3}]", False, True),
    ("math500", HALF_OPEN, r"(\frac{3}{5},\frac{8}{3})", False, False),  # the bracket counts
    ("math500", r"\frac{14}{3}", r"\dfrac{14}{3}", False, True),  # official: no \dfrac rule
    ("math500", r"\frac{14}{3}", "14/3", False, True),  # math-verify: same value
    ("math500", r"\frac{3}{56}", r"\boxed{\frac{3}{56}}", True, True),  # boxed inside the line
    ("math500", r"\text{Evelyn}", "Evelyn", True, True),  # \text{} unwrapped
    ("math500", r"90^\circ", "90", True, True),  # degree sign removed
    ("math500", r"11\sqrt2", r"11\sqrt{2}", True, True),  # shorthand \sqrt2 expanded
    ("math500", "x=5", "5", True, True),  # official keeps the part after '='
    ("math500", "1,-2", "-2, 1", False, True),  # a set in another order
    ("math500", "3, 5, 7", "3,5,7", True, True),  # spaces removed
    ("math500", "1.25", r"\frac{5}{4}", False, True),  # equal value, other form
    ("math500", "2220", "2,220", True, True),  # thousands separator
    ("math500", r"\frac{14}{3}", r"\frac{14}{3}.", False, True),  # official: a full stop stays
    ("math500", r"\frac{14}{3}", r"$\frac{14}{3}.$", True, True),  # ... unless it is inside $...$
    ("math500", r"\frac{14}{3}", r"\frac{14}{5}", False, False),
    ("aime24", "025", "25", True, True),  # gold is canonicalised to 25 on loading
    ("aime24", "025", "025", False, True),  # official compares strings
    ("aime24", "073", r"\boxed{73}", True, True),
    ("aime24", "025", "26", False, False),
    ("amc23", 27.0, "27", True, True),
    ("amc23", 27.0, "27.0", False, True),
    ("amc23", -1.0, "-1", True, True),
    ("amc23", 3159.0, "3,159", True, True),
    ("amc23", 27.0, "$27", True, True),
    ("aime25", "70", "$70$", True, True),
    ("aime25", "70", "70.", False, True),
    ("aime25", "70", "70 bases", False, True),  # official: "bases" is not a known unit word
    ("aime25", "588", "588 square units", True, True),  # official: unit words dropped
]


@needs_eval
@pytest.mark.parametrize("name, gold, written, official, project", RENDERINGS)
def test_renderings_of_real_golds(name, gold, written, official, project):
    assert gold in [r["answer"] for r in raw_rows(name)]  # a real answer of that file
    verdict = check(name, final(written), canonical_gold(gold))
    assert (verdict["official"], verdict["project"]) == (official, project)


@needs_eval
def test_gsm8k_style_official_reads_the_first_number():
    rec = load_benchmark("gsm8k", n=1)[0]
    gold = rec["answer"]
    wrong = str(int(gold) + 1)
    two = f"Final Answer: {gold}\nOn second thought...\nFinal Answer: {wrong}"
    assert check("gsm8k", two, gold)["official"]  # the official GSM8K grader takes the first match
    assert not check("gsm8k", two, gold)["project"]  # the project's takes the last
    assert not check("gsm8k", final(f"${gold}"), gold)["official"]  # the number regex stops at '$'
    assert not check("gsm8k", final(f"{gold}.00"), gold)["official"]  # strings, not numbers


# ----------------------------------------------------------------------------- official mechanics
def test_official_reads_only_the_last_300_characters():
    assert official_answer("Final Answer: 7\n" + "x" * 299) is None
    assert official_answer("Final Answer: 7\n" + "x" * 280) == "7"


def test_official_ignores_tags_but_project_ignores_paths():
    text = (
        "<Parallel><Path>a\nFinal Answer: 3</Path><Path>b\nFinal Answer: 4</Path></Parallel>"
        "\n<Summary>they disagree</Summary>"
    )  # the engine's layout: a newline before <Summary>
    # tags are stripped, so the last path's line counts
    assert check("aime25", text, "4")["official"]
    assert check("aime25", text, "4")["pred_project"] is None  # answers inside paths are not final


def test_last_boxed_handles_nested_braces():
    assert last_boxed(r"\boxed{1} then \boxed{\frac{\sqrt{2}}{2}}") == r"\frac{\sqrt{2}}{2}"
    assert last_boxed("no box") is None


@pytest.mark.parametrize(
    "raw, normal",
    [
        (r"\boxed{42}", "42"),
        (r"x = \frac12", r"\frac{1}{2}"),
        ("1,000,000", "1000000"),
        (r"\text{(B)}", "(B)"),
        (r"5\text{ cm}", "5"),
        (r"\$12.50", "12.50"),
        ("a 7", "7"),
    ],
)
def test_minerva_normalize(raw, normal):
    assert minerva_normalize(raw) == normal

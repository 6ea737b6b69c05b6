"""WideWorld: a ten-deal search whose parallel paths are told their share (a lettered header the
engine writes) and checked to take it; the serial and parallel forms of the same search, with the
same answer modes; the sequential decode steps its teacher's block saves.

Run: .venv/bin/python -m pytest tests/test_wideworld.py -q -p no:cacheprovider
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest
import torch

from pr1lib import worlds
from pr1lib.evaluation.metrics import sample_stats
from pr1lib.evaluation.searchstats import mode_summary, sample_facts
from pr1lib.format.grammar import TAG_RE, extract_answer, parse, path_header, validate
from pr1lib.format.prompts import split_gsm8k_answer
from pr1lib.worlds import wideworld as ww

sys.path.insert(0, str(Path(__file__).parent))
from _tiny import toy_model, toy_tokenizer

WORLD = worlds.get("wideworld")
HARD = ww.generate(200, "hard", "test", seed=0)
EASY = ww.generate(200, "easy", "test", seed=0)


@pytest.fixture(scope="module")
def wide_tok():
    """WideWorld's tiny tokenizer (trained as ``pretrain-tiny --set world=wideworld`` trains it,
    on a smaller corpus) with the six tags."""
    from pr1lib.decoding.models import tiny_tokenizer_corpus, train_tiny_tokenizer
    from pr1lib.decoding.tokens import add_parallel_tags

    tok = train_tiny_tokenizer(tiny_tokenizer_corpus(0, n=300, world="wideworld"), 512)
    add_parallel_tags(tok, toy_model(len(tok)))
    return tok


def forms(record: dict) -> tuple[str, str, str]:
    """(parallel, serial, plain) completions of one record, as the SFT rows get them."""
    question = record["question"]
    teacher = WORLD.rule_teacher()
    trace = teacher.trace({"id": "q", "question": question, "answer_text": record["answer"]})
    text = trace["text"]
    return text, WORLD.serial_solution(question, text), WORLD.plain_solution(question, text)


def test_a_hard_item_has_one_deal_that_checks_out_and_no_other_with_its_answer():
    for record in HARD:
        deals, total = ww.parse_hard(record["question"])
        assert len(deals.deals) == ww.DEALS == 10 and len(set(deals.deals)) == 10
        right = ww.solve(deals, total)
        a, b = deals.deals[right]
        assert split_gsm8k_answer(record["answer"])[1] == str(b - a)
        assert sum(x + y == total for x, y in deals.deals) == 1
        assert sum(y - x == b - a for x, y in deals.deals) == 1  # a wrong deal never answers
    # the right deal sits anywhere in the list: a guess of (A) is right about 1 time in 10
    places = [ww.solve(*ww.parse_hard(r["question"])) for r in HARD]
    assert 0.04 <= places.count(0) / len(places) <= 0.2 and len(set(places)) == 10


def test_splits_are_disjoint_and_easy_items_name_one_deal():
    train = {r["question"] for r in ww.generate(300, "hard", "train", seed=0)}
    assert train.isdisjoint(r["question"] for r in HARD)
    for record in EASY:
        steps, final = split_gsm8k_answer(record["answer"])
        assert len(steps) == 1 and steps[0][1] in ww.LABELS and final.lstrip("-").isdigit()


def test_the_three_forms_share_their_lines_and_answer_and_only_the_parallel_one_has_tags():
    for record in HARD[:60]:
        parallel, serial, plain = forms(record)
        gold = split_gsm8k_answer(record["answer"])[1]
        assert [extract_answer(t) for t in (parallel, serial, plain)] == [gold] * 3
        assert validate(parallel) == [] and not TAG_RE.search(serial + plain)
        deals, total = ww.parse_hard(record["question"])
        right = ww.solve(deals, total)
        assert serial.splitlines()[: right + 1] == ww.search_lines(deals, total)[: right + 1]
        assert parallel.splitlines()[0] == serial.splitlines()[0]  # the guess, deal (A), first
        assert serial.count(" vs ") == right + 1  # the serial search stops at its ✓
        assert plain.count(" vs ") == 1 and ww.OK in plain  # the plain row names the right deal


def test_the_same_item_is_answered_in_the_same_mode_serially_and_in_parallel():
    modes = set()
    for record in HARD[:80]:
        parallel, serial, _ = forms(record)
        assert ww.answer_mode(parallel) == ww.answer_mode(serial)
        modes.add(ww.answer_mode(parallel))
    assert modes == {"guess", "search"}


def test_a_teacher_block_takes_every_share_and_a_swapped_or_repeated_one_does_not():
    record = next(r for r in HARD if "<Parallel>" in forms(r)[0])
    parallel = forms(record)[0]
    question = record["question"]
    assert WORLD.block_splits(question, parallel) == [True]
    paths = parse(parallel).blocks[0].paths
    assert len(paths) == ww.DEALS - 1
    swapped = parallel.replace(paths[0].text, "@@").replace(paths[1].text, paths[0].text)
    swapped = swapped.replace("@@", paths[1].text)
    repeated = parallel.replace(paths[1].text, paths[0].text)
    assert WORLD.block_splits(question, swapped) == [False]
    assert WORLD.block_splits(question, repeated) == [False]
    assert WORLD.block_splits("Tom has 3 apples.", parallel) == []


def test_the_teachers_block_decodes_in_at_most_0_6x_the_serial_steps(wide_tok):
    """The design's arithmetic, on the teacher's own traces and WideWorld's tokens: a block decoded
    as forked paths costs its longest path, so the parallel form of the search takes at most 0.6x
    the sequential steps of the serial one, overall and on the items it searches (the study
    measures what the models write)."""
    steps = {"parallel": [], "serial": [], "parallel_search": [], "serial_search": []}
    for record in HARD:
        parallel, serial, _ = forms(record)
        p = sample_stats(parallel, wide_tok, mode="forked")["sequential_steps"]
        s = sample_stats(serial, wide_tok, mode="seen")["sequential_steps"]
        steps["parallel"].append(p)
        steps["serial"].append(s)
        if ww.answer_mode(serial) == "search":
            steps["parallel_search"].append(p)
            steps["serial_search"].append(s)
    mean = {k: statistics.fmean(v) for k, v in steps.items()}
    assert mean["parallel"] <= 0.6 * mean["serial"]
    assert mean["parallel_search"] <= 0.6 * mean["serial_search"]


def test_serial_sft_rows_carry_no_tag_and_stop_at_the_check_that_passes():
    from datasets import Dataset

    from pr1lib.data.sftdata import with_trace_style

    rows = {"source": [], "question": [], "completion": []}
    for record in HARD[:40] + EASY[:10]:
        rows["source"].append("wideworld-hard" if record in HARD else "wideworld-easy")
        rows["question"].append(record["question"])
        rows["completion"].append(forms(record)[0])
    serial = with_trace_style(Dataset.from_dict(rows), "serial")
    for row, record in zip(serial, HARD[:40]):
        assert not TAG_RE.search(row["completion"])
        assert row["completion"] == forms(record)[1]


def test_lettered_headers_are_the_tokens_the_traces_train(wide_tok):
    """The forked engine writes path j's header as ``tokenizer.encode(path_header(j, "letter"))``:
    the same tokens the SFT rows hold after ``<Path>``, so the engine's paths open as trained."""
    tok = wide_tok
    parallel = next(forms(r)[0] for r in HARD if "<Parallel>" in forms(r)[0])
    ids = tok.encode(parallel, add_special_tokens=False)
    path = tok.convert_tokens_to_ids("<Path>")
    starts = [i + 1 for i, t in enumerate(ids) if t == path]
    for j, at in enumerate(starts):
        header = tok.encode(path_header(j, "letter"), add_special_tokens=False)
        assert ids[at : at + len(header)] == header


def test_the_engine_writes_each_paths_letter_as_forced_tokens():
    from pr1lib.config import RolloutConfig
    from pr1lib.decoding.rollout import generate
    from pr1lib.experiments.blockcost import open_with_block

    tok = toy_tokenizer()
    model = toy_model(len(tok), seed=3)
    cfg = RolloutConfig(
        mode="forked",
        num_paths=3,
        path_headers=True,
        header_style="letter",
        max_completion_length=60,
        max_path_length=8,
    )
    with open_with_block(model, tok.convert_tokens_to_ids("<Parallel>")):
        rollouts = generate(
            model, tok, ["Q: a"] * 4, cfg, generator=torch.Generator().manual_seed(1)
        )
    path = tok.convert_tokens_to_ids("<Path>")
    for r in rollouts:
        opened = [i for i, t in enumerate(r.completion_ids) if t == path and r.forced[i]]
        headers = [tok.decode(r.completion_ids[i + 1 : i + 4]) for i in opened[:3]]
        assert headers == ["(B)", "(C)", "(D)"]
        assert all(r.forced[i + 1 : i + 4] == [1, 1, 1] for i in opened[:3])


def test_an_evaluation_sums_accuracy_and_steps_per_answer_mode_and_the_split_rate():
    from pr1lib.evaluation.metrics import score_problem

    rows = []
    for i, record in enumerate(HARD[:30]):
        parallel, serial, _ = forms(record)
        problem = {"id": i, "question": record["question"], "answer": extract_answer(serial)}
        rows.append(score_problem(problem, [parallel, serial], "wideworld-hard", mode="forked"))
    summary = mode_summary(rows, "official")
    modes = summary["answer_modes"]
    assert modes["guess"]["share"] + modes["search"]["share"] == pytest.approx(1.0)
    assert modes["guess"]["accuracy"] == modes["search"]["accuracy"] == 1.0
    blocks = sum("<Parallel>" in forms(r)[0] for r in HARD[:30])
    assert summary["n_blocks"] == blocks and summary["split_rate"] == 1.0
    assert sample_facts("tinyworld-hard", "q", "text") == {}


@pytest.mark.parametrize("style,wanted", [("number", "(2)"), ("letter", "(C)")])
def test_path_headers_by_style(style, wanted):
    assert path_header(1, style) == wanted
    with pytest.raises(ValueError, match="header style"):
        path_header(0, "roman")


def test_generate_refuses_a_negative_count_like_every_world():
    """WideWorld's generator checks its request as TinyGSM's and TinyWorld's do
    (``tasks.check_request``): a negative ``n`` is one line, never ``n`` minus a few records."""
    with pytest.raises(ValueError, match="n must be a whole number of 0 or more, got -5"):
        ww.generate(-5, "hard")

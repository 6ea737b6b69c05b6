"""PlanWorld (pr1lib/worlds/planworld.py) and the plans its model writes (pr1lib/format/plans.py):
the tiers' widths, the cold start's small searches, the three forms, the plan's grammar, and the
forked engine opening one path per item of the model's own plan."""

from __future__ import annotations

import pytest
import torch
from _tiny import toy_model, toy_tokenizer

from pr1lib import worlds
from pr1lib.config import RolloutConfig
from pr1lib.decoding.rollout import generate
from pr1lib.format.grammar import plan_errors, validate
from pr1lib.format.plans import plan_items, plan_line
from pr1lib.worlds import planworld as pw

WORLD = worlds.get("planworld")


@pytest.mark.parametrize("tier, width", [(t, w) for t, w in pw.TIER_WIDTHS.items()])
def test_each_search_tier_has_its_width_and_exactly_one_candidate_that_checks_out(tier, width):
    for record in pw.generate(50, tier, "test", seed=1):
        deals, total, candidates = pw.parse_question(record["question"])
        assert len(candidates) == len(deals) == width
        assert sum(sum(deals[j]) == total for j in candidates) == 1
        assert record["answer"].endswith(f"#### {pw.LETTERS[pw.solve(deals, total, candidates)]}")


def test_the_mixed_tier_draws_whole_lists_of_every_width_from_two_to_ten():
    """Regime 10's RL problems: each width 2..10 about as often, every deal a candidate, and no
    question of the ten-deal test set among its training problems."""
    records = pw.generate(900, "mixed", "train", seed=0)
    widths = [len(pw.parse_question(r["question"])[2]) for r in records]
    assert all(len(pw.parse_question(r["question"])[0]) == w for r, w in zip(records, widths))
    assert {w: widths.count(w) > 60 for w in pw.MIXED} == {w: True for w in range(2, 11)}
    hard = {r["question"] for r in pw.generate(300, "hard", "test")}
    assert not hard & {r["question"] for r in records}


def test_the_cold_starts_plans_name_two_or_three_deals_and_start_anywhere_on_long_lists():
    """Plans of 2 or 3 deals; on a long list that names no span the plan is a window holding the
    answer, anywhere in the list, so paths of late letters are trained on such questions too."""
    records = pw.generate(600, "small", "train", seed=0)
    traces = [pw.PlanTeacher().trace({"id": "p", **r})["text"] for r in records]
    planned = [plan_items(t.splitlines()[0]) for t in traces]
    assert all(items and len(items) in (2, 3) for items in planned)
    long = [
        (r["answer"][-1], items)
        for r, items in zip(records, planned)
        if "one deal" in r["question"] and len(pw.parse_question(r["question"])[0]) > 3
    ]
    assert 0.25 < len(long) / len(records) < 0.45
    assert all(answer in items for answer, items in long)
    assert {items[0] for _, items in long} >= set("ABCDEFG")  # windows start anywhere
    assert sum(items[-1] in "HIJ" for _, items in long) >= 10


def test_the_sft_source_holds_no_wide_search():
    """No cold-start row of any arm holds a search over more than three deals."""
    source = WORLD.sft_overrides("unseen")["source"]
    assert source == "planworld-easy+planworld-small"
    from pr1lib.data.sftdata import rows_widths

    records = pw.generate(300, "small", "train") + pw.generate(300, "easy", "train")
    traces = [pw.PlanTeacher().trace({"id": "p", **r, "answer_text": r["answer"]}) for r in records]
    texts = [t["text"] for t in traces]
    serial = [pw.serial_solution(r["question"], t) for r, t in zip(records, texts)]
    assert set(rows_widths(texts)["blocks"]) == {2, 3}
    assert set(rows_widths(serial)["plans"]) == {2, 3} and not rows_widths(serial)["blocks"]


def test_splits_are_disjoint():
    train = {r["question"] for r in pw.generate(300, "w3", "train")}
    test = {r["question"] for r in pw.generate(300, "w3", "test")}
    assert not train & test


def test_the_three_forms_share_the_plan_the_checks_and_the_answer():
    record = pw.generate(1, "w4", "test", seed=5)[0]
    parsed = pw.parse_question(record["question"])
    parallel, serial = pw.parallel_trace(*parsed), pw.serial_trace(*parsed)
    plain = pw.plain_completion(record["question"], parallel)
    assert parallel.splitlines()[0] == serial.splitlines()[0] == "Check (A)-(D)"
    partial = pw.serial_solution(record["question"], parallel).splitlines()[0]  # its window
    assert record["answer"][-1] in plan_items(partial) and len(plan_items(partial)) in (2, 3)
    assert validate(parallel) == [] and "<Path>" not in serial + plain
    answer = parallel.splitlines()[-1]
    assert serial.splitlines()[-1] == answer and plain.splitlines()[-1] == answer
    assert pw.answer_mode(plain) == "guess" and pw.answer_mode(serial) == "search"


@pytest.mark.parametrize(
    "line, items",
    [
        ("Check (A)-(D)", ["A", "B", "C", "D"]),
        ("Check (C), (F)", ["C", "F"]),
        ("Check (B), (C), (E)", ["B", "C", "E"]),
        ("Check (D)-(B)", None),  # backwards
        ("Check (A)-(A)", None),  # one item
        ("Check (B), (B)", None),  # repeated
        ("Check (B)", None),
        ("check (A)-(C)", None),
        ("(A) 4+9=13 vs 14 ✗", None),
    ],
)
def test_plan_items(line, items):
    assert plan_items(line) == items


def test_plan_line_and_plan_items_round_trip():
    for items in (["A", "B"], ["C", "D", "E"], ["B", "D", "E"], list("ABCDEFGHIJ")):
        assert plan_items(plan_line(items)) == items


def test_a_block_that_does_not_follow_its_plan_is_invalid_in_both_validators():
    good = "Check (A), (C)\n<Parallel><Path>(A) x</Path><Path>(C) y</Path></Parallel>\n"
    good += "<Summary>C</Summary>\nFinal Answer: C"
    extra = good.replace("<Path>(C) y</Path>", "<Path>(C) y</Path><Path>(D) z</Path>")
    assert validate(good) == [] and validate(good, strict=False) == []
    for bad in (good.replace("(C) y", "(B) y"), extra):
        assert plan_errors(bad) and validate(bad) and validate(bad, strict=False)


def test_block_shares_counts_distinct_correct_shares_whatever_the_width():
    q = pw.generate(1, "hard", "test", seed=2)[0]["question"]
    deals, total, _ = pw.parse_question(q)

    def block(*checks: tuple[int, tuple[int, int]]) -> str:
        paths = "".join(f"<Path>{pw.line(j, pair, total)}</Path>" for j, pair in checks)
        return f"<Parallel>{paths}</Parallel>"

    assert pw.block_shares(q, block((0, deals[0]), (4, deals[4]))) == [True]
    assert pw.block_shares(q, block((0, deals[0]), (0, deals[0]))) == [False]  # the same share
    assert pw.block_shares(q, block((0, deals[0]), (1, deals[0]))) == [False]  # wrong prices
    assert pw.block_shares(q, pw.parallel_trace(deals, total, list(range(10)))) == [True]


class _Script(torch.nn.Module):
    """The output layer, made to write ``tokens`` first (one per call: the prefill chooses the
    first completion token, each decode step the next); later calls pass through."""

    def __init__(self, head: torch.nn.Module, tokens: list[int]):
        super().__init__()
        self.head, self.tokens, self.calls = head, tokens, 0

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.head(hidden)  # (B, L, V)
        if self.calls < len(self.tokens):
            logits = logits.clone()
            logits[..., self.tokens[self.calls]] = logits.max() + 100.0
        self.calls += 1
        return logits


def _planned_rollouts(plan: str, num_paths: int = 10):
    tok = toy_tokenizer()
    model = toy_model(len(tok), seed=3)
    script = tok.encode(f"{plan}\n", add_special_tokens=False)
    model.lm_head = _Script(model.lm_head, script + [tok.convert_tokens_to_ids("<Parallel>")])
    cfg = RolloutConfig(
        mode="forked",
        num_paths=num_paths,
        path_headers=True,
        header_style="plan",
        max_completion_length=120,
        max_path_length=8,
    )
    return tok, generate(model, tok, ["Q: a"] * 3, cfg, generator=torch.Generator().manual_seed(1))


def test_the_engine_opens_one_path_per_item_of_the_models_plan_with_its_label():
    tok, rollouts = _planned_rollouts("Check (B), (E), (F)")
    path = tok.convert_tokens_to_ids("<Path>")
    for r in rollouts:
        opened = [i for i, t in enumerate(r.completion_ids) if t == path and r.forced[i]]
        assert len(opened) == 3 and r.path_lengths[0] and len(r.path_lengths[0]) == 3
        heads = [tok.decode(r.completion_ids[i + 1 : i + 4]) for i in opened]
        assert heads == ["(B)", "(E)", "(F)"]
        assert all(r.forced[i + 1 : i + 4] == [1, 1, 1] for i in opened)
        assert plan_errors(r.text) == []


def test_a_span_plan_sets_the_width():
    _, rollouts = _planned_rollouts("Check (A)-(G)")
    assert all(r.path_lengths[0] and len(r.path_lengths[0]) == 7 for r in rollouts)


@pytest.mark.parametrize("plan, paths", [("Check (B)", 10), ("hello", 10), ("Check (A)-(E)", 4)])
def test_a_fork_after_no_plan_or_a_too_wide_one_ends_the_sample(plan, paths):
    tok, rollouts = _planned_rollouts(plan, paths)
    for r in rollouts:
        assert r.finish_reason == "bad_plan"
        assert tok.convert_tokens_to_ids("<Path>") not in r.completion_ids


def test_planworld_starts_from_wideworlds_base_and_no_other_world():
    from pr1lib.training.starts import check_start_world

    check_start_world("planworld-small", "data/wideworld-base")
    with pytest.raises(ValueError, match="TinyWorld"):
        check_start_world("planworld-small", "data/tinyworld-sft-unseen")


def test_the_shipped_cold_start_is_the_unseen_sft_todays_command_makes():
    """``data/planworld-sft-unseen`` (notebook 06 section 10's start): trained as PlanWorld's
    unseen variant, its card's config what ``sft --world planworld --variant unseen`` builds, its
    rows plans of two and three deals only."""
    import json
    from dataclasses import asdict

    from pr1lib.config import SFTStageConfig
    from pr1lib.store.paths import REPO_ROOT
    from pr1lib.training.starts import trained_as

    start = WORLD.init("unseen")
    assert start == "data/planworld-sft-unseen"
    assert trained_as(REPO_ROOT / start) == ("unseen", "planworld")
    card = json.loads((REPO_ROOT / start / "card.json").read_text())
    made = asdict(SFTStageConfig.for_world("planworld", "tiny", "unseen"))
    # the shipped run set one thread, which trains the same weights (a speed setting)
    assert {**card["config"], "num_threads": made["num_threads"]} == made
    assert made["hide_plan"] is True
    assert set(card["row_widths"]["plans"]) == {"2", "3"}
    assert "--world planworld --variant unseen" in card["command"]

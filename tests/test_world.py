"""TinyWorld (the shop search world), its rule teacher, its sources and ``blockcost``."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from pr1lib.data import evalsets
from pr1lib.data import sources as data
from pr1lib.data.evalsets import load_benchmark
from pr1lib.decoding.models import base_model_dir
from pr1lib.format.grammar import answers_match, extract_answer, linearize, parse, validate
from pr1lib.format.prompts import linear_solution, split_gsm8k_answer
from pr1lib.store.paths import REPO_ROOT
from pr1lib.worlds import tinyworld as world
from pr1lib.worlds.tasks import generate as tinygsm_generate
from pr1lib.worlds.teachers import check_arithmetic
from pr1lib.worlds.tinyworld import WorldTeacher

TRY = re.compile(
    r"^(\w+) (\d+), (\w+) (\d+): \2\+\4=<<\2\+\4=(\d+)>>\5\. "
    r"check: \5 vs (\d+) ([✓✗])$"
)


def records(tier: str, n: int = 300, split: str = "train", seed: int = 0) -> list[dict]:
    return [
        {"id": f"{tier}-{i}", "answer_text": r["answer"], **r}
        for i, r in enumerate(world.generate(n, tier, split, seed))
    ]


@pytest.mark.parametrize("tier", world.TIERS)
def test_generator_is_deterministic_and_a_prefix_stream(tier):
    first = world.generate(40, tier, "train", seed=3)
    assert first == world.generate(40, tier, "train", seed=3)
    assert first != world.generate(40, tier, "train", seed=4)
    assert world.generate(10, tier, "train", seed=3) == first[:10]


@pytest.mark.parametrize("tier", world.TIERS)
def test_splits_are_disjoint_whatever_the_seed(tier):
    train = {r["question"] for s in (0, 1) for r in world.generate(400, tier, "train", s)}
    test = {r["question"] for s in (0, 1) for r in world.generate(400, tier, "test", s)}
    assert not train & test


@pytest.mark.parametrize("tier", world.TIERS)
def test_records_are_gsm8k_shaped_with_true_arithmetic(tier):
    for rec in world.generate(300, tier, "train", seed=1):
        assert set(rec) == {"question", "answer"} and rec["question"].endswith("?")
        steps, final = split_gsm8k_answer(rec["answer"])
        assert 1 <= len(steps) <= 2 and re.fullmatch(r"\d+", final)
        assert check_arithmetic(rec["answer"]) == [] and "<<" in rec["answer"]


def test_hard_items_have_one_pair_and_the_answer_needs_the_whole_pair():
    for rec in world.generate(300, "hard", "train", seed=2):
        shop, total = world.parse_hard(rec["question"])
        pairs = [(a, b) for a in shop.prices[0] for b in shop.prices[1]]
        good = [(a, b) for a, b in pairs if a + b == total]
        assert len(good) == 1
        ((a, b),) = good
        assert split_gsm8k_answer(rec["answer"])[1] == str(b - a)
        assert [b2 - a2 for a2, b2 in pairs].count(b - a) == 1  # no wrong pair gives the answer


def test_easy_check_items_compare_the_sum_with_the_total():
    checks = [r for r in world.generate(300, "easy", "train", seed=5) if "exactly" in r["question"]]
    assert len(checks) > 50
    finals = {split_gsm8k_answer(r["answer"])[1] for r in checks}
    assert finals == {"0", "1"}  # both outcomes occur
    for rec in checks:
        a, b, total = map(
            int,
            re.search(
                r"the (\d+)-coin .* the (\d+)-coin .* exactly (\d+) coins", rec["question"]
            ).groups(),
        )
        assert split_gsm8k_answer(rec["answer"])[1] == str(int(a + b == total))
        assert world.check_line(a + b, total) in rec["answer"]
        assert abs(a + b - total) <= 20  # near misses: the check must read both digits


def test_tinygsm_tiers_are_unchanged_by_the_new_world():
    # a digest of TinyGSM's first records as generated at 536655e, before TinyWorld existed
    dump = json.dumps(
        [tinygsm_generate(50, t, s, 0) for t in ("easy", "hard") for s in ("train", "test")]
    )
    assert hashlib.sha256(dump.encode()).hexdigest()[:16] == "999ab673152fd6db"
    assert [r["source"] for r in data.load_source("tinygsm-easy", limit=2)] == ["tinygsm-easy"] * 2


def test_sources_and_benchmarks_are_registered_and_held_out():
    for name in world.WORLD.sources():
        assert name in data.sources() and name in evalsets.names()
        train = data.load_source(name, limit=200)
        bench = load_benchmark(name, n=200)
        assert {r["source"] for r in train} == {name} and len(bench) == 200
        assert not {r["question"] for r in train} & {r["question"] for r in bench}


@pytest.mark.parametrize("tier", world.TIERS)
def test_every_teacher_trace_is_strictly_valid_and_right(tier):
    recs = records(tier)
    traces = WorldTeacher(seed=0).generate(recs)
    for rec, trace in zip(recs, traces):
        text = trace["text"]
        assert trace["error"] is None and validate(text, strict=True) == []
        # the block opens the response (blockcost forces it there)
        assert text.startswith("<Parallel><Path>")
        assert answers_match(extract_answer(text), split_gsm8k_answer(rec["answer"])[1])
        assert check_arithmetic(text) == []
        assert len(parse(text).blocks) == 1 and len(parse(text).blocks[0].paths) == 2


def test_hard_paths_check_honestly_and_wrong_ones_are_marked():
    recs = records("hard", 400)
    paths = wrong = 0
    for rec, trace in zip(recs, WorldTeacher(seed=1).generate(recs)):
        shop, total = world.parse_hard(rec["question"])
        block = parse(trace["text"]).blocks[0]
        marks = []
        for path in block.paths:
            for line in path.text.split("\n"):
                noun, x, other, y, _s, shown, mark = TRY.fullmatch(line).groups()
                side = [n for n, _ in shop.names].index(noun.lower())
                assert side == 0  # the cheap item first, as the summary names it
                assert other == shop.names[1 - side][0]
                # a real pair
                assert int(x) in shop.prices[side] and int(y) in shop.prices[1 - side]
                assert int(shown) == total
                assert mark == ("✓" if int(x) + int(y) == total else "✗")  # the check is honest
                marks.append(mark)
        assert marks.count("✓") == 1  # the summary always has exactly one pair to keep
        paths, wrong = paths + len(marks), wrong + marks.count("✗")
    assert wrong / paths == 0.75  # 3 of the 4 pairs fail


def pairs_of(path_text: str) -> list[tuple[int, int, str]]:
    return [(int(m[2]), int(m[4]), m[7]) for m in map(TRY.fullmatch, path_text.split("\n"))]


def test_hard_block_splits_the_search_from_the_prompt_alone():
    """The two paths together try every pair once, exactly one path finds the passing pair, and
    each path is what the prompt's lists give (path i fixes the i-th cheap price, in the
    question's order): nothing in a path is taken from the known answer."""
    recs = records("hard", 300)
    which = []
    for rec, trace in zip(recs, WorldTeacher(seed=2).generate(recs)):
        shop, total = world.parse_hard(rec["question"])
        block = parse(trace["text"]).blocks[0]
        tried = [pairs_of(path.text) for path in block.paths]
        every = {(a, b) for a in shop.prices[0] for b in shop.prices[1]}
        flat = [(a, b) for path in tried for a, b, _ in path]
        assert len(flat) == len(every) and set(flat) == every  # all pairs, each once
        finds = [any(mark == "✓" for *_, mark in path) for path in tried]
        assert finds.count(True) == 1  # exactly one path checks out
        which.append(finds.index(True))
        # derivable from the prompt: the same paths for any answer the lists allow
        split = world.split_paths(world.parse_shop(rec["question"]))
        assert [[(a, b) for a, b, _ in path] for path in tried] == split
        assert [p.text for p in block.paths] == [
            "\n".join(world.try_line(shop, total, pair) for pair in pairs) for pairs in split
        ]
    assert 0.35 <= sum(which) / len(which) <= 0.65  # the passing pair sits in either path


def test_read_guess_reads_plain_solutions_paths_and_made_up_checks():
    recs = records("hard", 100)
    for rec, trace in zip(recs, WorldTeacher().generate(recs)):
        shop, total = world.parse_hard(rec["question"])
        plain = world.read_guess(rec["question"], linear_solution(rec["answer"]))
        assert plain == dict(
            pair=world.solve_pair(shop, total), listed=True, sum_right=True, mark="✓", right=True
        )
        paths = [
            world.read_guess(rec["question"], p.text) for p in parse(trace["text"]).blocks[0].paths
        ]
        assert [g["pair"] for g in paths] == [pairs[0] for pairs in world.split_paths(shop)]
        assert all(g["listed"] and g["sum_right"] for g in paths)
    q = recs[0]["question"]  # what the base model writes when it guesses wrong: a sum made to fit
    made_up = world.read_guess(q, "Toy 1, book 2: 1+2=<<1+2=99>>99. check: 99 vs 99 ✓\n")
    assert made_up == dict(pair=(1, 2), listed=False, sum_right=False, mark="✓", right=False)
    assert world.read_guess(q, "no guess here") is None
    assert (
        world.read_guess("Tom has 3 apples.", "Toy 1, book 2: 1+2=<<1+2=3>>3. check: 3 vs 3 ✓")
        is None
    )


def test_summary_keeps_the_pair_that_checks_out():
    recs = records("hard", 100)
    for rec, trace in zip(recs, WorldTeacher().generate(recs)):
        shop, total = world.parse_hard(rec["question"])
        a, b = world.solve_pair(shop, total)
        summary = parse(trace["text"]).blocks[0].summary.text
        cheap, dear = shop.names[0][0], shop.names[1][0]
        assert summary.startswith(f"{cheap.capitalize()} {a} and {dear} {b}:")


@pytest.mark.parametrize("tier", world.TIERS)
def test_plain_solution_is_the_records_own_answer_without_a_block(tier):
    recs = records(tier, 200)
    for rec, trace in zip(recs, WorldTeacher().generate(recs)):
        plain = world.plain_completion(rec["question"], trace["text"])
        assert plain == linear_solution(rec["answer"])
        assert "<Parallel>" not in plain and validate(plain, strict=True) == []
        assert answers_match(extract_answer(plain), split_gsm8k_answer(rec["answer"])[1])


def test_easy_block_linearizes_to_the_plain_solution():
    for rec, trace in zip(recs := records("easy", 50), WorldTeacher().generate(recs)):
        assert linearize(trace["text"]) == linear_solution(rec["answer"])


def test_teacher_falls_back_to_the_rule_teacher_on_other_problems():
    rec = {
        "id": "g",
        "question": "?",
        "answer": "72",
        "answer_text": "She sold 48/2=<<48/2=24>>24 in May.\nIn all 48+24=<<48+24=72>>72.\n#### 72",
    }
    trace = WorldTeacher().trace(rec)
    assert trace["teacher"].startswith("world-") and validate(trace["text"], strict=True) == []


def test_coldstart_uses_the_world_teacher_for_world_sources():
    from pr1lib.config import ColdStartConfig
    from pr1lib.data.coldstart import make_teacher

    assert isinstance(make_teacher(ColdStartConfig(source="tinyworld-hard")), WorldTeacher)
    assert not isinstance(make_teacher(ColdStartConfig(source="tinygsm-easy")), WorldTeacher)


def test_half_plain_start_uses_the_worlds_plain_solution():
    from datasets import Dataset

    from pr1lib.training.sft import with_plain_share

    recs = data.load_source("tinyworld-hard", limit=20)
    traces = WorldTeacher().generate([{**r} for r in recs])
    rows = Dataset.from_dict(
        {
            "question": [r["question"] for r in recs],
            "source": [r["source"] for r in recs],
            "completion": [t["text"] for t in traces],
        }
    )
    mixed = with_plain_share(rows, 1.0)
    for rec, row in zip(recs, mixed):
        assert row["completion"] == linear_solution(rec["answer_text"]) and not row["parallel"]


def test_blockcost_forces_a_block_or_none_on_a_steered_random_model():
    from pr1lib.decoding.models import build_random_tiny
    from pr1lib.decoding.steering import steer_logits
    from pr1lib.decoding.structure import tag_ids
    from pr1lib.decoding.tokens import add_parallel_tags
    from pr1lib.evaluation.metrics import paired_bootstrap
    from pr1lib.experiments.blockcost import blockcost

    model, tok = build_random_tiny(seed=0)
    add_parallel_tags(tok, model)
    tags = tag_ids(tok)
    # steered to love <Parallel>: forced-plain must still have no block; close paths quickly
    undo = steer_logits(model, {tags.parallel: 30.0, tags.end_path: 5.0})
    for mode in ("seen", "forked"):
        out = blockcost(
            model.eval(),
            tok,
            ["tinyworld-hard"],
            n=3,
            k=2,
            mode=mode,
            max_completion_length=24,
            max_path_length=6,
        )["tinyworld-hard"]
        assert out["parallel_ratio_block"] == 1.0 and out["parallel_ratio_plain"] == 0.0
        assert out["n"] == 3 and out["k"] == 2 and out["ci95"][0] <= out["diff"] <= out["ci95"][1]
    undo()
    ci = paired_bootstrap([1, 0, 1, 0], [0, 0, 1, 1])  # a - b: one ahead, one behind
    assert ci["low"] < 0 == ci["diff"] < ci["high"]


SHIPPED_WORLD_BASE = REPO_ROOT / base_model_dir("tinyworld")


@pytest.mark.skipif(
    not (SHIPPED_WORLD_BASE / "model.safetensors").exists(),
    reason="data/tinyworld-base not shipped",
)
def test_shipped_tinyworld_base_solves_easy_held_out_items():
    """Greedy on the first 40 held-out easy items (a prefix of the card's 200): the card says 96.5%;
    at n=40 one SD is ~3 points, so the floor of 85% is ~4 SD below and only a broken model
    fails."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pr1lib.training.pretrain import evaluate_accuracy

    card = json.loads((SHIPPED_WORLD_BASE / "card.json").read_text())
    assert card["config"]["world"] == "tinyworld" and card["accuracy"]["easy_greedy"] >= 0.85
    model = AutoModelForCausalLM.from_pretrained(SHIPPED_WORLD_BASE).eval()
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_WORLD_BASE)
    items = world.generate(40, "easy", "test", seed=card["config"]["seed"])
    assert evaluate_accuracy(model, tokenizer, items, max_new_tokens=128) >= 0.85


def test_blockcost_lets_the_answer_follow_the_forced_block(monkeypatch):
    """The engine's default stops a sample at its last allowed block's ``</Summary>`` (the
    paper's rule, no answer); blockcost allows one block and must let the answer follow it."""
    import pr1lib.experiments.blockcost as bc
    from pr1lib.decoding.models import build_random_tiny
    from pr1lib.decoding.tokens import add_parallel_tags

    seen = []
    monkeypatch.setattr(
        bc, "generate", lambda m, t, rows, cfg, generator=None: seen.append(cfg) or []
    )
    model, tok = build_random_tiny(seed=0)
    add_parallel_tags(tok, model)
    for block in (True, False):
        bc.sample(model, tok, ["q"], 1, block)
    assert [(c.max_blocks, c.at_block_limit) for c in seen] == [(1, "mask"), (0, "mask")]


SHIPPED_WORLD_SFT = REPO_ROOT / "data" / "tinyworld-sft"


@pytest.mark.skipif(
    not (SHIPPED_WORLD_SFT / "model.safetensors").exists(), reason="data/tinyworld-sft not shipped"
)
def test_shipped_tinyworld_sft_gains_from_a_forced_block_on_hard_items():
    """The start of TinyWorld's RL: on the first 40 held-out hard items (2 samples each, T = 1),
    a forced block beats forced plain. The card (200 x 4) says 69.5 % vs 43.1 %, +26.4 points;
    at n = 40 one SD of the paired gain is ~8 points and of the block's accuracy ~7, so the floors
    (gain > 0, block >= 45 %) sit ~3 SD below and only a broken model or engine fails."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pr1lib.experiments.blockcost import blockcost

    model = AutoModelForCausalLM.from_pretrained(SHIPPED_WORLD_SFT)
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_WORLD_SFT)
    hard = blockcost(
        model,
        tokenizer,
        ["tinyworld-hard"],
        n=40,
        k=2,
        max_completion_length=384,
        max_path_length=128,
    )["tinyworld-hard"]
    assert hard["parallel_ratio_block"] == 1.0 and hard["parallel_ratio_plain"] == 0.0
    assert hard["acc_block"] >= 0.45 and hard["diff"] > 0, hard


SHIPPED_WORLD_SFT_UNSEEN = REPO_ROOT / "data" / "tinyworld-sft-unseen"


@pytest.mark.skipif(
    not (SHIPPED_WORLD_SFT_UNSEEN / "model.safetensors").exists(),
    reason="data/tinyworld-sft-unseen not shipped",
)
def test_shipped_unseen_tinyworld_sft_probes_with_independent_paths():
    """The unseen SFT never sees a sibling path, so each forked path picks its cheap price on its
    own: the two paths of a block fix different prices about half of the time (independent
    probes: 0.49 measured), not never (the seen SFT forked: 0.01, copies) nor always (the seen SFT
    sampled plainly: 1.0, the teacher's split). 80 blocks: one SD of the share is ~0.06, so
    [0.2, 0.8] sits ~5 SD from 0.5 on each side."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pr1lib.experiments.blockcost import sample
    from pr1lib.format.grammar import path_ranges
    from pr1lib.format.prompts import chat_prompt

    model = AutoModelForCausalLM.from_pretrained(SHIPPED_WORLD_SFT_UNSEEN).eval()
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_WORLD_SFT_UNSEEN)
    prompts = [
        chat_prompt(r["question"], tokenizer, "tiny") for r in load_benchmark("tinyworld-hard", 40)
    ]
    texts = [
        t
        for group in sample(
            model,
            tokenizer,
            prompts,
            2,
            True,
            "forked",
            max_completion_length=384,
            max_path_length=128,
        )
        for t in group
    ]
    firsts = [[re.search(r"\d+", text[a:b]) for a, b in path_ranges(text)[:2]] for text in texts]
    pairs = [(f[0].group(), f[1].group()) for f in firsts if len(f) == 2 and all(f)]
    assert len(pairs) >= 0.9 * len(texts), len(pairs)  # nearly every block has two priced paths
    differ = sum(p != q for p, q in pairs) / len(pairs)
    assert 0.2 <= differ <= 0.8, differ

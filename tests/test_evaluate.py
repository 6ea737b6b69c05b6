"""Metrics, results file, runner, generate adapters, the ``eval`` command and the paper tables."""

from __future__ import annotations

import json
import random
from itertools import combinations
from pathlib import Path

import pytest
from _tiny import ids, steer, toy_model, toy_tokenizer
from hypothesis import given, settings
from hypothesis import strategies as st

from pr1lib.config import EvalConfig
from pr1lib.decoding.tokens import has_tags
from pr1lib.evaluation import evaluate as ev
from pr1lib.evaluation import metrics, samplers
from pr1lib.evaluation.paper import (
    TABLE2,
    TABLE2_COLUMNS,
    TABLE4,
    TABLE4_COLUMNS,
    paper_table,
    side_by_side,
    to_markdown,
)

BLOCK = "<Parallel><Path>{a}</Path><Path>{b}</Path></Parallel>\n<Summary>{s}</Summary>"


# ----------------------------------------------------------------------------- pass@k
def brute_pass_at_k(n: int, c: int, k: int) -> float:
    """Share of all k-subsets of n samples (c correct) that hold a correct one."""
    flags = [True] * c + [False] * (n - c)
    subsets = list(combinations(range(n), k))
    return sum(any(flags[i] for i in s) for s in subsets) / len(subsets)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 10).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))
    )
)
def test_pass_at_k_equals_brute_force_enumeration(case):
    n, c, k = case
    assert metrics.pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_k_random_small_cases_and_properties():
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 12)
        c, k = rng.randint(0, n), rng.randint(1, n)
        assert metrics.pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k))
        if k < n:  # more draws never hurt
            assert metrics.pass_at_k(n, c, k + 1) >= metrics.pass_at_k(n, c, k) - 1e-12
    assert metrics.pass_at_k(16, 4, 1) == pytest.approx(4 / 16)  # pass@1 = mean accuracy
    # k = n: any correct
    assert metrics.pass_at_k(16, 3, 16) == 1.0 and metrics.pass_at_k(16, 0, 16) == 0.0


@pytest.mark.parametrize("n, c, k", [(4, 5, 1), (4, -1, 1), (4, 1, 0), (4, 1, 5)])
def test_pass_at_k_rejects_impossible_inputs(n, c, k):
    with pytest.raises(ValueError):
        metrics.pass_at_k(n, c, k)


# ----------------------------------------------------------------------------- structure metrics
def test_path_overlap_orders_copies_above_different_paths():
    same = metrics.path_overlap("3 + 4 = 7", "3 + 4 = 7")
    near = metrics.path_overlap("3 + 4 = 7", "4 + 3 = 7")
    apart = metrics.path_overlap("3 + 4 = 7", "count up from three")
    assert same == 1.0 and apart == 0.0 < near < same  # no shared word at all


def test_sample_stats_positions_in_tokens_and_chars():
    tok = toy_tokenizer()
    text = "abcd" + BLOCK.format(a="x", b="y", s="z") + "\nFinal Answer: 1"
    chars = metrics.sample_stats(text)
    tokens = metrics.sample_stats(text, tok)
    assert chars["length"] == len(text) and chars["first_block_position"] == 4 / len(text)
    n_tokens = len(ids(tok, text))  # each tag is one token here, every other char one token
    assert tokens["length"] == n_tokens < len(text)
    assert tokens["first_block_position"] == pytest.approx(4 / n_tokens)
    assert tokens["blocks"] == 1 and tokens["valid"] and tokens["has_answer"]


def rows_for(
    texts_per_problem: list[list[str]], gold: str = "7", bench: str = "gsm8k"
) -> list[dict]:
    return [
        metrics.score_problem({"id": f"p{i}", "question": "q", "answer": gold}, texts, bench)
        for i, texts in enumerate(texts_per_problem)
    ]


def test_summarize_on_known_structures():
    blk = BLOCK.format(a="add 3 and 4", b="add 4 and 3", s="both 7")
    rows = rows_for(
        [
            [
                "pre " + blk + "\nFinal Answer: 7",
                "Final Answer: 7",
                "Final Answer: 8",
                "\\boxed{7}",
            ],
            [
                blk + blk + "\nFinal Answer: 1",
                "<Parallel><Path>x</Path></Parallel>",
                "nothing",
                "Final Answer: 7",
            ],
        ]
    )
    s = metrics.summarize(rows)
    assert (s["n"], s["k"]) == (2, 4)
    assert s["grader"] == "official"  # the eval default (pr1lib.config.DEFAULT_GRADERS)
    # official: boxed-only does not count
    assert s["accuracy"] == pytest.approx((2 / 4 + 1 / 4) / 2)
    assert s["accuracy_project"] == pytest.approx((3 / 4 + 1 / 4) / 2)
    assert s["pass_at_k"] == 1.0 and s["pass_curve_official"][1] == pytest.approx(s["accuracy"])
    assert s["parallel_ratio"] == pytest.approx(3 / 8)
    assert s["valid_ratio"] == pytest.approx(7 / 8)  # the one-path block is the only invalid sample
    assert s["blocks_per_response"] == pytest.approx(4 / 8)
    assert s["first_block_position"] == pytest.approx(
        (4 / len(rows[0]["samples"][0]["text"]) + 0 + 0) / 3
    )
    overlap = metrics.path_overlap("add 3 and 4", "add 4 and 3")
    assert s["path_overlap"] == pytest.approx(overlap) and s["path_diversity"] == pytest.approx(
        1 - overlap
    )
    assert s["length_unit"] == "chars"
    assert metrics.summarize(rows, "project")["accuracy"] == s["accuracy_project"]
    with pytest.raises(ValueError, match="unknown grader 'robust'"):
        metrics.summarize(rows, "robust")


def test_summarize_reads_results_files_written_before_the_graders():
    rows = rows_for([["Final Answer: 7", "\\boxed{7}"]])
    for row in rows:  # the old column names: strict = the official check, robust = the project's
        row["correct_strict"], row["correct_robust"] = (
            row.pop("correct_official"),
            row.pop("correct_project"),
        )
    s = metrics.summarize(rows)
    assert (s["accuracy_official"], s["accuracy_project"]) == (0.5, 1.0)


# ------------------------------------------------------------------------ results file and runner
def test_results_file_drops_a_torn_line_and_appends_cleanly(tmp_path):
    path = tmp_path / "r.jsonl"
    store = ev.ResultsFile(path)
    store.append({"id": "a", "k": 1})
    with open(path, "a") as f:
        f.write('{"id": "b", "k": 1, "samp')  # killed mid-write
    again = ev.ResultsFile(path)
    assert list(again.rows) == ["a"] and again.dropped == 1
    again.append({"id": "c", "k": 1})
    lines = path.read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["a", "c"]  # the torn tail was cut


class FakeSampler:
    """A GenerateFn that answers correctly on even samples and records what it was asked."""

    def __init__(self):
        self.prompts: list[str] = []

    def __call__(self, prompts: list[str], num_samples: int) -> list[list[str]]:
        self.prompts += prompts
        return [
            [f"Final Answer: {self.gold(p) if j % 2 == 0 else -1}" for j in range(num_samples)]
            for p in prompts
        ]

    @staticmethod
    def gold(prompt: str) -> str:
        return prompt.rsplit("=", 1)[-1].strip()


def records(n: int) -> list[dict]:
    return [{"id": f"q{i}", "question": f"x = {i}", "answer": str(i)} for i in range(n)]


def test_runner_resumes_and_only_generates_missing_problems(tmp_path):
    path = tmp_path / "m__b__seen.jsonl"
    first = FakeSampler()
    ev.evaluate_records(
        records(3), first, 4, "gsm8k", lambda q: q, path, batch_size=2, progress=False
    )
    assert len(first.prompts) == 3
    second = FakeSampler()
    rows = ev.evaluate_records(
        records(5), second, 4, "gsm8k", lambda q: q, path, batch_size=2, progress=False
    )
    assert second.prompts == ["x = 3", "x = 4"]  # only the new ids
    assert [r["id"] for r in rows] == [f"q{i}" for i in range(5)]
    assert all(r["correct_official"] == [True, False, True, False] for r in rows)
    assert metrics.summarize(rows)["accuracy"] == 0.5
    with pytest.raises(ValueError, match="k=\\[4\\]"):  # a file written with another k
        ev.evaluate_records(
            records(5), FakeSampler(), 2, "gsm8k", lambda q: q, path, progress=False
        )


def test_runner_rejects_a_sampler_with_the_wrong_shape():
    with pytest.raises(ValueError, match="completions"):
        ev.evaluate_records(
            records(2), lambda ps, k: [["x"]] * len(ps), 3, "gsm8k", lambda q: q, progress=False
        )


def test_run_eval_uses_the_training_prompt_and_saves_its_config(tmp_path):
    sampler = FakeSampler()
    cfg = EvalConfig(benchmark="tinygsm-easy", n=3, k=2, prompt_style="tiny")
    out = ev.run_eval(
        None, None, config=cfg, out_dir=tmp_path, tag="fake", generate_fn=sampler, progress=False
    )
    assert all(p.startswith("Problem: ") and p.endswith("\nSolution:\n") for p in sampler.prompts)
    assert (out["n"], out["k"], out["benchmark"], out["mode"]) == (3, 2, "tinygsm-easy", "seen")
    saved = json.loads((tmp_path / "fake__tinygsm-easy__seen.config.json").read_text())
    assert saved["type"] == "EvalConfig" and saved["k"] == 2
    assert len(Path(out["results"]).read_text().splitlines()) == 3
    with pytest.raises(ValueError, match="temperature=1.0, not 0.5"):  # other sampling, same file
        ev.run_eval(
            None,
            None,
            config=cfg.replace(temperature=0.5),
            out_dir=tmp_path,
            tag="fake",
            generate_fn=sampler,
            progress=False,
        )


# ----------------------------------------------------------------------------- generate adapters
@pytest.fixture(scope="module")
def toy():
    tok = toy_tokenizer()
    return toy_model(len(tok), layers=1), tok


def test_decode_keeps_tags_and_drops_pad_and_eos(toy):
    _, tok = toy
    text = "ab<Parallel><Path>c</Path>"
    assert (
        samplers.decode_completion(ids(tok, text) + [tok.eos_token_id, tok.pad_token_id, 5], tok)
        == text
    )


def test_hf_generate_fn_returns_k_tagged_texts_per_prompt(toy):
    model, tok = toy
    steer(model, {tok.convert_tokens_to_ids("<Parallel>"): 12.0})  # the model now loves <Parallel>
    try:
        out = samplers.hf_generate_fn(model, tok, max_new_tokens=3)(["Problem: 1+1", "Q"], 3)
        assert [len(o) for o in out] == [3, 3]
        assert all("<Parallel>" in text for texts in out for text in texts)  # tags survive decoding
        # lengths from the sampled ids, not a re-tokenisation
        stats = metrics.sample_stats(out[0][0], tok)
        assert stats["length"] == len(out[0][0].token_ids) <= 3
        first = out[0][0].token_ids.index(ids(tok, "<Parallel>")[0])
        assert stats["first_block_position"] == first / stats["length"]
    finally:
        model.lm_head = model.lm_head.head


@pytest.mark.parametrize("mode", ["seen", "forked"])
def test_rollout_engine_adapter(toy, mode):
    model, tok = toy
    cfg = EvalConfig(mode=mode, k=2, max_completion_length=6, max_path_length=3)
    out = ev.make_generate_fn(model, tok, cfg)(["Problem: 2+2", "Q"], 2)
    assert [len(o) for o in out] == [2, 2] and all(isinstance(t, str) for o in out for t in o)


def test_sample_rows_are_run_evals_rows_in_memory(toy, tmp_path):
    model, tok = toy
    cfg = EvalConfig(benchmark="tinyworld-hard", n=3, k=2, max_completion_length=6, seed=1)
    rows = ev.sample_rows(model, tok, cfg)
    # the same sampler (its generator seeded by cfg.seed); run_eval alone reseeds each batch, so
    # that a resumed eval repeats an uninterrupted one, while a stage's evaluation keeps its draws
    same = ev.make_generate_fn(model, tok, cfg)
    written = ev.run_eval(
        model, tok, config=cfg, out_dir=tmp_path, tag="toy", progress=False, generate_fn=same
    )
    kept = ev.ResultsFile(written["results"]).rows
    assert [r["samples"] for r in rows] == [kept[str(r["id"])]["samples"] for r in rows]
    assert metrics.summarize(rows)["accuracy"] == written["accuracy"]
    assert written["seconds"] >= 0 and written["mean_sequential_steps"] <= written["mean_length"]


@pytest.mark.parametrize("mode", ["reread", "forked"])
def test_the_rollout_adapter_samples_the_same_on_either_cache(toy, mode):
    """The evaluation's sampler on packed rows (the default for this model) and on the shared
    cache before them: the same completions (texts and token ids), problem by problem."""
    model, tok = toy
    steer(model, {tok.convert_tokens_to_ids("<Parallel>"): 3.0, tok.eos_token_id: 1.0})
    try:
        cfg = EvalConfig(mode=mode, k=3, max_completion_length=24, max_path_length=8)
        prompts = [f"Problem: {i}" for i in range(5)]
        out = [
            samplers.rollout_generate_fn(model, tok, cfg, cache=c)(prompts, 3)
            for c in (None, "shared")
        ]
        assert out[0] == out[1] and any("<Parallel>" in t for texts in out[0] for t in texts)
        ids = [[t.token_ids for t in texts] for texts in out[0]]
        assert ids == [[t.token_ids for t in texts] for texts in out[1]]
    finally:
        model.lm_head = model.lm_head.head


def test_forked_mode_without_tags_is_a_clear_error(toy):
    model, _ = toy
    from _tiny import EOS
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel({EOS: 0, "<unk>": 1, "a": 2}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    plain = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token=EOS, pad_token=EOS, unk_token="<unk>"
    )
    assert not has_tags(plain)
    with pytest.raises(ValueError, match="forked mode needs the rollout engine"):
        ev.make_generate_fn(model, plain, EvalConfig(mode="forked"))
    assert callable(ev.make_generate_fn(model, plain, EvalConfig(mode="seen")))


# ----------------------------------------------------------------------------- command line
def test_eval_command_prints_the_contract_json_last_and_resumes(toy, tmp_path, monkeypatch, capsys):
    from pr1lib.cli.main import main

    model, tok = toy
    monkeypatch.setattr(ev, "load_policy", lambda config=None, profile=None: (model, tok, None))
    argv = [
        "eval",
        "--profile",
        "smoke",
        "--model",
        "toy",
        "--data",
        "tinygsm-easy",
        "--n",
        "2",
        "--k",
        "2",
        "--mode",
        "forked",
        "--out",
        str(tmp_path),
        "--set",
        "max_completion_length=6",
    ]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"accuracy", "pass_at_k", "parallel_ratio", "valid_ratio", "n", "k"} <= set(result)
    assert (result["n"], result["k"], result["mode"]) == (2, 2, "forked")
    results = tmp_path / "toy__tinygsm-easy__forked.jsonl"
    assert len(results.read_text().splitlines()) == 2
    monkeypatch.setattr(ev, "make_generate_fn", lambda *a: pytest.fail("resume must not generate"))
    assert main(argv + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == result


# ----------------------------------------------------------------------------- paper tables
@pytest.mark.parametrize("table, columns", [(TABLE2, TABLE2_COLUMNS), (TABLE4, TABLE4_COLUMNS)])
def test_paper_avg_is_the_mean_of_the_mean_columns(table, columns):
    for row in table.values():
        means = [row[c] for c in columns if "mean@" in c]
        assert len(means) == 4 and sum(means) / 4 == pytest.approx(row["Avg"], abs=0.06), row[
            "method"
        ]


def test_side_by_side_never_mixes_paper_and_ours_in_one_column():
    summary = {
        "accuracy": 0.25,
        "pass_at_k": 0.5,
        "parallel_ratio": 0.5,
        "n": 10,
        "k": 4,
        "checker": "strict",
    }
    ours = {
        "base": {"tinygsm-hard": summary},
        "rl-seen": {"tinygsm-hard": summary, "gsm8k": summary},
        "sft-seen-lora": {"tinygsm-hard": summary},
    }
    table = side_by_side(ours, "tiny-2M")
    assert all(c.startswith(("paper: Qwen3-4B-Base | ", "ours: tiny-2M | ")) for c in table.columns)
    # extra row last
    assert list(table.index[:1]) == ["base model"] and table.index[-1] == "sft-seen-lora"
    assert table.loc["Parallel-R1-Seen", "paper: Qwen3-4B-Base | AIME25 mean@16"] == 19.2
    assert table.loc["Parallel-R1-Seen", "ours: tiny-2M | tinygsm-hard mean@4 (strict)"] == 25.0
    assert (
        table.loc["Parallel-R1-Seen", "ours: tiny-2M | Avg of mean@k (tinygsm-hard, gsm8k)"] == 25.0
    )
    assert "| Parallel-R1-Seen | 27.3 |" in to_markdown(table)
    assert paper_table(2).shape == (8, 9)


def test_sequential_steps_count_the_longest_path_only_where_paths_decode_side_by_side():
    from pr1lib.evaluation.metrics import accuracy_at_steps, score_problem

    block = (
        "<Parallel><Path>Toy 7, book 40: no</Path><Path>Toy 12, book 40: yes</Path></Parallel>\n"
        "<Summary>12 and 40</Summary>\nFinal Answer: 28"
    )
    record = {"id": "p", "question": "q", "answer": "28"}
    forked = score_problem(record, [block, "Final Answer: 28"], "tinyworld-hard", None, "forked")
    seen = score_problem(record, [block, "Final Answer: 28"], "tinyworld-hard", None, "seen")
    (with_block, plain), (same_block, same_plain) = forked["samples"], seen["samples"]
    shorter_path = len("<Path>Toy 7, book 40: no</Path>")
    assert with_block["sequential_steps"] == with_block["length"] - shorter_path
    assert same_block["sequential_steps"] == same_block["length"]  # one causal stream
    assert plain["sequential_steps"] == same_plain["sequential_steps"] == plain["length"]
    cap = with_block["sequential_steps"]  # the forked block fits, the serial one does not
    assert accuracy_at_steps([forked], "project", (cap,)) == {cap: 1.0}
    assert accuracy_at_steps([seen], "project", (cap,)) == {cap: 0.5}

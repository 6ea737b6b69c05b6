"""verl export (parquet layout) and the verl-signature reward (same core as the TRL rewards)."""

from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

import pandas as pd
import pyarrow.parquet as pq
import pytest

from pr1lib.format.prompts import PARALLEL_PROMPT_V3, prompt_text
from pr1lib.rewards.functions import BASE_MODES, REWARDS, alternating_reward
from pr1lib.rewards.hacking import HACKING_CASES, hacking_table
from pr1lib.training import verl


# ----------------------------------------------------------- the reward: one core, two signatures
def test_verl_reward_equals_trl_reward_on_the_hacking_table():
    table = {row["name"]: row for row in hacking_table()}
    for case in HACKING_CASES:
        for mode in BASE_MODES:
            trl_score = REWARDS[mode]([case["completion"]], [case["answer"]])[0]
            verl_score = verl.compute_score(
                "pr1/gsm8k", case["completion"], case["answer"], {"reward_mode": mode}
            )
            assert verl_score == trl_score == table[case["name"]][mode], (case["name"], mode)


def test_table_is_not_degenerate():
    # the equality above only means something if the cases spread over different scores
    scores = {
        verl.compute_score("pr1/gsm8k", c["completion"], c["answer"], mode="tiered")
        for c in HACKING_CASES
    }
    assert scores == {1.2, 1.0, -1.0}


def test_alternating_follows_verl_step_like_trl_follows_its_step():
    trl_alt = alternating_reward(window=10, parallel_steps=2)
    for case in HACKING_CASES:
        for verl_step in range(1, 31):  # verl counts from 1, TRL from 0
            trl = trl_alt(
                [case["completion"]],
                [case["answer"]],
                trainer_state=SimpleNamespace(global_step=verl_step - 1),
            )[0]
            ours = verl.compute_score(
                "pr1/dapo",
                case["completion"],
                case["answer"],
                {"reward_mode": "alternating", "global_steps": verl_step},
            )
            assert ours == trl, (case["name"], verl_step)


def test_alternating_uses_tiered_on_the_papers_steps():
    honest = HACKING_CASES[0]
    scores = {
        s: verl.compute_score(
            "d", honest["completion"], "12", {"global_steps": s}, mode="alternating"
        )
        for s in range(1, 31)
    }
    tiered_steps = [s for s, value in scores.items() if value == 1.2]
    assert tiered_steps == [9, 10, 19, 20, 29, 30]  # the paper: (step - 1) % 10 in {8, 9}
    assert verl.resolve_mode({"global_step": 10}, "alternating") == "tiered"  # the alias key


def test_alternating_without_a_step_raises_a_clear_error():
    with pytest.raises(verl.MissingStepError, match="global_steps"):
        verl.compute_score("pr1/dapo", "Final Answer: 12", "12", {"reward_mode": "alternating"})
    with pytest.raises(verl.MissingStepError):
        verl.compute_score("pr1/dapo", "Final Answer: 12", "12", None, mode="alternating")


def test_mode_precedence_and_unknown_mode():
    block = HACKING_CASES[0]["completion"]
    assert verl.compute_score("x", block, "12") == 1.0  # default: accuracy
    assert verl.compute_score("x", block, "12", {"reward_mode": "tiered"}) == 1.2
    # kwargs win
    assert verl.compute_score("x", block, "12", {"reward_mode": "tiered"}, mode="accuracy") == 1.0
    with pytest.raises(ValueError, match="unknown reward mode"):
        verl.compute_score("x", block, "12", {"reward_mode": "parallel"})


def test_text_with_special_tokens_is_scored_when_given():
    honest = HACKING_CASES[0]["completion"]
    stripped = (
        honest.replace("<Parallel>", "")
        .replace("</Parallel>", "")
        .replace("<Path>", "")
        .replace("</Path>", "")
        .replace("<Summary>", "")
        .replace("</Summary>", "")
    )
    # stock decode loses tags
    assert verl.compute_score("x", stripped, "12", mode="parallel_correct") == -1.0
    assert (
        verl.compute_score(
            "x", stripped, "12", mode="parallel_correct", solution_str_with_special_tokens=honest
        )
        == 1.0
    )


def test_detailed_score_reports_accuracy_whatever_the_mode():
    wrong_block = HACKING_CASES[0]["completion"].replace("Final Answer: 12", "Final Answer: 13")
    info = verl.compute_score_detailed("x", wrong_block, "12", {"reward_mode": "structure"})
    assert info == {"score": 1.0, "acc": 0.0, "valid": 1.0, "blocks": 1, "tiered": 0.0}


def test_module_loads_standalone_the_way_verl_loads_it():
    # verl imports custom_reward_function.path with spec_from_file_location under its own name
    spec = importlib.util.spec_from_file_location("custom_module", verl.reward_file())
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    case = HACKING_CASES[0]
    assert (
        module.compute_score(
            data_source="pr1/gsm8k",
            solution_str=case["completion"],
            ground_truth=case["answer"],
            extra_info={"reward_mode": "tiered"},
        )
        == 1.2
    )


# ---------------------------------------------------------------- the export
def _check_rl_frame(frame: pd.DataFrame, source: str, n: int) -> None:
    assert verl.schema_errors(frame) == []
    assert list(frame.columns) == list(verl.COLUMNS)
    assert len(frame) == n
    assert set(frame["data_source"]) == {f"pr1/{source}"} and set(frame["ability"]) == {"math"}
    first = frame.iloc[0]
    prompt = list(first["prompt"])
    assert len(prompt) == 1 and prompt[0]["role"] == "user"
    problem = first["extra_info"]["problem"]
    assert (
        prompt[0]["content"]
        == PARALLEL_PROMPT_V3.format(problem=problem)
        == first["extra_info"]["question"]
    )


def test_export_tinygsm_writes_train_and_test_parquet(tmp_path):
    result = verl.export_verl(tmp_path, ["tinygsm-easy"], limit=7)
    assert set(result["files"]) == {"tinygsm-easy/train", "tinygsm-easy/test"}
    train = pd.read_parquet(result["files"]["tinygsm-easy/train"]["path"])
    test = pd.read_parquet(result["files"]["tinygsm-easy/test"]["path"])
    _check_rl_frame(train, "tinygsm-easy", 7)
    _check_rl_frame(test, "tinygsm-easy", 7)
    assert set(e["reward_mode"] for e in train["extra_info"]) == {"alternating"}
    assert set(e["reward_mode"] for e in test["extra_info"]) == {"accuracy"}  # validation: accuracy
    problems = {
        name: {e["problem"] for e in frame["extra_info"]}
        for name, frame in (("train", train), ("test", test))
    }
    assert not problems["train"] & problems["test"]
    # the gold answer is the reference solution's final value
    for extra, reward in zip(train["extra_info"], train["reward_model"]):
        assert extra["answer"].rstrip().endswith(f"#### {reward['ground_truth']}")
    schema = pq.read_schema(result["files"]["tinygsm-easy/train"]["path"])
    assert str(schema.field("reward_model").type) == "struct<style: string, ground_truth: string>"
    assert str(schema.field("prompt").type).startswith(
        "list<element: struct<role: string, content: string>"
    )


def test_export_gsm8k_and_dapo_from_the_shared_data(tmp_path):
    from pr1lib.data.sources import DataNotFoundError, load_dapo, load_gsm8k

    try:
        gold = [r["answer"] for r in load_gsm8k("train", limit=4)]
        dapo_gold = [r["answer"] for r in load_dapo(limit=3)]
    except DataNotFoundError:
        pytest.skip("GSM8K/DAPO not available offline (set PR1_DATA_DIR)")
    result = verl.export_verl(tmp_path, ["gsm8k", "dapo"], limit=4)
    assert "dapo/test" not in result["files"]
    gsm = pd.read_parquet(result["files"]["gsm8k/train"]["path"])
    _check_rl_frame(gsm, "gsm8k", 4)
    assert [r["ground_truth"] for r in gsm["reward_model"]] == gold
    assert set(e["reward_mode"] for e in gsm["extra_info"]) == {"parallel_correct"}  # Stage 2
    dapo = pd.read_parquet(result["files"]["dapo/train"]["path"])
    _check_rl_frame(dapo, "dapo", 4)
    assert [r["ground_truth"] for r in dapo["reward_model"]][:3] == dapo_gold


def test_export_coldstart_for_verl_sft(tmp_path):
    from pr1lib.config import ColdStartConfig
    from pr1lib.data.coldstart import run_coldstart

    made = run_coldstart(
        ColdStartConfig(source="tinygsm-easy", limit=6, prompt_style="tiny"), tmp_path / "cs"
    )
    result = verl.export_verl(tmp_path / "verl", coldstart=tmp_path / "cs", limit=5)
    frame = pd.read_parquet(result["files"]["coldstart/train"]["path"])
    assert verl.schema_errors(frame) == [] and len(frame) == 5
    for row, src in zip(frame.to_dict("records"), made.dataset.select(range(5))):
        extra = row["extra_info"]
        # rebuilt in the paper's style
        assert extra["question"] == prompt_text(src["question"], "v3")
        assert extra["answer"] == src["completion"] and extra["stage"] == "sft"
        assert [m["role"] for m in row["messages"]] == ["user", "assistant"]
        assert row["messages"][1]["content"] == src["completion"]
        # a cold-start trace is correct and parallel, so the exported reward agrees
        assert (
            verl.compute_score(
                row["data_source"], extra["answer"], row["reward_model"]["ground_truth"], extra
            )
            == 1.2
        )


def test_schema_errors_catch_broken_rows():
    good = verl.verl_row("gsm8k", "1+1?", "2", 0)
    bad_prompt = {**good, "prompt": [{"role": "assistant", "content": "x"}]}
    bad_extra = {**good, "extra_info": {**good["extra_info"], "reward_mode": "vibes"}}
    errors = verl.schema_errors(pd.DataFrame([good, bad_prompt, bad_extra]))
    assert len(errors) == 2 and "row 1" in errors[0] and "row 2" in errors[1]


def test_cli_prints_json_last(tmp_path, capsys):
    from pr1lib.cli.main import main

    assert (
        main(["export-verl", "--source", "tinygsm-hard", "--limit", "3", "--out", str(tmp_path)])
        == 0
    )
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["files"]["tinygsm-hard/train"]["rows"] == 3
    assert result["custom_reward_function.path"].endswith("pr1lib/training/verl.py")
    assert pd.read_parquet(result["files"]["tinygsm-hard/test"]["path"]).shape == (3, 5)

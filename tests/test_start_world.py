"""A run trains in the world its start was trained in. Notebook 07's mid-training scaffold once
passed no world, so on ``tiny`` it trained and scored ``data/tinyworld-sft-unseen`` on TinyGSM
problems and showed 0.0 % at every step; a GRPO stage now refuses such a start in one line, and
the notebooks' studies carry ``NotebookConfig.world`` into every phase and arm."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pr1lib import worlds
from pr1lib.config import GRPOStageConfig, NotebookConfig
from pr1lib.experiments import midtraining
from pr1lib.training.grpo import GRPOSession
from pr1lib.training.runs import Run
from pr1lib.training.starts import check_start_world, start_world


def test_a_start_knows_the_world_it_was_trained_in(tmp_path):
    assert start_world("data/tinyworld-sft-unseen") == "tinyworld"  # shipped SFT: its source
    assert start_world("data/tinyworld-base") == "tinyworld"  # pretrained base: its world
    assert start_world("data/tiny-base") == "tinygsm"  # a card from before bases named one
    run = tmp_path / "grpo-run"
    (run / "merged").mkdir(parents=True)
    (run / "run_card.json").write_text(json.dumps({"data": "tinyworld-hard"}))
    assert start_world(run) == start_world(run / "merged") == "tinyworld"
    (run / "run_card.json").write_text(json.dumps({"config": {"source": "gsm8k"}}))
    assert start_world(run) is None  # real data: no world to hold it to
    mixed = {"config": {"source": "tinyworld-easy+tinygsm-hard"}}
    (run / "run_card.json").write_text(json.dumps(mixed))
    assert start_world(run) is None  # two worlds: none to hold it to
    assert start_world(None) is None and start_world("Qwen/Qwen3-4B-Base") is None


def test_a_grpo_stage_refuses_a_start_from_another_world_before_writing(tmp_path):
    tinygsm = GRPOStageConfig.for_stage(3, "smoke", variant="unseen")  # the profile's problems
    assert tinygsm.source == "tinygsm-hard"
    with pytest.raises(ValueError, match=r"TinyWorld problems.*world='tinyworld'"):
        GRPOSession(tinygsm, "data/tinyworld-sft-unseen", tmp_path / "run")
    assert not (tmp_path / "run").exists()  # refused before any folder was written
    check_start_world("tinyworld-hard", "data/tinyworld-sft-unseen")  # its own world passes
    check_start_world("gsm8k", "data/tinyworld-sft-unseen")  # real data: nothing to compare


def _fake_run_grpo(calls: list):
    """``run_grpo`` that holds its start to its problems' world, as ``GRPOSession`` does, and
    leaves a run folder whose card names its problems."""

    def run(cfg, init, out, evaluate_tiers=("hard",), before=None, **kwargs):
        check_start_world(cfg.source, init)
        calls.append((cfg.reward, cfg.source, cfg.seed))
        (Path(out) / "merged").mkdir(parents=True, exist_ok=True)
        (Path(out) / "run_card.json").write_text(json.dumps({"data": cfg.source}))
        metrics = {"hard": {"accuracy": 0.45, "parallel_ratio": 0.25}}
        result = {"reward": cfg.reward, "before": before or metrics, "after": metrics}
        rows = [{"step": s, "accuracy": 0.5} for s in range(1, cfg.max_steps + 1)]
        return Run({**result, "seconds": 1.0}, Path(out), None, None, rows)

    return run


def test_the_notebook_scaffold_and_its_control_train_in_their_start_world(tmp_path, monkeypatch):
    """Notebook 07's call on ``tiny``: both arms, both phases, on the hard problems of the world
    its unseen SFT was trained in; the same call without the world would train on TinyGSM."""
    calls: list = []
    monkeypatch.setattr(midtraining, "run_grpo", _fake_run_grpo(calls))
    nb = NotebookConfig.for_profile("tiny")
    start = worlds.get(nb.world).init("unseen")
    for arm, reward in midtraining.ARMS.items():
        result = midtraining.mid_training(
            "tiny",
            start,
            nb.switch,
            nb.total,
            world=nb.world,
            first_reward=reward,
            out=tmp_path / arm,
        )
        assert [h["step"] for h in result["held_out"]] == [0, nb.switch, nb.total]
    assert calls == [
        ("alternating", "tinyworld-hard", 0),
        ("accuracy", "tinyworld-hard", 1),
        ("accuracy", "tinyworld-hard", 0),  # the control: accuracy only, the same phases
        ("accuracy", "tinyworld-hard", 1),
    ]
    with pytest.raises(ValueError, match="world='tinyworld'"):
        midtraining.mid_training("tiny", start, nb.switch, nb.total, out=tmp_path / "no-world")


def test_the_study_card_compares_the_arms_on_the_same_problems():
    def result(accuracies: list[float], parallel: float) -> dict:
        per = {"accuracy": accuracies, "parallel": [parallel] * len(accuracies)}
        held = [
            {
                "step": s,
                "tier": "hard",
                "accuracy": sum(accuracies) / len(accuracies),
                "parallel_ratio": parallel,
                "per_problem": per,
            }
            for s in (0, 2, 4)
        ]
        curve = [{"step": s, "accuracy": 0.5, "parallel_ratio": parallel} for s in (1, 2, 3, 4)]
        return {"switch_step": 2, "total_steps": 4, "held_out": held, "curve": curve}

    by_arm = {
        "scaffold": [result([1.0, 1.0, 0.0, 1.0], 0.5)] * 2,
        "control": [result([0.0, 0.0, 0.0, 1.0], 0.25)] * 2,
    }
    summary = midtraining.scaffold_summary(by_arm)
    assert summary["contrasts"]["accuracy@4"]["diff"] == 50.0  # points, problems paired
    assert summary["contrasts"]["parallel@4"]["diff"] == 25.0
    assert summary["held_out"]["scaffold"]["4"]["per_seed"] == [0.75, 0.75]
    assert summary["per_step"]["control"]["3"] == {"accuracy": 0.5, "parallel_ratio": 0.25}
    lines = midtraining.scaffold_verdict(summary)
    assert lines[0].startswith("scaffold: accuracy 75.0 -> 75.0 -> 75.0 %")
    assert "does not show: the block rate does not fall after the switch" in lines[-1]

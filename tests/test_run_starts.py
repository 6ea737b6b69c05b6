"""When a study reuses a finished run instead of training it again (``training.runs``'
``same_start`` and ``finished_run``, ``experiments.curriculum``): a model is its content, so a
copy or a link of a cold start elsewhere is the same start and a retrained one is not; the config
compared is the one that trains."""

from __future__ import annotations

import json

from _probes import model_copy, run_folder

from pr1lib.config import GRPOStageConfig
from pr1lib.training.runs import finished_run, same_start, start_id


def test_a_copy_or_a_link_of_the_start_elsewhere_is_the_same_start(tmp_path):
    start = model_copy(tmp_path / "a" / "sft")
    recorded = start_id(start)
    copy = model_copy(tmp_path / "b" / "sft")
    link = tmp_path / "c"
    link.symlink_to(start)
    assert same_start(recorded, copy) and same_start(recorded, link)
    assert not same_start(recorded, model_copy(tmp_path / "d", tweak="retrained"))
    assert not same_start(recorded, None) and not same_start("runs/x#7c68", copy)


def test_a_finished_run_is_reused_from_a_copied_start_and_not_from_another_model(tmp_path):
    cfg = GRPOStageConfig.for_stage(3, "smoke")
    start = run_folder(tmp_path / "pilot" / "sft")
    run = tmp_path / "run"
    (run / "merged").mkdir(parents=True)
    card = {"config": cfg.to_dict(), "start": start_id(start), "steps": cfg.max_steps}
    card |= {"run_dir": "runs/moved-away", "merged": "runs/moved-away/merged"}
    (run / "run_card.json").write_text(json.dumps(card, default=str))
    reused = finished_run(run, cfg, run_folder(tmp_path / "study" / "sft"))
    assert reused is not None and reused["merged"] == str(run / "merged")  # where it is now
    assert finished_run(run, cfg, run_folder(tmp_path / "other", tweak="x")) is None


def test_a_finished_unseen_run_from_a_hidden_plan_start_is_reused(tmp_path, monkeypatch):
    """Bug: the study compared a finished run's card with its config before ``hide_plan`` was
    followed from the start, saw another config, resumed the run at its last step and rewrote its
    card (its training seconds lost). The config compared is the one that trains."""
    from pr1lib.experiments import curriculum

    start = run_folder(tmp_path / "sft")
    sft = {"type": "SFTStageConfig", "variant": "unseen", "hide_plan": True}
    (start / "config.json").write_text(json.dumps(sft))
    cfg = GRPOStageConfig.for_stage(3, "smoke", variant="unseen", seed=0).replace(hide_plan=True)
    run = tmp_path / "arm" / curriculum.run_name(cfg)
    (run / "merged").mkdir(parents=True)
    card = {"config": cfg.to_dict(), "start": start_id(start), "steps": cfg.max_steps}
    (run / "run_card.json").write_text(json.dumps({**card, "before": {}, "after": {}}, default=str))

    def retrain(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(curriculum, "run_grpo", retrain)
    result = curriculum.run_curriculum(
        "smoke", "unseen", start, 0, tmp_path / "arm", stages=(3,), sft_metrics={"hard": {}}
    )
    assert result["stages"][0]["run_dir"] == str(run)


def test_a_finished_run_asked_for_with_another_thread_count_is_the_same_run(tmp_path):
    """Bug: a rerun with another ``num_threads`` saw another config, resumed the finished run at
    its last step and rewrote its card. Threads and logging do not change what a run trains; a
    learning rate or an evaluation size does."""
    cfg = GRPOStageConfig.for_stage(3, "smoke").replace(num_threads=2, logging_steps=1)
    start = run_folder(tmp_path / "sft")
    run = tmp_path / "run"
    (run / "merged").mkdir(parents=True)
    card = {"config": cfg.to_dict(), "start": start_id(start), "steps": cfg.max_steps}
    (run / "run_card.json").write_text(json.dumps(card, default=str))
    assert finished_run(run, cfg.replace(num_threads=1, logging_steps=5), start) is not None
    assert finished_run(run, cfg.replace(learning_rate=3e-4), start) is None
    assert finished_run(run, cfg.replace(eval_n=7), start) is None

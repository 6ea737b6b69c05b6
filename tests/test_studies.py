"""Multi-run studies on the smoke profile, with the expensive runs faked where only the
plumbing is under test: the reward ablation's table and cache, the curriculum's reuse of finished
stages, the unseen Stage-2 study's cache, sampled accuracy kept beside the model, and run
folders claimed only by the run that began them."""

from __future__ import annotations

import json

import pytest

from pr1lib import ablation, studies
from pr1lib.ablation import ablation_table, ordering_reproduced
from pr1lib.cli import main
from pr1lib.config import ABLATION_ARMS, GRPOStageConfig
from pr1lib.runs import claim_run_dir, start_id
from pr1lib.studies import sampled_accuracy, seeds_summary


@pytest.mark.slow
def test_cli_prints_the_ablation_table_and_reuses_its_cache(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PR1_RUNS_DIR", str(tmp_path / "runs"))
    argv = ["grpo", "--profile", "smoke", "--out", str(tmp_path / "abl"), "--set", "max_steps=1"]
    assert main(argv) == 0
    first = capsys.readouterr().out.strip().splitlines()
    result = json.loads(first[-1])
    assert [r["reward"] for r in result["ablation"]] == list(ABLATION_ARMS)
    assert any(line.startswith("reward") and "paper_parallel_ratio_%" in line for line in first)
    monkeypatch.setattr(ablation, "run_grpo", lambda *a, **k: pytest.fail("the cached ablation was retrained"))
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == result
    assert main(argv[:5]) == 0  # plain `grpo --profile P`: prints the cached table whatever its config
    out = capsys.readouterr().out
    assert "cached results" in out and json.loads(out.strip().splitlines()[-1])["ablation"] == result["ablation"]


def test_unseen_stage2_effect_reuses_its_cache_only_for_the_same_start_and_overrides(tmp_path, monkeypatch):
    calls = []

    def fake_curriculum(profile, variant, init, seed, out, keep_stage2=False, **overrides):
        calls.append((str(init), keep_stage2, overrides))
        stage = {"stage": 3, "reward": "accuracy", "steps": 1, "after": {}, "train": {}}
        return {"stages": [stage], "sft": {"hard": {"accuracy": 0.1}}, "final": {"hard": {"accuracy": 0.2}}}

    monkeypatch.setattr(studies, "run_curriculum", fake_curriculum)
    first = studies.unseen_stage2_effect("smoke", "runs/a", out=tmp_path, max_steps=2)
    assert studies.unseen_stage2_effect("smoke", "runs/a", out=tmp_path, max_steps=2) == first
    assert len(calls) == 2
    studies.unseen_stage2_effect("smoke", "runs/b", out=tmp_path, max_steps=2)  # another start: rerun
    studies.unseen_stage2_effect("smoke", "runs/b", out=tmp_path, max_steps=3)  # other overrides
    assert [c[0] for c in calls] == ["runs/a", "runs/a", "runs/b", "runs/b", "runs/b", "runs/b"]
    assert [c[1] for c in calls[:2]] == [False, True] and calls[-1][2] == {"max_steps": 3}


def test_curriculum_reuses_a_finished_stage_only_with_the_same_config_and_start(tmp_path, monkeypatch):
    """A rerun (e.g. `--seeds 0 1 2` after seed 0 ran alone) neither retrains nor re-evaluates a
    stage whose run card matches; another start or config trains it again."""
    calls = []

    def fake_run(cfg, init, out, before=None, preflight=True):
        calls.append((cfg.stage, str(init)))
        (out / "merged").mkdir(parents=True, exist_ok=True)
        (out / "merged" / "model.safetensors").write_text(f"trained from {init}")  # new weights, new stamp
        result = {"stage": cfg.stage, "init": str(init), "start": start_id(init), "steps": cfg.max_steps,
                  "run_dir": str(out),
                  "before": before or {"hard": {"accuracy": 0.1}}, "after": {"hard": {"accuracy": 0.2}}}
        (out / "run_card.json").write_text(json.dumps({**result, "config": cfg.to_dict()}, default=str))
        return type("Run", (), {"result": result, "run_dir": out})()

    monkeypatch.setattr(studies, "run_grpo", fake_run)
    first = studies.run_curriculum("smoke", "seen", "runs/a", 0, tmp_path)
    assert [c[0] for c in calls] == [2, 3]
    again = studies.run_curriculum("smoke", "seen", "runs/a", 0, tmp_path)
    assert len(calls) == 2 and again["final"] == first["final"]  # both stages reused
    studies.run_curriculum("smoke", "seen", "runs/b", 0, tmp_path)  # another start: Stage 2 retrains, so Stage 3 too
    assert [c[0] for c in calls[2:]] == [2, 3]
    studies.run_curriculum("smoke", "seen", "runs/b", 0, tmp_path, max_steps=2)  # another config
    assert [c[0] for c in calls[4:]] == [2, 3]


def test_a_run_folder_begun_from_another_start_is_moved_aside_not_resumed(tmp_path):
    start = tmp_path / "sft"
    (start / "merged").mkdir(parents=True)
    (start / "merged" / "model.safetensors").write_bytes(b"v1")
    run = tmp_path / "run"
    claim_run_dir(run, start)
    (run / "trainer" / "checkpoint-2").mkdir(parents=True)
    claim_run_dir(run, start)  # the same start: a resume keeps the checkpoint
    assert (run / "trainer" / "checkpoint-2").is_dir() and not (tmp_path / "run.prev").exists()
    before = start_id(start)
    (start / "merged" / "model.safetensors").write_bytes(b"v2, retrained in place")
    assert start_id(start) != before
    claim_run_dir(run, start)  # same path, other weights: the old run is kept beside, not continued
    assert (tmp_path / "run.prev" / "trainer" / "checkpoint-2").is_dir() and not (run / "trainer").exists()
    legacy = tmp_path / "legacy"
    (legacy / "trainer" / "checkpoint-5").mkdir(parents=True)  # checkpoints without a start mark
    claim_run_dir(legacy, start)
    assert (tmp_path / "legacy.prev" / "trainer" / "checkpoint-5").is_dir()


def test_seeds_summary_reports_greedy_and_sampled_gains():
    def run(sft, final, s_sft, s_final):
        return {"sft": {"hard": {"accuracy": sft}}, "final": {"hard": {"accuracy": final}},
                "sampled": {"sft": {"mean_at_k": s_sft}, "final": {"mean_at_k": s_final}}}

    out = seeds_summary([run(0.2, 0.19, 0.06, 0.09), run(0.2, 0.18, 0.06, 0.08)])
    assert out["improved_seeds"] == 0 and out["gain_mean"] == pytest.approx(-0.015)
    assert out["sampled"]["improved_seeds"] == 2 and out["sampled"]["gain_mean"] == pytest.approx(0.025)
    assert "sampled" not in seeds_summary([{k: v for k, v in run(0.2, 0.2, 0.1, 0.1).items() if k != "sampled"}])


def test_sampled_accuracy_is_kept_beside_the_model_until_it_changes(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(studies, "load_run", lambda run_dir: (None, None))
    monkeypatch.setattr(studies, "run_eval", lambda model, tokenizer, config, progress: calls.append(
        config) or {"accuracy": 0.25, "pass_at_k": 0.5, "parallel_ratio": 1.0, "n": config.n})
    (tmp_path / "merged").mkdir()
    (tmp_path / "merged" / "model.safetensors").write_bytes(b"v1")
    cfg = GRPOStageConfig.for_profile("smoke")
    first = sampled_accuracy(tmp_path, cfg)
    assert first == {"mean_at_k": 0.25, "pass_at_k": 0.5, "parallel_ratio": 1.0, "k": 8, "n": cfg.eval_n}
    assert sampled_accuracy(tmp_path, cfg) == first and len(calls) == 1  # read back, not rerun
    assert calls[0].temperature == 1.0 and calls[0].k == 8
    sampled_accuracy(tmp_path, cfg.replace(seed=1))  # another evaluation: run again
    (tmp_path / "merged" / "model.safetensors").write_bytes(b"v2, retrained")
    sampled_accuracy(tmp_path, cfg.replace(seed=1))  # another model: run again
    assert len(calls) == 3


def test_ablation_table_orders_against_the_paper():
    def res(mode, ratio):
        hard = {"parallel_ratio": ratio, "accuracy": 0.5}
        return {"reward": mode, "steps": 5, "data": "tinygsm-hard", "before": {"hard": hard}, "after": {"hard": hard},
                "train": {"parallel_ratio": ratio}}

    rows = ablation_table([res("accuracy", 0.1), res("alternating", 0.6), res("structure", 0.9)])
    assert [r["paper_parallel_ratio_%"] for r in rows] == [13.6, 63.0, 80.3]
    assert ordering_reproduced(rows) is True
    assert ordering_reproduced(ablation_table([res("accuracy", 0.7), res("alternating", 0.6),
                                               res("structure", 0.9)])) is False
    assert ordering_reproduced(rows, "sampled_parallel_ratio_%") is None  # not measured: no verdict

    def sampled(mode, ratio):  # greedy says 0 % everywhere, sampling tells the arms apart
        at = lambda r: {"parallel_ratio": r, "mean_at_k": 0.25}  # noqa: E731
        return {**res(mode, 0.0), "sampled": {"start": at(0.4), "final": at(ratio)}}

    rows = ablation_table([sampled("accuracy", 0.05), sampled("alternating", 0.3), sampled("structure", 0.95)])
    assert [r["sampled_parallel_ratio_%"] for r in rows] == [5.0, 30.0, 95.0]
    assert {r["start_sampled_parallel_ratio_%"] for r in rows} == {40.0} and rows[0]["sampled_accuracy_%"] == 25.0
    assert ordering_reproduced(rows) is False and ordering_reproduced(rows, "sampled_parallel_ratio_%") is True

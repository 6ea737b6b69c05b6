"""GRPO wiring on the smoke profile: every reward mode trains, the alternating schedule is logged
truthfully, an interrupted run resumes to the same weights, and the unseen log-probs are the
path-isolated ones (and equal TRL's own when there is no block)."""

from __future__ import annotations

import copy
import json
import os

import pytest
import torch

from pr1lib.config import GRPOStageConfig
from pr1lib.grpo import (ABLATION_MODES, GRPOSession, ParallelGRPOTrainer, StopAt, ablation_table, check_config,
                         load_policy, model_config, ordering_reproduced, stage_config, trl_args)
from pr1lib.rewards import schedule
from pr1lib.widgets import PanelState, run_next

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


@pytest.fixture(scope="module")
def base():
    """One smoke policy (random tiny Qwen3 + tags + LoRA config); tests train deep copies."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    cfg = stage_config(3, "smoke")
    yield load_policy(cfg, model_config(cfg, "smoke"))
    torch.set_num_threads(before)


def fresh(base):
    model, tokenizer, lora = base
    return copy.deepcopy(model), tokenizer, copy.deepcopy(lora)


def varied_reward(completions, answer, **kwargs):
    """A reward with spread in every group (the random smoke model never answers correctly)."""
    return [float(len(c) % 5) for c in completions]


def trainable(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


# ----------------------------------------------------------------------------- every mode, 3 steps
@pytest.mark.parametrize("mode, variant", [("accuracy", "seen"), ("parallel_correct", "seen"), ("tiered", "unseen"),
                                           ("structure", "seen"), ("alternating", "seen")])
def test_each_reward_mode_trains_three_steps_and_logs_its_term(base, tmp_path, mode, variant):
    cfg = stage_config(3, "smoke", reward=mode, window=3, parallel_steps=1, variant=variant)
    session = GRPOSession(cfg, "smoke", out=tmp_path, policy=fresh(base))
    assert session.run() == 3
    rows = session.rows
    assert [r["step"] for r in rows] == [1, 2, 3]
    name = "alternating_reward" if mode == "alternating" else f"{mode}_reward"
    assert all(f"rewards/{name}/mean" in r for r in rows)
    if mode == "alternating":  # the logged mode follows the schedule (global steps 0, 1, 2)
        expected = [m == "tiered" for m in schedule(3, window=3, parallel_steps=1)]
        assert [bool(r["reward_mode/tiered"]) for r in rows] == expected == [False, False, True]
        used = ["tiered" if t else "accuracy" for t in expected]
    else:
        assert not any("reward_mode/tiered" in r for r in rows)
        used = [mode] * 3
    for row, term in zip(rows, used):  # the trained reward is the active term's score
        assert row["reward"] == pytest.approx(row[f"term/{term}"], abs=1e-6)
    assert (tmp_path / "metrics.csv").read_text().count("\n") == 4  # header + 3 rows
    assert json.loads((tmp_path / "config.json").read_text())["reward"] == mode


def test_paper_knobs_reach_trl(tmp_path):
    cfg = stage_config(3, "paper")
    args = trl_args(cfg, tmp_path, model_config(cfg, "paper"))
    knobs = (args.num_generations, args.epsilon, args.epsilon_high, args.beta, args.temperature)
    assert knobs == (8, 0.2, 0.28, 0.0, 1.0)
    assert args.learning_rate == 1e-6 and args.lr_scheduler_type == "constant" and args.loss_type == "dapo"
    s1 = trl_args(stage_config(3, "paper", reward="accuracy"), tmp_path, model_config(cfg, "paper"))
    assert s1.epsilon_high == 0.2  # clip-higher only for the alternating (S2) run
    with pytest.raises(ValueError, match="counts completions"):
        check_config(cfg.replace(per_device_train_batch_size=12))


# ----------------------------------------------------------------------------- resume
@pytest.mark.slow
def test_interrupted_run_resumes_to_the_same_weights(base, tmp_path):
    """Stop after step 2 (a disconnect), resume in a new session from the checkpoint, reach step 4:
    the data order, the sampled completions and the weights equal those of an uninterrupted run."""
    cfg = stage_config(3, "smoke", reward="accuracy", max_steps=4, save_steps=2)
    seen: dict[str, list] = {"whole": [], "resumed": []}

    def recorder(tag):
        def varied(completions, answer, trainer_state=None, prompts=None, **kwargs):
            seen[tag].append((trainer_state.global_step, prompts[0], completions[0]))
            return varied_reward(completions, answer)
        varied.__name__ = "varied_reward"
        return varied

    whole = GRPOSession(cfg, "smoke", out=tmp_path / "whole", policy=fresh(base), rewards=[recorder("whole")])
    whole.run()
    cut = GRPOSession(cfg, "smoke", out=tmp_path / "cut", policy=fresh(base), rewards=[recorder("resumed")])
    assert cut.run(callbacks=[StopAt(2)]) == 2
    again = GRPOSession(cfg, "smoke", out=tmp_path / "cut", policy=fresh(base), rewards=[recorder("resumed")])
    assert again.step == 2 and again.run() == 4
    assert seen["resumed"] == seen["whole"] and [s for s, _, _ in seen["whole"]] == [0, 1, 2, 3]
    a, b = trainable(whole.policy), trainable(again.policy)
    assert max((a[n] - b[n]).abs().max().item() for n in a) <= 1e-5
    assert max(a[n].abs().max().item() for n in a if "lora_B" in n) > 0  # it did train
    assert [r["step"] for r in again.rows] == [1, 2, 3, 4]  # the CSV history survives the restart
    rerun = GRPOSession(cfg, "smoke", out=tmp_path / "cut", policy=fresh(base), rewards=[varied_reward])
    assert rerun.run() == 4 and len(seen["resumed"]) == 4  # done already: loads step 4, trains nothing
    c = trainable(rerun.policy)
    assert all(torch.equal(b[n], c[n]) for n in b) and len(rerun.rows) == 4


@pytest.mark.slow
def test_panel_runs_the_next_steps_from_the_last_checkpoint(base, tmp_path):
    cfg = stage_config(3, "smoke", reward="accuracy", max_steps=4, save_steps=100)
    session = GRPOSession(cfg, "smoke", out=tmp_path, policy=fresh(base), rewards=[varied_reward])
    assert run_next(session, PanelState(reward="accuracy", steps=2)) == 2
    assert run_next(session, PanelState(reward="accuracy", steps=1)) == 3
    assert session.cfg.reward == "accuracy" and [r["step"] for r in session.rows] == [1, 2, 3]


# ----------------------------------------------------------------------------- unseen log-probs
def _trainer(base, tmp_path, variant: str) -> ParallelGRPOTrainer:
    from pr1lib.grpo import build_trainer, prompt_dataset

    cfg = stage_config(3, "smoke", variant=variant)
    model, tok, _ = base
    data = prompt_dataset(cfg, tok, "tiny", "smoke")
    return build_trainer(cfg, copy.deepcopy(model), tok, None, data, tmp_path / variant, model_config(cfg, "smoke"))


def _batch(tok, prompts, completions):
    """TRL's layout: prompts left-padded, completions right-padded; returns ids, 2D mask, width."""
    p = [tok.encode(x, add_special_tokens=False) for x in prompts]
    c = [tok.encode(x, add_special_tokens=False) for x in completions]
    P, C, pad = max(map(len, p)), max(map(len, c)), tok.pad_token_id
    ids = [[pad] * (P - len(a)) + a + b + [pad] * (C - len(b)) for a, b in zip(p, c)]
    mask = [[0] * (P - len(a)) + [1] * (len(a) + len(b)) + [0] * (C - len(b)) for a, b in zip(p, c)]
    return torch.tensor(ids), torch.tensor(mask), C


def test_unseen_logprobs_isolate_paths_and_equal_trl_without_blocks(base, tmp_path):
    from pr1lib.structure import structured_logprobs

    seen, unseen = _trainer(base, tmp_path, "seen"), _trainer(base, tmp_path, "unseen")
    tok = seen.processing_class
    prompts = ["Problem: Tom has 3 pens.\nSolution:\n", "Problem: 2+2?\nSolution:\n"]
    plain = ["He has 3 pens.\nFinal Answer: 3", "2+2=4\nFinal Answer: 4"]
    ids, mask, k = _batch(tok, prompts, plain)
    with torch.no_grad():
        lp_seen = seen._get_per_token_logps_and_entropies(seen.model, ids, mask, k)[0]
        lp_unseen = unseen._get_per_token_logps_and_entropies(seen.model, ids, mask, k)[0]
    real = mask[:, -k:].bool()
    assert torch.allclose(lp_seen[real], lp_unseen[real], atol=1e-5)  # no block: the same as stock TRL

    block = ["<Parallel><Path>3+1=4</Path><Path>1+3=4</Path></Parallel>\n<Summary>4</Summary>\nFinal Answer: 4"] * 2
    ids, mask, k = _batch(tok, prompts, block)
    with torch.no_grad():
        lp_seen = seen._get_per_token_logps_and_entropies(seen.model, ids, mask, k)[0]
        lp_unseen = unseen._get_per_token_logps_and_entropies(seen.model, ids, mask, k)[0]
        # reference: the same sequences right-padded, scored by pr1lib.structure directly
        rows = [r[m.bool()].tolist() for r, m in zip(ids, mask)]
        width = max(map(len, rows))
        right = torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in rows])
        real_r = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        starts = [len(r) - len(tok.encode(block[0], add_special_tokens=False)) for r in rows]
        ref = structured_logprobs(seen.model, right, tok, "unseen", starts, padding_mask=real_r)
    n = len(tok.encode(block[0], add_special_tokens=False))
    for b, s in enumerate(starts):
        assert torch.allclose(lp_unseen[b, :n], ref[b, s:s + n], atol=1e-5)
    second_path = len(tok.encode("<Parallel><Path>3+1=4</Path>", add_special_tokens=False))
    assert torch.allclose(lp_unseen[:, :second_path], lp_seen[:, :second_path], atol=1e-5)  # trunk + path 1
    assert not torch.allclose(lp_unseen[:, second_path:n], lp_seen[:, second_path:n], atol=1e-4)  # path 2 on


# ----------------------------------------------------------------------------- ablation + CLI
@pytest.mark.slow
def test_cli_prints_the_ablation_table_and_reuses_its_cache(tmp_path, capsys, monkeypatch):
    from pr1lib import grpo
    from pr1lib.cli import main

    monkeypatch.setenv("PR1_RUNS_DIR", str(tmp_path / "runs"))
    argv = ["grpo", "--profile", "smoke", "--out", str(tmp_path / "abl"), "--set", "max_steps=1"]
    assert main(argv) == 0
    first = capsys.readouterr().out.strip().splitlines()
    result = json.loads(first[-1])
    assert [r["reward"] for r in result["ablation"]] == list(ABLATION_MODES)
    assert any(line.startswith("reward") and "paper_parallel_ratio_%" in line for line in first)
    monkeypatch.setattr(grpo, "run_grpo", lambda *a, **k: pytest.fail("the cached ablation was retrained"))
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == result
    assert main(argv[:5]) == 0  # plain `grpo --profile P`: prints the cached table whatever its config
    out = capsys.readouterr().out
    assert "cached results" in out and json.loads(out.strip().splitlines()[-1])["ablation"] == result["ablation"]


def test_unseen_stage2_effect_reuses_its_cache_only_for_the_same_start_and_overrides(tmp_path, monkeypatch):
    import pr1lib.grpo as grpo

    calls = []

    def fake_curriculum(profile, variant, init, seed, out, keep_stage2=False, **overrides):
        calls.append((str(init), keep_stage2, overrides))
        stage = {"stage": 3, "reward": "accuracy", "steps": 1, "after": {}, "train": {}}
        return {"stages": [stage], "sft": {"hard": {"accuracy": 0.1}}, "final": {"hard": {"accuracy": 0.2}}}

    monkeypatch.setattr(grpo, "run_curriculum", fake_curriculum)
    first = grpo.unseen_stage2_effect("smoke", "runs/a", out=tmp_path, max_steps=2)
    assert grpo.unseen_stage2_effect("smoke", "runs/a", out=tmp_path, max_steps=2) == first and len(calls) == 2
    grpo.unseen_stage2_effect("smoke", "runs/b", out=tmp_path, max_steps=2)  # another start: rerun
    grpo.unseen_stage2_effect("smoke", "runs/b", out=tmp_path, max_steps=3)  # other overrides: rerun
    assert [c[0] for c in calls] == ["runs/a", "runs/a", "runs/b", "runs/b", "runs/b", "runs/b"]
    assert [c[1] for c in calls[:2]] == [False, True] and calls[-1][2] == {"max_steps": 3}


def test_curriculum_reuses_a_finished_stage_only_with_the_same_config_and_start(tmp_path, monkeypatch):
    """A rerun (e.g. `--seeds 0 1 2` after seed 0 ran alone) neither retrains nor re-evaluates a
    stage whose run card matches; another start or config trains it again."""
    import pr1lib.grpo as grpo

    calls = []

    def fake_run(cfg, profile, init, out, before=None, preflight=True):
        calls.append((cfg.stage, str(init)))
        (out / "merged").mkdir(parents=True, exist_ok=True)
        (out / "merged" / "model.safetensors").write_text(f"trained from {init}")  # new weights, new stamp
        result = {"stage": cfg.stage, "init": str(init), "start": grpo.start_id(init), "steps": cfg.max_steps,
                  "run_dir": str(out),
                  "before": before or {"hard": {"accuracy": 0.1}}, "after": {"hard": {"accuracy": 0.2}}}
        (out / "run_card.json").write_text(json.dumps({**result, "config": cfg.to_dict()}, default=str))
        return type("Run", (), {"result": result, "run_dir": out})()

    monkeypatch.setattr(grpo, "run_grpo", fake_run)
    first = grpo.run_curriculum("smoke", "seen", "runs/a", 0, tmp_path)
    assert [c[0] for c in calls] == [2, 3]
    again = grpo.run_curriculum("smoke", "seen", "runs/a", 0, tmp_path)
    assert len(calls) == 2 and again["final"] == first["final"]  # both stages reused
    grpo.run_curriculum("smoke", "seen", "runs/b", 0, tmp_path)  # another start: Stage 2 retrains, so Stage 3 too
    assert [c[0] for c in calls[2:]] == [2, 3]
    grpo.run_curriculum("smoke", "seen", "runs/b", 0, tmp_path, max_steps=2)  # another config
    assert [c[0] for c in calls[4:]] == [2, 3]


def test_a_run_folder_begun_from_another_start_is_moved_aside_not_resumed(tmp_path):
    from pr1lib.grpo import claim_run_dir, start_id

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
    from pr1lib.grpo import seeds_summary

    def run(sft, final, s_sft, s_final):
        return {"sft": {"hard": {"accuracy": sft}}, "final": {"hard": {"accuracy": final}},
                "sampled": {"sft": {"mean_at_k": s_sft}, "final": {"mean_at_k": s_final}}}

    out = seeds_summary([run(0.2, 0.19, 0.06, 0.09), run(0.2, 0.18, 0.06, 0.08)])
    assert out["improved_seeds"] == 0 and out["gain_mean"] == pytest.approx(-0.015)
    assert out["sampled"]["improved_seeds"] == 2 and out["sampled"]["gain_mean"] == pytest.approx(0.025)
    assert "sampled" not in seeds_summary([{k: v for k, v in run(0.2, 0.2, 0.1, 0.1).items() if k != "sampled"}])


def test_sampled_accuracy_is_kept_beside_the_model_until_it_changes(tmp_path, monkeypatch):
    import pr1lib.evaluate
    import pr1lib.sft
    from pr1lib.grpo import sampled_accuracy

    calls = []
    monkeypatch.setattr(pr1lib.sft, "load_run", lambda run_dir: (None, None))
    monkeypatch.setattr(pr1lib.evaluate, "run_eval", lambda model, tokenizer, config, progress: calls.append(
        config) or {"accuracy": 0.25, "pass_at_k": 0.5, "parallel_ratio": 1.0, "n": config.n})
    (tmp_path / "merged").mkdir()
    (tmp_path / "merged" / "model.safetensors").write_bytes(b"v1")
    cfg = GRPOStageConfig.for_profile("smoke")
    first = sampled_accuracy(tmp_path, cfg, "smoke")
    assert first == {"mean_at_k": 0.25, "pass_at_k": 0.5, "parallel_ratio": 1.0, "k": 8, "n": cfg.eval_n}
    assert sampled_accuracy(tmp_path, cfg, "smoke") == first and len(calls) == 1  # read back, not rerun
    assert calls[0].temperature == 1.0 and calls[0].k == 8
    sampled_accuracy(tmp_path, cfg.replace(seed=1), "smoke")  # another evaluation: run again
    (tmp_path / "merged" / "model.safetensors").write_bytes(b"v2, retrained")
    sampled_accuracy(tmp_path, cfg.replace(seed=1), "smoke")  # another model: run again
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


# ----------------------------------------------------------------------------- unseen + forked, end to end
def test_unseen_grpo_with_forked_rollouts_trains_three_steps(base, tmp_path, monkeypatch):
    """The unseen trainer subclass with the forked engine: rollouts really fork (a logit bias makes
    the random smoke model open blocks), three optimizer steps run, and the LoRA weights move."""
    import pr1lib.rollout as rollout

    model, tok, lora = fresh(base)
    bias = torch.zeros(model.config.vocab_size)  # (V,)
    bias[tok.convert_tokens_to_ids("<Parallel>")] = 6.0

    def steer(module, inputs, out):  # sampling sees the bias; TRL's fused log-prob path has no logits
        if getattr(out, "logits", None) is not None:
            out.logits = out.logits + bias
        return out

    model.register_forward_hook(steer)
    blocks, generate = [], rollout.generate

    def counting(*args, **kwargs):
        out = generate(*args, **kwargs)
        blocks.append(sum(r.blocks for r in out))
        return out

    monkeypatch.setattr(rollout, "generate", counting)
    cfg = stage_config(3, "smoke", reward="accuracy", variant="unseen", max_steps=3)
    assert cfg.rollout_mode == "forked"
    session = GRPOSession(cfg, "smoke", out=tmp_path, policy=(model, tok, lora), rewards=[varied_reward])
    assert session.run() == 3 and isinstance(session.trainer, ParallelGRPOTrainer)
    assert len(blocks) == 3 and all(b > 0 for b in blocks), blocks  # every step's rollouts forked
    lora_b = [p for n, p in session.policy.named_parameters() if "lora_B" in n]
    assert lora_b and max(p.abs().max().item() for p in lora_b) > 0  # LoRA B starts at zero: it trained

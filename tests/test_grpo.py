"""GRPO wiring on the smoke profile: every reward mode trains, the alternating schedule is logged
truthfully, an interrupted run resumes to the same weights, and the unseen log-probs are the
path-isolated ones (and equal TRL's own when there is no block)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os

import pytest
import torch
from conftest import fresh

import pr1lib.training.completions
import pr1lib.training.grpo
from pr1lib.config import GRPOStageConfig
from pr1lib.decoding.models import stage_model_config
from pr1lib.decoding.structure import structured_logprobs
from pr1lib.notebook.panel import PanelState, run_next, run_to
from pr1lib.rewards.functions import schedule
from pr1lib.training.buckets import loss_head
from pr1lib.training.grpo import GRPOSession
from pr1lib.training.grpo_trainer import (
    ParallelGRPOTrainer,
    StopAt,
    build_trainer,
    check_config,
    prompt_dataset,
    trl_args,
)

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def varied_reward(completions, answer, **kwargs):
    """A reward with spread in every group (the random smoke model never answers correctly)."""
    return [float(len(c) % 5) for c in completions]


def trainable(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


# ----------------------------------------------------------------------------- every mode, 3 steps
@pytest.mark.parametrize(
    "mode, variant",
    [
        ("accuracy", "seen"),
        ("parallel_correct", "seen"),
        ("tiered", "unseen"),
        ("structure", "seen"),
        ("alternating", "seen"),
    ],
)
def test_each_reward_mode_trains_three_steps_and_logs_its_term(base, tmp_path, mode, variant):
    cfg = GRPOStageConfig.for_stage(
        3, "smoke", reward=mode, window=3, parallel_steps=1, variant=variant
    )
    session = GRPOSession(cfg, out=tmp_path, policy=fresh(base))
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
    cfg = GRPOStageConfig.for_stage(3, "paper")
    args = trl_args(cfg, tmp_path, stage_model_config(cfg))
    knobs = (args.num_generations, args.epsilon, args.epsilon_high, args.beta, args.temperature)
    assert knobs == (8, 0.2, 0.28, 0.0, 1.0)
    assert (
        args.learning_rate == 1e-6
        and args.lr_scheduler_type == "constant"
        and args.loss_type == "dapo"
    )
    s1 = trl_args(
        GRPOStageConfig.for_stage(3, "paper", reward="accuracy"), tmp_path, stage_model_config(cfg)
    )
    assert s1.epsilon_high == 0.2  # clip-higher only for the alternating (S2) run
    with pytest.raises(ValueError, match="counts completions"):
        check_config(cfg.replace(per_device_train_batch_size=12))


# ----------------------------------------------------------------------------- resume
@pytest.mark.slow
def test_interrupted_run_resumes_to_the_same_weights(base, tmp_path):
    """Stop after step 2 (a disconnect), resume in a new session from the checkpoint, reach step 4:
    the data order, the sampled completions and the weights equal those of an uninterrupted run."""
    cfg = GRPOStageConfig.for_stage(3, "smoke", reward="accuracy", max_steps=4, save_steps=2)
    seen: dict[str, list] = {"whole": [], "resumed": []}

    def recorder(tag):
        def varied(completions, answer, trainer_state=None, prompts=None, **kwargs):
            seen[tag].append((trainer_state.global_step, prompts[0], completions[0]))
            return varied_reward(completions, answer)

        varied.__name__ = "varied_reward"
        return varied

    whole = GRPOSession(
        cfg, out=tmp_path / "whole", policy=fresh(base), rewards=[recorder("whole")]
    )
    whole.run()
    cut = GRPOSession(cfg, out=tmp_path / "cut", policy=fresh(base), rewards=[recorder("resumed")])
    assert cut.run(callbacks=[StopAt(2)]) == 2
    again = GRPOSession(
        cfg, out=tmp_path / "cut", policy=fresh(base), rewards=[recorder("resumed")]
    )
    assert again.step == 2 and again.run() == 4
    assert seen["resumed"] == seen["whole"] and [s for s, _, _ in seen["whole"]] == [0, 1, 2, 3]
    a, b = trainable(whole.policy), trainable(again.policy)
    assert max((a[n] - b[n]).abs().max().item() for n in a) <= 1e-5
    assert max(a[n].abs().max().item() for n in a if "lora_B" in n) > 0  # it did train
    assert [r["step"] for r in again.rows] == [1, 2, 3, 4]  # the CSV history survives the restart
    rerun = GRPOSession(cfg, out=tmp_path / "cut", policy=fresh(base), rewards=[varied_reward])
    # done already: loads step 4, trains nothing
    assert rerun.run() == 4 and len(seen["resumed"]) == 4
    c = trainable(rerun.policy)
    assert all(torch.equal(b[n], c[n]) for n in b) and len(rerun.rows) == 4


@pytest.mark.slow
def test_panel_runs_the_next_steps_from_the_last_checkpoint(base, tmp_path):
    cfg = GRPOStageConfig.for_stage(3, "smoke", reward="accuracy", max_steps=4, save_steps=100)
    session = GRPOSession(cfg, out=tmp_path, policy=fresh(base), rewards=[varied_reward])
    assert run_next(session, PanelState(reward="accuracy", steps=2)) == 2
    assert run_next(session, PanelState(reward="accuracy", steps=1)) == 3
    assert session.cfg.reward == "accuracy" and [r["step"] for r in session.rows] == [1, 2, 3]


def test_a_panel_click_between_two_run_alls_never_strands_stage_3(base, tmp_path, monkeypatch):
    """Notebook 06 as the issue's tinkerer ran it: Run All, one press of Stage 2's button, Run All
    again. Stage 2 goes on from the click, Stage 3 starts over from it (its old run kept as
    ``stage3.prev``) with one line naming no machine path, and a third Run All changes nothing."""
    monkeypatch.setenv("PR1_RUNS_DIR", str(tmp_path))
    two, three = (
        GRPOStageConfig.for_stage(s, "smoke", reward="accuracy", max_steps=1, save_steps=100)
        for s in (2, 3)
    )

    def run_all(lines: list[str]) -> GRPOSession:  # the two training cells of notebook 06
        stage2 = GRPOSession(
            two, None, tmp_path / "stage2", follow=True, policy=fresh(base), rewards=[varied_reward]
        )
        lines.append(run_to(stage2, PanelState(reward="accuracy"), 1, "Stage 2"))
        stage2.save()
        stage3 = GRPOSession(
            three,
            tmp_path / "stage2",
            tmp_path / "stage3",
            follow=True,
            policy=fresh(base),
            rewards=[varied_reward],
        )
        lines.append(run_to(stage3, PanelState(reward="accuracy"), 1, "Stage 3"))
        return stage2

    first: list[str] = []
    stage2 = run_all(first)
    assert first == ["Stage 2: trained steps 1-1 of 1", "Stage 3: trained steps 1-1 of 1"]
    assert run_next(stage2, PanelState(reward="accuracy", steps=1)) == 2  # the click
    again, printed = [], io.StringIO()
    with contextlib.redirect_stdout(printed):
        run_all(again)
    note = [line for line in printed.getvalue().splitlines() if line.startswith("note: moved")]
    assert note == [
        "note: moved $PR1_RUNS_DIR/stage3 to stage3.prev: it held a run begun from an earlier "
        "$PR1_RUNS_DIR/stage2 (trained since); now from $PR1_RUNS_DIR/stage2"
    ]
    assert again[0].startswith("Stage 2: at step 2, 1 past this notebook's 1")
    assert again[1] == "Stage 3: trained steps 1-1 of 1"  # from the Stage 2 of the click
    assert (tmp_path / "stage3.prev" / "trainer" / "checkpoint-1").is_dir()  # kept, not lost
    third: list[str] = []
    run_all(third)  # nothing changed since: Stage 3 resumes, nothing moves
    assert third[1] == "Stage 3: at step 1 of 1 already (its last checkpoint, loaded)"
    assert not (tmp_path / "stage3.prev-2").exists()


# ----------------------------------------------------------------------------- unseen log-probs
def _trainer(base, tmp_path, variant: str) -> ParallelGRPOTrainer:
    cfg = GRPOStageConfig.for_stage(3, "smoke", variant=variant)
    model, tok, _ = base
    data = prompt_dataset(cfg, tok, "tiny")
    return build_trainer(
        cfg, copy.deepcopy(model), tok, None, data, tmp_path / variant, stage_model_config(cfg)
    )


def _batch(tok, prompts, completions):
    """TRL's layout: prompts left-padded, completions right-padded; returns ids, 2D mask, width."""
    p = [tok.encode(x, add_special_tokens=False) for x in prompts]
    c = [tok.encode(x, add_special_tokens=False) for x in completions]
    P, C, pad = max(map(len, p)), max(map(len, c)), tok.pad_token_id
    ids = [[pad] * (P - len(a)) + a + b + [pad] * (C - len(b)) for a, b in zip(p, c)]
    mask = [[0] * (P - len(a)) + [1] * (len(a) + len(b)) + [0] * (C - len(b)) for a, b in zip(p, c)]
    return torch.tensor(ids), torch.tensor(mask), C


def test_unseen_logprobs_isolate_paths_and_equal_trl_without_blocks(base, tmp_path):
    seen, unseen = _trainer(base, tmp_path, "seen"), _trainer(base, tmp_path, "unseen")
    tok = seen.processing_class
    prompts = ["Problem: Tom has 3 pens.\nSolution:\n", "Problem: 2+2?\nSolution:\n"]
    plain = ["He has 3 pens.\nFinal Answer: 3", "2+2=4\nFinal Answer: 4"]
    ids, mask, k = _batch(tok, prompts, plain)
    with torch.no_grad():
        lp_seen = seen._get_per_token_logps_and_entropies(seen.model, ids, mask, k)[0]
        lp_unseen = unseen._get_per_token_logps_and_entropies(seen.model, ids, mask, k)[0]
    real = mask[:, -k:].bool()
    # no block: the same as stock TRL
    assert torch.allclose(lp_seen[real], lp_unseen[real], atol=1e-5)

    block = [
        "<Parallel><Path>3+1=4</Path><Path>1+3=4</Path></Parallel>\n"
        "<Summary>4</Summary>\nFinal Answer: 4"
    ] * 2
    ids, mask, k = _batch(tok, prompts, block)
    with torch.no_grad():
        lp_seen = seen._get_per_token_logps_and_entropies(seen.model, ids, mask, k)[0]
        lp_unseen = unseen._get_per_token_logps_and_entropies(seen.model, ids, mask, k)[0]
        # reference: the same sequences right-padded, scored by pr1lib.decoding.structure directly
        rows = [r[m.bool()].tolist() for r, m in zip(ids, mask)]
        width = max(map(len, rows))
        right = torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in rows])
        real_r = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        starts = [len(r) - len(tok.encode(block[0], add_special_tokens=False)) for r in rows]
        ref = structured_logprobs(seen.model, right, tok, "unseen", starts, padding_mask=real_r)
    n = len(tok.encode(block[0], add_special_tokens=False))
    for b, s in enumerate(starts):
        assert torch.allclose(lp_unseen[b, :n], ref[b, s : s + n], atol=1e-5)
    second_path = len(tok.encode("<Parallel><Path>3+1=4</Path>", add_special_tokens=False))
    # trunk + path 1
    assert torch.allclose(lp_unseen[:, :second_path], lp_seen[:, :second_path], atol=1e-5)
    # path 2 on
    assert not torch.allclose(lp_unseen[:, second_path:n], lp_seen[:, second_path:n], atol=1e-4)


# ----------------------------------------------------------------------------- unseen + forked, end
# to end
def test_unseen_grpo_with_forked_rollouts_trains_three_steps(base, tmp_path, monkeypatch):
    """The unseen trainer subclass with the forked engine: rollouts really fork (a logit bias makes
    the random smoke model open blocks), three optimizer steps run, and the LoRA weights move."""
    model, tok, lora = fresh(base)
    bias = torch.zeros(model.config.vocab_size)  # (V,)
    bias[tok.convert_tokens_to_ids("<Parallel>")] = 6.0

    # sampling sees the bias; TRL's fused log-prob path has no logits
    def steer(module, inputs, out):
        if getattr(out, "logits", None) is not None:
            out.logits = out.logits + bias
        return out

    model.register_forward_hook(steer)
    blocks, generate = [], pr1lib.training.completions.generate

    def counting(*args, **kwargs):
        out = generate(*args, **kwargs)
        blocks.append(sum(r.blocks for r in out))
        return out

    monkeypatch.setattr(pr1lib.training.completions, "generate", counting)
    cfg = GRPOStageConfig.for_stage(3, "smoke", reward="accuracy", variant="unseen", max_steps=3)
    assert cfg.rollout_mode == "forked"
    session = GRPOSession(cfg, out=tmp_path, policy=(model, tok, lora), rewards=[varied_reward])
    assert session.run() == 3 and isinstance(session.trainer, ParallelGRPOTrainer)
    assert len(blocks) == 3 and all(b > 0 for b in blocks), blocks  # every step's rollouts forked
    lora_b = [p for n, p in session.policy.named_parameters() if "lora_B" in n]
    # LoRA B starts at zero: it trained
    assert lora_b and max(p.abs().max().item() for p in lora_b) > 0


# ----------------------------------------------------------------------------- the plain baseline
def test_plain_baseline_trains_on_accuracy_with_the_baseline_prompt(base, tmp_path):
    """The paper's GRPO baseline: no tags, the baseline prompt, accuracy only, on the same data
    and steps as the seen curriculum; a reward that needs blocks is refused."""
    cfg = GRPOStageConfig.for_stage(3, "smoke", variant="plain", max_steps=2)
    assert (cfg.reward, cfg.rollout_mode) == ("accuracy", "seen")
    assert (
        stage_model_config(GRPOStageConfig.for_stage(3, "colab", variant="plain")).prompt_style
        == "baseline"
    )
    assert stage_model_config(GRPOStageConfig.for_stage(3, "colab")).prompt_style == "v3"
    session = GRPOSession(cfg, out=tmp_path, policy=fresh(base), rewards=[varied_reward])
    assert session.run() == 2 and isinstance(session.trainer, ParallelGRPOTrainer)
    with pytest.raises(ValueError, match="plain variant writes no blocks"):
        check_config(cfg.replace(reward="tiered"))


# ----------------------------------------------------------------------------- the fast path
FIRST_PATH = dict(merge_rollout_lora=False, fast_cache=False, length_buckets=1, share_prompts=False)


@pytest.mark.parametrize("variant", ["seen", "unseen"])
def test_fast_rollouts_train_like_the_first_path(base, tmp_path, variant):
    """Sampling from the merged LoRA copy with the in-place KV cache changes no math: two steps
    from the same policy and seed (the second samples from a trained, merged LoRA) sample the
    same batches, log the same losses and end with the same weights as the first path."""
    model, tok, lora = base
    runs = {}
    for name, flags in (
        ("first", FIRST_PATH),
        ("fast", dict(FIRST_PATH, merge_rollout_lora=True, fast_cache=True)),
    ):
        cfg = GRPOStageConfig.for_stage(
            3, "smoke", reward="accuracy", variant=variant, max_steps=2, **flags
        )
        session = GRPOSession(cfg, out=tmp_path / name, policy=fresh(base), rewards=[varied_reward])
        session.run()
        runs[name] = (session.rows, trainable(session.policy))
    (first_rows, w_first), (fast_rows, w_fast) = runs["first"], runs["fast"]
    keys = ("reward", "completions/mean_length", "loss", "entropy")
    assert [[r[k] for k in keys] for r in fast_rows] == [[r[k] for k in keys] for r in first_rows]
    assert max((w_fast[n] - w_first[n]).abs().max().item() for n in w_first) < 1e-6
    assert max(w_first[n].abs().max().item() for n in w_first if "lora_B" in n) > 0  # it trained


@pytest.mark.parametrize("variant", ["seen", "unseen"])
def test_cheaper_loss_forwards_give_the_loss_and_gradient_of_the_padded_batch(
    base, tmp_path, variant
):
    """The loss run as length-sorted chunks without their padding columns, and with each distinct
    prompt run once (``share_prompts``; the small vocabulary's full-logits head), equals the one
    padded batch (TRL's tiled head): same loss, entropies and gradient up to float rounding."""
    cfg = GRPOStageConfig.for_stage(
        3, "smoke", reward="accuracy", variant=variant, max_steps=1, seed=4
    )  # a batch with padding: one row ends early
    session = GRPOSession(cfg, out=tmp_path, policy=fresh(base), rewards=[varied_reward])
    session.run()
    trainer = session.trainer
    inputs, model = trainer._buffered_inputs[0], trainer.model
    lengths = inputs["completion_mask"].sum(dim=1)
    assert lengths.min() < lengths.max()  # there is padding to cut
    prompts = torch.unique(inputs["prompt_ids"], dim=0)
    assert 1 < len(prompts) < len(lengths)  # groups share a prompt
    grads, entropies = {}, {}
    for buckets, share in ((1, False), (8, False), (8, True), (1, True)):
        trainer.length_buckets, trainer.share_prompts = buckets, share
        model.zero_grad()
        loss = trainer.compute_loss(model, inputs)
        loss.backward()
        grads[buckets, share] = (
            loss.item(),
            {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None},
        )
        with torch.no_grad():
            ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
            mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
            entropies[buckets, share] = trainer._get_per_token_logps_and_entropies(
                model, ids, mask, inputs["completion_ids"].size(1), compute_entropy=True
            )[1]
    vocab = model.get_output_embeddings().weight.size(0)
    assert loss_head(model, vocab, 1.0, False) is not model  # the smoke model's vocabulary is small
    for key, ent in entropies.items():
        assert torch.allclose(ent, entropies[1, False], atol=1e-5), key
    loss_one, one = grads[1, False]
    assert max(g.abs().max().item() for g in one.values()) > 0
    for key in ((8, False), (8, True), (1, True)):
        loss_cut, cut = grads[key]
        assert loss_cut == pytest.approx(loss_one, abs=1e-6) and one.keys() == cut.keys(), key
        for name in one:
            assert torch.allclose(cut[name], one[name], rtol=1e-4, atol=1e-6), (key, name)
    width = inputs["prompt_ids"].size(1)
    assert trainer.shares_prompts(model, width) and not trainer.shares_prompts(model, 1)
    model.gradient_checkpointing_enable()  # no KV cache under checkpointing: the plain forward
    assert not trainer.shares_prompts(model, width)

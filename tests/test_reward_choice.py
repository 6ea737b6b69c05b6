"""Which reward GRPO really trains on: ``cfg.reward`` decides it, in every mode and ablation arm.

On the random smoke model every sampled completion scores -1 under every mode, so the reward modes
cannot be told apart from its samples. These tests use four hand-written completions per problem,
chosen so that every mode scores them differently:

| kind | accuracy | parallel_correct | tiered | structure |
|---|---|---|---|---|
| right answer, valid block | +1 | +1 | +1.2 | +1 |
| right answer, no block | +1 | -1 | +1.0 | -1 |
| right answer, malformed block (one path) | +1 | -1 | -1 | -1 |
| wrong answer, valid block | -1 | -1 | -1 | +1 |

``test_grpo_trains_on_the_configured_reward`` makes them a deterministic toy policy: the rollout
returns the four kinds for every problem, and TRL trains the real (smoke) model on their log-probs.
"""

from __future__ import annotations

import copy
import os
from collections import Counter
from itertools import combinations
from types import SimpleNamespace

import pytest
import torch
from transformers import TrainerCallback

import pr1lib.training.completions
import pr1lib.training.grpo
from pr1lib.config import GRPOStageConfig
from pr1lib.decoding.rollout import Rollout
from pr1lib.experiments import ablation
from pr1lib.experiments.ablation import ARMS
from pr1lib.rewards.modes import REWARD_MODES
from pr1lib.training.grpo import GRPOSession
from pr1lib.training.grpo_trainer import reward_funcs

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

BLOCK = "<Parallel><Path>{a}</Path><Path>{a}</Path></Parallel>\n<Summary>{a}</Summary>\n"
ONE_PATH = "<Parallel><Path>{a}</Path></Parallel>\n<Summary>{a}</Summary>\n"  # needs 2 paths
KINDS = {
    "parallel_right": BLOCK + "Final Answer: {a}",
    "linear_right": "It is {a}.\nFinal Answer: {a}",
    "malformed_right": ONE_PATH + "Final Answer: {a}",
    "parallel_wrong": BLOCK + "Final Answer: {w}",
}
SCORES = {  # the table above, in KINDS order
    "accuracy": [1.0, 1.0, 1.0, -1.0],
    "parallel_correct": [1.0, -1.0, -1.0, -1.0],
    "tiered": [1.2, 1.0, -1.0, -1.0],
    "structure": [1.0, -1.0, -1.0, 1.0],
}


def completions(answer: str) -> list[str]:
    """The four kinds for one gold answer (the wrong one is the gold plus one)."""
    return [k.format(a=answer, w=int(answer) + 1) for k in KINDS.values()]


def trained_scores(cfg: GRPOStageConfig, step: int) -> list[float]:
    """What ``reward_funcs(cfg)`` (the main reward TRL trains on) gives the four kinds at ``step``,
    called the way TRL calls it."""
    main = reward_funcs(cfg)[0]
    state = SimpleNamespace(global_step=step)
    return main(
        completions("12"), answer=["12"] * 4, trainer_state=state, data_source=["tinygsm-hard"] * 4
    )


# ------------------------------------------------------------------------- (a) each mode's reward
@pytest.mark.parametrize(
    "mode, step, expected",
    [
        ("accuracy", 0, SCORES["accuracy"]),  # tags ignored: the malformed block still pays
        ("parallel_correct", 0, SCORES["parallel_correct"]),  # only the valid block with the answer
        ("tiered", 0, SCORES["tiered"]),  # 1.2 / 1.0 ladder, malformed tags pay nothing
        ("structure", 0, SCORES["structure"]),  # a valid block pays, whatever the answer
        ("alternating", 0, SCORES["accuracy"]),  # step 0 of a 10-step window: accuracy
        ("alternating", 8, SCORES["tiered"]),  # step 8: the last 2 of 10 are tiered
    ],
)
def test_reward_funcs_scores_with_the_configured_mode(mode, step, expected):
    cfg = GRPOStageConfig.for_stage(3, "smoke", reward=mode, window=10, parallel_steps=2)
    assert trained_scores(cfg, step) == pytest.approx(expected)


def test_every_registered_mode_is_covered_and_the_modes_disagree():
    # the parametrization above names every REWARD_MODES entry, so a new mode needs a case
    assert set(REWARD_MODES) == set(SCORES) | {"alternating"}
    # the four base modes give four different score vectors on the four kinds
    assert len({tuple(s) for s in SCORES.values()}) == len(SCORES)


# ----------------------------------------------------------------------------- (b) a short GRPO run


def scripted_rollouts(golds: dict[str, str]):
    """A toy policy for ``pr1lib.training.completions.generate``: the k-th copy of a prompt in a
    batch gets the k-th kind of ``KINDS`` for that prompt's gold answer, so every group of 4 holds
    all four."""

    def generate(model, tokenizer, prompts, config=None, **kwargs):
        seen: Counter = Counter()
        out = []
        for prompt in prompts:
            text = completions(golds[prompt])[seen[prompt] % len(KINDS)]
            seen[prompt] += 1
            ids = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
            out.append(
                Rollout(
                    tokenizer.encode(prompt, add_special_tokens=False),
                    ids,
                    [0.0] * len(ids),
                    [0] * len(ids),
                    text,
                    "eos",
                )
            )
        return out

    return generate


def trainable(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def train_arm(base, tmp_path, monkeypatch, mode: str):
    """Three GRPO steps of the smoke profile under ``mode`` with the scripted rollouts; returns the
    logged rows and the trainable weights before and after."""
    model, tok, lora = base
    cfg = GRPOStageConfig.for_stage(
        3,
        "smoke",
        reward=mode,
        variant="seen",
        rollout="seen",
        window=3,
        parallel_steps=1,
        max_steps=3,
    )
    policy = (copy.deepcopy(model), tok, copy.deepcopy(lora))
    session = GRPOSession(cfg, out=tmp_path / mode, policy=policy)
    golds = dict(zip(session.dataset["prompt"], session.dataset["answer"]))
    monkeypatch.setattr(pr1lib.training.completions, "generate", scripted_rollouts(golds))
    start = Snapshot()
    assert session.run(callbacks=[start]) == 3
    return session.rows, start.weights, trainable(session.policy)


class Snapshot(TrainerCallback):
    """The trainable weights as training begins (LoRA attached)."""

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.weights = trainable(model)


def test_grpo_trains_on_the_configured_reward(base, tmp_path, monkeypatch):
    """One run per arm on the same scripted completions: each logs its own mode's reward, and the
    arms end with different weights, all moved from the start."""
    # the mean over a batch of 2 groups x 4 kinds of each mode's score (SCORES)
    mean = {mode: sum(s) / len(s) for mode, s in SCORES.items()}
    expected = {mode: [mean[mode]] * 3 for mode in SCORES}
    expected["alternating"] = [mean["accuracy"], mean["accuracy"], mean["tiered"]]  # window 3
    rows, weights = {}, {}
    for mode in expected:
        rows[mode], start, weights[mode] = train_arm(base, tmp_path, monkeypatch, mode)
        lora_b = [n for n in weights[mode] if "lora_B" in n]
        assert lora_b and all(start[n].abs().max() == 0 for n in lora_b)  # PEFT starts B at 0
        for n in weights[mode]:  # every trainable tensor moved (the tag rows, LoRA A and B)
            assert (weights[mode][n] - start[n]).abs().max() > 0, (mode, n)
    for mode, want in expected.items():  # the reward each step trained on is the arm's mode
        assert [r["reward"] for r in rows[mode]] == pytest.approx(want), mode
        assert [r["term/accuracy"] for r in rows[mode]] == pytest.approx([0.5] * 3)  # same texts
    for a, b in combinations(expected, 2):  # different rewards, different advantages, weights
        gap = max((weights[a][n] - weights[b][n]).abs().max().item() for n in weights[a])
        assert gap > 1e-6, (a, b)


# ----------------------------------------------------------------------------- the reward ablation
def test_ablation_arms_train_with_different_rewards(tmp_path, monkeypatch):
    """``run_ablation`` trains every arm of ``ARMS`` with its own reward: the configs it
    hands ``run_grpo`` name the arm's reward, and ``reward_funcs`` of each scores the four kinds
    differently (at an accuracy step and at a tiered step of the alternating window)."""
    received = {}

    def fake_run_grpo(cfg, init, out, before=None, preflight=True, **kwargs):
        received[out.name] = cfg
        return SimpleNamespace(result={"reward": cfg.reward, "before": {}, "after": {}})

    monkeypatch.setattr(ablation, "run_grpo", fake_run_grpo)
    results = ablation.run_ablation("smoke", init=tmp_path / "sft", out=tmp_path / "abl")
    assert [r["arm"] for r in results] == list(ARMS) == list(received)
    assert {arm: cfg.reward for arm, cfg in received.items()} == ARMS
    assert len({(c.variant, c.seed, c.max_steps, c.stage) for c in received.values()}) == 1
    tiered_step = {arm: cfg.window - 1 for arm, cfg in received.items()}
    trained = {
        arm: (tuple(trained_scores(cfg, 0)), tuple(trained_scores(cfg, tiered_step[arm])))
        for arm, cfg in received.items()
    }
    assert trained["accuracy"] == (tuple(SCORES["accuracy"]),) * 2
    assert trained["alternating"] == (tuple(SCORES["accuracy"]), tuple(SCORES["tiered"]))
    assert trained["parallel"] == (tuple(SCORES["tiered"]),) * 2
    assert trained["structure"] == (tuple(SCORES["structure"]),) * 2
    assert len(set(trained.values())) == len(ARMS)  # no two arms train alike

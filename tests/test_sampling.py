"""``pr1lib.training.completions`` on the smoke profile: dynamic sampling drops exactly the groups
whose rewards are all equal and refills the batch with fresh prompts (full, group-aligned, logged);
the merged-LoRA rollout samples what the LoRA policy samples, without PEFT's wrappers, and
leaves the policy untouched;
the prompt prefilter keeps exactly the prompts whose pass rate lies in its range."""

from __future__ import annotations

import os

import pytest
import torch
from conftest import fresh
from peft import get_peft_model

import pr1lib.training.completions
import pr1lib.training.grpo
from pr1lib.config import GRPOStageConfig
from pr1lib.decoding.rollout import generate
from pr1lib.training.completions import MergedPolicy, prefilter, rollout_config, zero_spread
from pr1lib.training.grpo import GRPOSession
from pr1lib.training.grpo_trainer import check_config, prompt_dataset

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


@pytest.mark.parametrize(
    "rewards, size, flat",
    [
        ([1.0, 1.0, -1.0, 1.0], 2, [True, False]),  # one group all equal, one with spread
        ([0.5, 0.5, 0.5, 0.5], 4, [True]),  # a whole batch without signal
        ([-1.0, 1.0, 1.2, 1.0, 1.0, 1.0], 3, [False, True]),  # the tiered reward's +1.2 is spread
    ],
)
def test_zero_spread_flags_the_groups_whose_rewards_are_all_equal(rewards, size, flat):
    assert zero_spread(torch.tensor(rewards), size).tolist() == flat


# ----------------------------------------------------------------------------- dynamic sampling
def session_with_flat_prompts(base, tmp_path, **overrides):
    """A smoke session whose reward has no spread on even-indexed training prompts (every
    completion scores 1) and always has spread on odd ones (0, 1, 0, 1, ... down the batch); it
    records every call: ``(step, prompts, flat flags)``."""
    cfg = GRPOStageConfig.for_stage(
        3,
        "smoke",
        reward="accuracy",
        num_generations=2,
        per_device_train_batch_size=16,
        max_steps=2,
        **overrides,
    )
    index: dict[str, int] = {}
    calls: list[tuple[int, list[str], list[bool]]] = []

    def half_flat(completions, answer, prompts=None, trainer_state=None, **kwargs):
        flat = [index[p] % 2 == 0 for p in prompts]
        calls.append((trainer_state.global_step, list(prompts), flat))
        return [1.0 if f else float(i % 2) for i, f in enumerate(flat)]

    session = GRPOSession(cfg, out=tmp_path, policy=fresh(base), rewards=[half_flat])
    index.update({p: i for i, p in enumerate(session.dataset["prompt"])})
    return session, calls


def groups_of(prompts: list[str], size: int) -> list[list[str]]:
    return [prompts[i : i + size] for i in range(0, len(prompts), size)]


def test_dynamic_sampling_drops_exactly_the_flat_groups_and_refills(base, tmp_path):
    session, calls = session_with_flat_prompts(base, tmp_path, dynamic_sampling=True, max_refills=4)
    assert session.run() == 2
    size, batch = 2, 16
    refilled = 0
    for step, row in zip((0, 1), session.rows):
        mine = [c for c in calls if c[0] == step]
        (_, first, first_flat), (_, trained, trained_flat) = mine[0], mine[-1]  # sampler's, TRL's
        assert len(trained) == batch and all(len(set(g)) == 1 for g in groups_of(trained, size))
        assert not any(trained_flat)  # every trained group has spread
        pairs = zip(groups_of(first, size), groups_of(first_flat, size))
        kept = [g[0] for g, f in pairs if not f[0]]  # the first round's groups with spread
        assert [g[0] for g in groups_of(trained, size)][
            : len(kept)
        ] == kept  # kept, in order, first
        assert row["sampling/zero_std_before"] == pytest.approx(1 - len(kept) / (batch // size))
        assert row["sampling/refills"] == len(mine) - 2  # the rounds after the first
        assert row["frac_reward_zero_std"] == 0.0  # TRL's own count, after the refills
        refilled += len(mine) - 2
    assert refilled > 0  # half the prompts are flat: 8 groups per step never all have spread


def test_without_refills_the_flat_groups_fill_the_batch(base, tmp_path):
    session, calls = session_with_flat_prompts(base, tmp_path, dynamic_sampling=True, max_refills=0)
    assert session.run() == 2
    for step, row in zip((0, 1), session.rows):
        (_, first, _), (_, trained, _) = [c for c in calls if c[0] == step]
        assert sorted(map(tuple, groups_of(trained, 2))) == sorted(map(tuple, groups_of(first, 2)))
        assert row["sampling/refills"] == 0
        assert row["frac_reward_zero_std"] == pytest.approx(row["sampling/zero_std_before"])


def test_dynamic_sampling_needs_the_engine():
    cfg = GRPOStageConfig.for_stage(3, "smoke", dynamic_sampling=True, rollout="trl")
    with pytest.raises(ValueError, match="dynamic_sampling"):
        check_config(cfg)


# ----------------------------------------------------------------------------- merged LoRA rollouts
def test_merged_policy_samples_what_the_lora_policy_samples(base):
    model, tok, lora = fresh(base)
    policy = get_peft_model(model, lora).eval()
    with torch.no_grad():  # LoRA B starts at zero: give the adapters something to merge
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.05)
    weights = {k: v.clone() for k, v in policy.state_dict().items()}
    cfg = rollout_config(GRPOStageConfig.for_stage(3, "smoke"))
    prompts = ["Problem: Tom has 3 pens.\nSolution:\n"] * 4
    lora_out = generate(policy, tok, prompts, cfg, generator=torch.Generator().manual_seed(0))
    merged = MergedPolicy()
    for _ in range(2):  # the second use reloads the weights into the same copy
        with merged.use(policy) as copy_:
            out = generate(copy_, tok, prompts, cfg, generator=torch.Generator().manual_seed(0))
        assert [r.completion_ids for r in out] == [r.completion_ids for r in lora_out]
        pairs = [(a, b) for x, y in zip(out, lora_out) for a, b in zip(x.logprobs, y.logprobs)]
        assert max(abs(a - b) for a, b in pairs) < 1e-4
    assert copy_ is not policy
    assert all(torch.equal(weights[k], v) for k, v in policy.state_dict().items())  # untouched


def test_the_merged_policy_runs_without_peft_wrappers_or_trls_patched_forward(base):
    """The rollout model is the plain architecture over the merged weights: no PEFT module in
    it, and not the ``forward`` TRL patches onto the policy's instance (bound to the wrapped
    modules); its logits are the policy's, and the policy keeps its wrappers."""
    model, tok, lora = fresh(base)
    policy = get_peft_model(model, lora).eval()
    inner, calls = policy.get_base_model(), []
    patched = inner.forward
    inner.forward = lambda *a, **kw: calls.append(1) or patched(*a, **kw)  # as TRL does
    ids = torch.tensor([tok.encode("Problem: Tom has 3 pens.")])
    with torch.no_grad(), MergedPolicy().use(policy) as bare:
        logits = bare(input_ids=ids).logits
    assert calls == [] and type(bare) is type(inner)
    assert not any(type(m).__module__.startswith("peft") for m in bare.modules())
    assert any(type(m).__module__.startswith("peft") for m in policy.modules())
    with torch.no_grad():
        assert torch.allclose(logits, policy(input_ids=ids).logits, atol=1e-5)


# ----------------------------------------------------------------------------- prompt pre-filter
def test_prefilter_keeps_the_prompts_with_a_mid_range_pass_rate(base, monkeypatch):
    """Prompt number i gets i of its k = 4 samples right (a scorer that reads which prompt each
    sample came from): only the prompts whose pass rate i / 4 lies in the range stay, in order."""
    model, tok, _ = fresh(base)
    cfg = GRPOStageConfig.for_stage(3, "smoke", prefilter_k=4, prefilter_range=(0.25, 0.75))
    data = prompt_dataset(cfg, tok, "tiny").select(range(6))
    number = {p: i for i, p in enumerate(data["prompt"])}
    sampled: list[str] = []
    engine = pr1lib.training.completions.generate

    def recording(model, tokenizer, prompts, config):
        sampled[:] = prompts
        return engine(model, tokenizer, prompts, config)

    def first_i_right(completions, answer, data_source=None):
        assert len(completions) == len(answer) == len(data_source) == len(sampled)
        return [1.0 if j % 4 < number[p] else -1.0 for j, p in enumerate(sampled)]

    monkeypatch.setattr(pr1lib.training.completions, "generate", recording)
    kept = prefilter(data, model, tok, cfg, "project", scorer=first_i_right)
    assert kept["prompt"] == data["prompt"][1:4]  # 1, 2, 3 of 4 right: rates 0.25 .. 0.75
    assert sampled == [p for p in data["prompt"] for _ in range(4)]  # k samples of each prompt
    with pytest.raises(ValueError, match="kept no prompt"):
        prefilter(data, model, tok, cfg, "project", scorer=lambda completions, **kw: [-1.0] * 24)


@pytest.mark.parametrize(
    "overrides, words",
    [
        (dict(prefilter_range=(0.9, 0.1)), "prefilter_range"),  # lowest above highest
        (dict(prefilter_range=(0.0, 1.5)), "prefilter_range"),  # a pass rate above 1
        (dict(prefilter_k=4, rollout="trl"), "prefilter_k"),  # samples through the engine
    ],
)
def test_prefilter_settings_are_checked(overrides, words):
    with pytest.raises(ValueError, match=words):
        check_config(GRPOStageConfig.for_stage(3, "smoke", **overrides))


def test_prefilter_is_off_by_default_and_a_session_trains_on_what_it_keeps(
    base, tmp_path, monkeypatch
):
    assert GRPOStageConfig.for_stage(3, "tiny").prefilter_k == 0  # off unless asked
    seen: list[int] = []

    def first_eight(dataset, model, tokenizer, cfg, grader):
        seen.append(cfg.prefilter_k)
        return dataset.select(range(8))

    monkeypatch.setattr(pr1lib.training.grpo, "prefilter", first_eight)
    off = GRPOSession(
        GRPOStageConfig.for_stage(3, "smoke"), out=tmp_path / "off", policy=fresh(base)
    )
    on = GRPOSession(
        GRPOStageConfig.for_stage(3, "smoke", prefilter_k=2),
        out=tmp_path / "on",
        policy=fresh(base),
    )
    assert (len(off.dataset), len(on.dataset), seen) == (64, 8, [2])

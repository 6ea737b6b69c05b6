"""The configs carry the recipe: profiles resolve once, each stage gets the variant's reward with
the clip-high the paper pairs with it, and the presets hold what the profiles change."""

from __future__ import annotations

import pytest

from pr1lib.config import (
    CLIP_HIGH,
    STAGE_REWARDS,
    STAGE_SOURCES,
    EvalConfig,
    GRPOStageConfig,
    ModelConfig,
    NotebookConfig,
    SFTStageConfig,
)
from pr1lib.config.profiles import check_profile


def test_the_profile_is_resolved_once_and_travels_in_the_config(monkeypatch):
    monkeypatch.setenv("PR1_PROFILE", "smoke")
    assert check_profile(None) == "smoke" and SFTStageConfig.for_profile().profile == "smoke"
    assert ModelConfig.for_profile().random_init  # the smoke model, picked by the environment
    with pytest.raises(ValueError, match="unknown profile 'laptop'"):
        check_profile("laptop")


def test_paper_presets_match_the_paper():
    paper = GRPOStageConfig.for_stage(3, "paper")
    assert (paper.learning_rate, paper.num_generations, paper.max_steps) == (1e-6, 8, 300)
    assert (paper.epsilon, paper.clip_high, paper.beta, paper.temperature) == (0.2, 0.28, 0.0, 1.0)
    assert SFTStageConfig.for_profile("paper").learning_rate == 1e-5
    assert (
        EvalConfig.for_profile("paper").k,
        EvalConfig.for_profile("paper").max_completion_length,
    ) == (16, 3000)


@pytest.mark.parametrize("variant", sorted(STAGE_REWARDS))
@pytest.mark.parametrize("stage", [2, 3])
def test_each_stage_takes_its_recipe_and_the_paired_clip_high(variant, stage):
    cfg = GRPOStageConfig.for_stage(stage, "tiny", variant=variant)
    assert cfg.reward == STAGE_REWARDS[variant][stage] and cfg.variant == variant
    assert cfg.clip_high == CLIP_HIGH.get(cfg.reward, cfg.epsilon)
    assert cfg.data == cfg.source == STAGE_SOURCES["tiny"][stage]


def test_choosing_a_reward_takes_its_clip_high_unless_one_is_given():
    assert GRPOStageConfig.for_stage(3, "tiny", reward="accuracy").clip_high == 0.2
    assert GRPOStageConfig.for_stage(3, "tiny", reward="alternating").clip_high == 0.28
    assert (
        GRPOStageConfig.for_stage(3, "tiny", reward="accuracy", epsilon_high=0.3).clip_high == 0.3
    )
    assert GRPOStageConfig(epsilon_high=None).clip_high == 0.2  # TRL's None: symmetric


def test_stage2_is_short_and_the_notebook_preset_shorter_still():
    assert GRPOStageConfig.for_stage(2, "tiny").max_steps == 15
    assert GRPOStageConfig.for_stage(2, "paper").max_steps == 35
    short = GRPOStageConfig.for_stage(3, "tiny", notebook=True)
    assert (short.per_device_train_batch_size, short.max_steps) == (32, 30)
    world = GRPOStageConfig.for_stage(3, "tiny", notebook=True, world="tinyworld")
    assert (world.per_device_train_batch_size, world.max_steps, world.eval_n) == (32, 60, 200)
    assert GRPOStageConfig.for_stage(3, "tiny", world="tinyworld").max_steps == 60  # the full run
    assert GRPOStageConfig.for_stage(2, "tiny", notebook=True, world="tinyworld").eval_n == 200
    smoke = GRPOStageConfig.for_stage(3, "smoke", notebook=True, world="tinyworld")
    assert (smoke.max_steps, smoke.eval_n) == (3, 4)  # smoke keeps its sizes
    assert GRPOStageConfig.for_stage(3, "smoke", notebook=True) == GRPOStageConfig.for_stage(
        3, "smoke"
    )
    with pytest.raises(ValueError, match="stage must be 2"):
        GRPOStageConfig.for_stage(1, "tiny")


def test_each_variant_rolls_out_in_its_own_mode():
    assert GRPOStageConfig(variant="seen").rollout_mode == "reread"  # the paper's Seen rollout
    assert GRPOStageConfig(variant="unseen").rollout_mode == "forked"
    assert GRPOStageConfig(variant="plain").rollout_mode == "seen"
    assert SFTStageConfig(variant="unseen").rollout_mode == "forked"
    assert GRPOStageConfig(rollout="trl").eval_rollout_mode == "seen"


@pytest.mark.parametrize("variant", sorted(STAGE_REWARDS))
@pytest.mark.parametrize("stage", [2, 3])
def test_every_recipe_passes_the_trainers_own_checks(variant, stage):
    from pr1lib.training.grpo_trainer import check_config

    check_config(GRPOStageConfig.for_stage(stage, "tiny", variant=variant))  # raises if refused
    with pytest.raises(ValueError, match="rollout must be one of"):
        check_config(GRPOStageConfig.for_stage(stage, "tiny", variant=variant, rollout="beam"))


def test_a_saved_config_loads_back_equal(tmp_path):
    cfg = GRPOStageConfig.for_stage(3, "colab", extra_rewards=(("structure", 0.2),))
    assert GRPOStageConfig.load(cfg.save(tmp_path / "c.json")) == cfg


def test_notebook_sizes_shrink_in_smoke():
    smoke, tiny = NotebookConfig.for_profile("smoke"), NotebookConfig.for_profile("tiny")
    assert smoke.model_profile == "smoke" and tiny.model_profile == "tiny"
    assert smoke.eval_n < tiny.eval_n and smoke.total < tiny.total and smoke.table_n < tiny.table_n


def test_tinyworld_stages_take_its_problems_rollout_and_held_out_sets():
    from pr1lib.evaluation.evaluate import held_out_set

    stage = GRPOStageConfig.for_stage
    easy, hard = (stage(s, "tiny", world="tinyworld") for s in (2, 3))
    assert (easy.data, hard.data) == ("tinyworld-easy", "tinyworld-hard")
    assert hard.rollout_mode == "seen" and not hard.use_lora and hard.max_path_length == 128
    assert stage(3, "tiny", world="tinyworld", learning_rate=3e-5).learning_rate == 3e-5
    assert held_out_set("tiny", "hard", hard.source) == "tinyworld-hard"
    assert held_out_set("tiny", "hard", stage(3, "tiny").source) == "tinygsm-hard"
    assert stage(3, "tiny", world="tinygsm") == stage(3, "tiny")
    with pytest.raises(ValueError, match="unknown world 'mars'"):
        GRPOStageConfig.for_stage(3, "tiny", world="mars")
    unseen = stage(3, "tiny", world="tinyworld", variant="unseen")  # independent forked probes
    assert (unseen.rollout_mode, unseen.eval_rollout_mode, unseen.data) == (
        "forked",
        "forked",
        "tinyworld-hard",
    )
    assert unseen.max_path_length == 128 and not unseen.use_lora

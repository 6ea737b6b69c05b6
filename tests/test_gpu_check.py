"""benchmarks/gpu_check: a clean skip without CUDA, and the whole measurement on CPU with toy
shapes."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys

import pytest

from pr1lib.store.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "gpu_check.py"


def _load():
    spec = importlib.util.spec_from_file_location("pr1_gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


gpu_check = _load()


def test_shell_wrapper_skips_cleanly_without_cuda():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "benchmarks" / "gpu_check.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["skipped"] is True and "CUDA" in result["reason"]
    assert result["environment"]["cuda"] is False


def test_unknown_model_is_a_usage_error():
    with pytest.raises(SystemExit):
        gpu_check.main(["--models", "qwen3-70b"])


def test_shapes_agree_with_the_memory_table():
    from pr1lib.decoding.models import QWEN3_SHAPES

    for name, hub in [
        ("qwen3-0.6b", "Qwen/Qwen3-0.6B-Base"),
        ("qwen3-1.7b", "Qwen/Qwen3-1.7B-Base"),
        ("qwen3-4b", "Qwen/Qwen3-4B-Base"),
    ]:
        assert gpu_check.SHAPES[name] == QWEN3_SHAPES[hub]


def test_a_failing_step_is_recorded_not_raised():
    budget = gpu_check.Budget(60)
    out = gpu_check.guarded("boom", lambda: 1 / 0, budget, min_left=0)
    assert out["error"].startswith("ZeroDivisionError")
    late = gpu_check.guarded("late", lambda: {"ran": True}, gpu_check.Budget(-1), min_left=5)
    assert "time budget" in late["skipped"]


def test_no_time_left_skips_every_model():
    result = gpu_check.run(tiny=True, budget_s=0)
    assert result["models"]["tiny"]["skipped"].startswith("time budget")


@pytest.fixture(scope="module")
def tiny_run():
    result = gpu_check.run(tiny=True, budget_s=300)
    json.dumps(result)  # printable as JSON
    return result["models"]["tiny"], result["sizes"]


@pytest.mark.slow
def test_tiny_model_is_4bit_with_the_expected_lora(tiny_run):
    entry, sizes = tiny_run
    model = entry["model"]
    if not model["four_bit"]:
        pytest.skip(f"bitsandbytes 4-bit unavailable here: {model.get('quantization_error')}")
    assert model["quantized_layers"] == 7 * entry["shape"]["layers"]  # q k v o gate up down
    assert entry["lora_params"] == entry["lora_params_formula"] > 0


@pytest.mark.slow
def test_tiny_sft_step_trains(tiny_run):
    entry, _ = tiny_run
    sft = entry["sft"]
    assert "error" not in sft, sft
    assert sft["step_s"] > 0 and sft["lora_b_norm_change"] > 0  # the AdamW step moved the adapters
    # a random model is near uniform
    assert abs(sft["loss"] - math.log(entry["shape"]["vocab"])) < 1.5


@pytest.mark.slow
def test_tiny_grpo_unseen_really_masks_the_paths(tiny_run):
    entry, sizes = tiny_run
    seen, unseen = entry["grpo_seen"], entry["grpo_unseen"]
    assert "error" not in seen and "error" not in unseen, (seen, unseen)
    path = sizes["grpo_completion"] // 8  # each path's span, tags included (parallel_sequences)
    assert seen["masked_pairs"] == 0
    # 2 blocks: path 2 never sees path 1
    assert unseen["masked_pairs"] == sizes["grpo_group"] * 2 * path * path
    assert seen["mean_logp"] != unseen["mean_logp"]  # the mask changed what the model computed
    assert (
        seen["tokens"]
        == unseen["tokens"]
        == sizes["grpo_group"] * (sizes["grpo_prompt"] + sizes["grpo_completion"])
    )


@pytest.mark.slow
def test_tiny_forked_decoding_opens_blocks(tiny_run):
    entry, sizes = tiny_run
    forked = entry["forked"]
    assert "error" not in forked, forked
    assert forked["blocks"] >= 1
    assert 0 < forked["completion_tokens"] <= sizes["rollout_prompts"] * sizes["completion_len"]

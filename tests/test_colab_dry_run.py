"""The colab profile's code path on CPU, with a stand-in for Qwen3-0.6B-Base (tests/_qwen3_standin:
its exact vocabulary, tag ids and tied embeddings; 2 layers, random weights): NF4 loading in
float16, the six tag rows, LoRA, gradient checkpointing, a few SFT steps, then two GRPO steps from
the SFT run's merged model, at short lengths. No GPU has run this path; this is its dry run (about
2 minutes on 2 cores: float16 matrix products are slow on a CPU, and the vocabulary is 151,936).

Run: .venv/bin/python -m pytest tests/test_colab_dry_run.py -q -p no:cacheprovider
"""

from __future__ import annotations

import math

import pytest
import torch
from _qwen3_standin import VOCAB_ROWS, write_standin
from conftest import needs_data

from pr1lib.config import GRPOStageConfig, ModelConfig, SFTStageConfig
from pr1lib.decoding.models import (
    gpu_dtype,
    load_training_policy,
    stage_model_config,
    trainable_precision,
)
from pr1lib.decoding.tokens import tag_token_ids
from pr1lib.format.grammar import TAGS

TAG_IDS = dict(zip(TAGS, range(151669, 151675)))  # Qwen3's tokenizer ends at 151,668
SHORT = dict(eval_n=2, eval_k=1, eval_max_new_tokens=8, seed=0, num_threads=2)


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    return write_standin(tmp_path_factory.mktemp("models") / "qwen3-0.6b-base-standin")


def _sft_config() -> SFTStageConfig:
    return SFTStageConfig.for_profile(
        "colab",
        source="tinygsm-easy",
        train_n=8,
        max_steps=3,
        per_device_train_batch_size=1,
        gradient_accumulation_steps=1,
        gradient_checkpointing=True,
        logging_steps=1,
        **SHORT,
    )


@pytest.mark.slow
def test_colab_policy_loads_like_qwen3_0_6b(standin):
    mcfg = stage_model_config(_sft_config(), standin)
    assert (mcfg.load_in_4bit, mcfg.use_lora, mcfg.dtype, mcfg.prompt_style) == (
        True,
        True,
        "float16",
        "v3",
    )  # the colab profile's choices (a T4 has no bfloat16)
    model, tokenizer, lora = load_training_policy(mcfg)
    assert tag_token_ids(tokenizer) == TAG_IDS and len(tokenizer) == 151675
    embed = model.get_input_embeddings().weight
    assert embed.shape[0] == VOCAB_ROWS and model.get_output_embeddings().weight is embed
    assert model.is_loaded_in_4bit and embed.dtype == torch.float16
    assert lora.trainable_token_indices == list(TAG_IDS.values())
    base = embed[[tokenizer.convert_tokens_to_ids("<|endoftext|>")]].float()
    assert embed[list(TAG_IDS.values())].float().abs().sum() > 0 and not base.isnan().any()


@pytest.mark.slow
@needs_data("gsm8k/train.jsonl", "gsm8k/test.jsonl")  # colab stages read GSM8K
def test_colab_sft_then_grpo_on_cpu(standin, tmp_path):
    from pr1lib.training.grpo import run_grpo
    from pr1lib.training.runs import load_run
    from pr1lib.training.sft import run_sft

    cfg = _sft_config()
    sft = run_sft(
        cfg,
        None,
        tmp_path / "sft",
        evaluate=False,  # GRPO evaluates, below
        model_cfg=stage_model_config(cfg, standin),
        quiet=True,
    )
    assert sft.result["steps"] == 3 and all(math.isfinite(r["loss"]) for r in sft.rows)
    trainable = {n: p.dtype for n, p in sft.model.named_parameters() if p.requires_grad}
    assert any("token_adapter" in n or "trainable_tokens" in n for n in trainable)  # tag rows
    assert set(trainable.values()) == {torch.float32}  # what fp16 mixed precision can scale
    merged, tok = load_run(sft.run_dir, merged=True)
    assert tag_token_ids(tok) == TAG_IDS
    assert merged.get_input_embeddings().weight.shape[0] == VOCAB_ROWS

    grpo_cfg = GRPOStageConfig.for_stage(
        3,
        "colab",
        notebook=True,
        data="tinygsm-hard",
        max_steps=2,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=16,
        max_path_length=6,
        train_n=8,
        save_steps=1,
        gradient_checkpointing=True,
        **SHORT,
    )
    run = run_grpo(grpo_cfg, sft.run_dir, tmp_path / "grpo", preflight=False)
    assert run.result["steps"] == 2 and [r["step"] for r in run.rows] == [1, 2]
    assert all(math.isfinite(r["reward"]) for r in run.rows)
    assert set(run.result["before"]) == set(run.result["after"]) == {"easy", "hard"}  # decoded
    assert ModelConfig.for_profile("colab").name == "Qwen/Qwen3-0.6B-Base"  # the stand-in's model


def test_precision_follows_the_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: False)
    assert gpu_dtype("float16") == "float16"  # a T4
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert gpu_dtype("float16") == "bfloat16" and gpu_dtype("float32") == "float32"  # L4, A100


def test_trainable_weights_are_float32_unless_training_runs_in_bfloat16():
    def layer():  # as TRL 1.16 leaves a QLoRA adapter: bfloat16, whatever the precision
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)).to(torch.bfloat16)
        model[0].requires_grad_(False)
        return model

    fp16, bf16 = layer(), layer()
    assert trainable_precision(fp16, "float16") == 2 and trainable_precision(bf16, "bfloat16") == 0
    assert [p.dtype for p in fp16.parameters()] == [torch.bfloat16] * 2 + [torch.float32] * 2
    assert {p.dtype for p in bf16.parameters()} == {torch.bfloat16}

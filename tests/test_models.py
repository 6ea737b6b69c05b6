"""Tiny tokenizer, the shipped tiny model, profile-aware loading, 4-bit and the offline error."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from pr1lib.config import ModelConfig
from pr1lib.decoding.models import (
    EOS_TOKEN,
    TINY_MODEL_DIR,
    ModelNotAvailableError,
    build_random_tiny,
    load_policy,
    load_tiny_tokenizer,
    lora_config,
    resolve_model_name,
)
from pr1lib.store.paths import REPO_ROOT

SHIPPED = REPO_ROOT / TINY_MODEL_DIR
needs_shipped = pytest.mark.skipif(
    not (SHIPPED / "model.safetensors").exists(),
    reason="data/tiny-base not built (pretrain-tiny --out runs/tiny-base, then copied there)",
)
TAGS = ("<Parallel>", "</Parallel>", "<Path>", "</Path>", "<Summary>", "</Summary>")


@pytest.fixture(scope="module")
def tok():
    return load_tiny_tokenizer()


@pytest.mark.parametrize(
    "text",
    [
        "Tom has 12 apples. He buys 3*12 = <<3*12=36>>36 more.\n#### 48",
        "Natalia sold 48/2 = $<<48/2=24>>24 clips in May.",  # real GSM8K text
        "<Parallel><Path>a</Path><Path>b</Path></Parallel>\n<Summary>Both "
        "agree.</Summary>\nFinal Answer: 7",
        "  odd   spacing\t and unicode: é, ü, 中, ½ ",
    ],
)
def test_tokenizer_decodes_any_text_exactly(tok, text):
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text


def test_tokenizer_splits_digits_and_has_no_tags(tok):
    pieces = tok.convert_ids_to_tokens(tok("1234567890", add_special_tokens=False)["input_ids"])
    assert pieces == list("1234567890")
    assert not set(TAGS) & set(tok.get_vocab())  # notebook 01 adds them, as for Qwen
    assert tok.eos_token == tok.pad_token == EOS_TOKEN
    assert 256 < len(tok) <= 1024
    # template words are one token
    assert len(tok(" apples", add_special_tokens=False)["input_ids"]) == 1


def test_smoke_profile_is_a_random_tiny_qwen3_with_the_tiny_tokenizer(tok):
    model, tokenizer, lora = load_policy("smoke")
    assert type(model).__name__ == "Qwen3ForCausalLM" and lora is None
    assert tokenizer.get_vocab() == tok.get_vocab()
    assert model.config.max_position_embeddings >= 1024 and model.config.tie_word_embeddings
    other, _ = build_random_tiny(seed=1, tokenizer=tokenizer)
    assert not torch.equal(model.lm_head.weight, other.lm_head.weight)  # random, seeded
    same, _ = build_random_tiny(seed=0, tokenizer=tokenizer)
    assert torch.equal(model.lm_head.weight, same.lm_head.weight)


def test_lora_config_follows_the_model_config():
    config = lora_config(ModelConfig(use_lora=True, lora_r=4, lora_alpha=8))
    assert (config.r, config.lora_alpha, config.target_modules) == (4, 8, "all-linear")
    assert lora_config(ModelConfig.for_profile("colab")).r == 16
    assert lora_config(ModelConfig.for_profile("tiny")) is None


def test_relative_names_resolve_against_the_repo_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_model_name("pr1lib") == str(REPO_ROOT / "pr1lib")
    assert resolve_model_name("someone/some-model") == "someone/some-model"


def _offline_python(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )


def test_offline_missing_hub_model_is_one_clear_error():
    code = (
        "from pr1lib.config import ModelConfig\n"
        "from pr1lib.decoding.models import load_policy, ModelNotAvailableError\n"
        "try:\n"
        "    load_policy(config=ModelConfig(name='pr1-nobody/no-such-model-xyz'))\n"
        "except ModelNotAvailableError as err:\n"
        "    print('ERR', err)\n"
    )
    out = _offline_python(code)
    assert out.returncode == 0, out.stderr[-2000:]
    message = out.stdout.split("ERR", 1)[1]
    for needle in (
        "pr1-nobody/no-such-model-xyz",
        "HF_HUB_OFFLINE",
        "--model DIR",
        "ModelConfig(name=",
    ):
        assert needle in message


def test_error_class_is_an_oserror():
    assert issubclass(ModelNotAvailableError, OSError)


@needs_shipped
def test_shipped_model_loads_offline_with_plain_from_pretrained():
    code = (
        "import json, transformers\n"
        f"m = transformers.AutoModelForCausalLM.from_pretrained({str(SHIPPED)!r})\n"
        f"t = transformers.AutoTokenizer.from_pretrained({str(SHIPPED)!r})\n"
        "print(json.dumps([type(m).__name__, m.config.model_type, t.eos_token, len(t)]))\n"
    )
    out = _offline_python(code)
    assert out.returncode == 0, out.stderr[-2000:]
    name, model_type, eos, vocab = json.loads(out.stdout.strip().splitlines()[-1])
    assert (name, model_type, eos) == ("Qwen3ForCausalLM", "qwen3", EOS_TOKEN)


@needs_shipped
def test_shipped_folder_is_small_and_has_a_card():
    assert (SHIPPED / "model.safetensors").stat().st_size <= 10 * 2**20
    card = json.loads((SHIPPED / "card.json").read_text())
    assert {"config", "steps", "train_time_s", "accuracy", "parameters"} <= set(card)
    assert (SHIPPED / "README.md").exists() and (SHIPPED / "loss.csv").exists()
    assert not (SHIPPED / "checkpoint").exists()


@needs_shipped
def test_tiny_profile_loads_the_shipped_model():
    model, tokenizer, lora = load_policy("tiny")
    assert lora is None and model.config.vocab_size == len(tokenizer)
    assert tokenizer.get_vocab() == load_tiny_tokenizer().get_vocab()


@needs_shipped
def test_tiny_model_in_4bit_nf4_on_cpu_runs_a_forward_pass():
    pytest.importorskip("bitsandbytes")
    model, tokenizer, _ = load_policy(config=ModelConfig(load_in_4bit=True))
    linear = model.model.layers[0].mlp.up_proj
    assert type(linear).__name__ == "Linear4bit" and linear.weight.quant_type == "nf4"
    ids = tokenizer("Problem: Tom has 3 pens.", return_tensors="pt")["input_ids"]  # (1, L)
    with torch.no_grad():
        logits = model(ids).logits  # (1, L, V)
    assert logits.shape == (1, ids.shape[1], len(tokenizer)) and torch.isfinite(logits).all()

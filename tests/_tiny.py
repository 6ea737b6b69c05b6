"""Tiny offline fixtures for the structure and rollout tests (no hub, fp32, seconds on a CPU).

Import from a test with ``from _tiny import ...`` after putting this folder on ``sys.path``
(pytest runs with ``--import-mode=importlib``, which does not do it).
"""

from __future__ import annotations

import string

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from pr1lib.decoding.steering import steer_logits
from pr1lib.decoding.structure import TAGS

EOS = "<|endoftext|>"


def toy_tokenizer() -> PreTrainedTokenizerFast:
    """Character-level tokenizer: printable ASCII, eos = pad, and the six tags as single tokens."""
    chars = [c for c in string.printable if c not in "\r\x0b\x0c"]
    vocab = {tok: i for i, tok in enumerate([EOS, "<unk>", *chars])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token=EOS, pad_token=EOS, unk_token="<unk>"
    )
    tok.add_special_tokens({"additional_special_tokens": list(TAGS)})
    return tok


def toy_model(
    vocab_size: int, seed: int = 0, attn: str = "sdpa", layers: int = 2
) -> Qwen3ForCausalLM:
    """Random Qwen3 (GQA 4/2, head_dim 16) in fp32 eval mode."""
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_size=128,
        max_position_embeddings=512,
        attn_implementation=attn,
    )
    return Qwen3ForCausalLM(config).eval()


def steer(model: Qwen3ForCausalLM, biases: dict[int, float]) -> Qwen3ForCausalLM:
    """Add ``biases`` (token id -> logit offset) to the model's output layer, in place."""
    steer_logits(model, biases)
    return model


def ids(tok: PreTrainedTokenizerFast, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False)


def one_thread():
    """Generator for a module fixture: tiny models run far faster on one thread on a busy CPU."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


PLANWORLD_SFT = "data/planworld-sft-unseen"  # PlanWorld's shipped cold start: plans of 2 or 3 deals


def planworld_shipped(n: int) -> tuple:
    """``(model, tokenizer, prompts)``: the shipped PlanWorld cold start and ``n`` held-out
    ten-deal prompts."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pr1lib.format.prompts import chat_prompt
    from pr1lib.worlds import planworld

    tok = AutoTokenizer.from_pretrained(PLANWORLD_SFT)
    model = AutoModelForCausalLM.from_pretrained(PLANWORLD_SFT).eval()
    recs = planworld.generate(n, "hard", "test", seed=0)
    return model, tok, [chat_prompt(r["question"], tok, "tiny") for r in recs]


def planned_rollouts(**settings):
    """A forked ``RolloutConfig`` laid out by the model's own plans (PlanWorld's), plus
    ``settings``."""
    from pr1lib.config import RolloutConfig
    from pr1lib.worlds import planworld

    layout = dict(num_paths=planworld.MOST, path_headers=True, header_style="plan")
    return RolloutConfig(mode="forked", **layout, **settings)

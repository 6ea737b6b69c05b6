"""A local stand-in for ``Qwen/Qwen3-0.6B-Base`` that the colab code path can load offline.

What matters to that path is kept exactly: the vocabulary (151,643 regular tokens, then Qwen3's
26 special tokens at 151,643-151,668, so the six parallel tags land on 151,669-151,674), the
embedding matrix of 151,936 rows tied to the LM head, the ids of end-of-text and padding, a
ChatML chat template, and the architecture (``Qwen3ForCausalLM``, its config keys). Depth and
width shrink (2 layers, 64 wide) and the weights are random. The regular vocabulary is the tiny
byte-level BPE of the tiny model, with merges learned on the v3 prompt and TinyGSM traces (so
text is about as short as with Qwen's tokenizer), padded with filler tokens that never occur.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

REGULAR = 151_643  # Qwen3's regular (byte-level BPE) tokens
SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]  # ids 151,643-151,668
VOCAB_ROWS = 151_936  # Qwen3-0.6B's embedding rows (the vocabulary padded to a multiple of 128)
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _corpus() -> list[str]:
    """What the stand-in's merges are learned from: the paper's v3 prompt (so prompts stay about
    as short as with Qwen's tokenizer), TinyGSM problems and parallel traces."""
    from pr1lib.data.sources import load_world
    from pr1lib.format.prompts import prompt_text
    from pr1lib.worlds.teachers import RuleTeacher

    records = load_world("tinygsm-easy", 200, "train", 0)
    teacher = RuleTeacher(seed=0)
    return [prompt_text(r["question"], "v3") for r in records] + [
        teacher.trace(r)["text"] for r in records
    ]


def standin_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer with exactly Qwen3's size and special-token ids."""
    from pr1lib.decoding.models import train_tiny_tokenizer

    learned = train_tiny_tokenizer(_corpus(), vocab_size=2000)
    spec = json.loads(learned.backend_tokenizer.to_str())
    spec["added_tokens"] = []
    tiny = [
        t
        for t, _ in sorted(spec["model"]["vocab"].items(), key=lambda kv: kv[1])
        if t != "<|endoftext|>"
    ]
    vocab = {t: i for i, t in enumerate(tiny)}
    vocab.update({f"<|filler_{i}|>": i for i in range(len(vocab), REGULAR)})
    spec["model"]["vocab"] = vocab
    raw = Tokenizer.from_str(json.dumps(spec))
    raw.add_special_tokens(SPECIALS)
    return PreTrainedTokenizerFast(
        tokenizer_object=raw,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        chat_template=CHATML,
        clean_up_tokenization_spaces=False,
    )


def standin_config() -> Qwen3Config:
    """Qwen3-0.6B-Base's config.json with 2 layers of width 64 instead of 28 of 1,024."""
    return Qwen3Config(
        vocab_size=VOCAB_ROWS,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        bos_token_id=151643,
        eos_token_id=151643,
        attention_bias=False,
        hidden_act="silu",
    )


def write_standin(folder: Path, seed: int = 0) -> Path:
    """Save the stand-in (random bfloat16 weights, as on the hub) and its tokenizer."""
    import torch

    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(standin_config()).to(torch.bfloat16)
    model.save_pretrained(folder)
    standin_tokenizer().save_pretrained(folder)
    return Path(folder)

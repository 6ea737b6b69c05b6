"""``HFTeacher``: cold-start traces sampled from any causal LM through transformers.

The prompt is the paper's v3 instruction in the tokenizer's chat template; the text after the last
``</think>`` is kept, tags included. (The rule teacher and the protocol: ``pr1lib.worlds.teachers``.)
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

from pr1lib.config import ModelConfig
from pr1lib.format.grammar import TAGS
from pr1lib.decoding.models import load_policy
from pr1lib.format.prompts import chat_prompt
from pr1lib.worlds.teachers import make_trace, strip_thinking


@dataclass
class HFTeacher:
    """Sample any causal LM through transformers, one trace per problem, in batches.

    ``model`` is a loaded model or a hub id / local folder (then loaded with
    ``pr1lib.decoding.models.load_policy``, 4-bit NF4 if ``load_in_4bit``). Prompts are the paper's v3
    instruction in the tokenizer's chat template (``pr1lib.format.prompts.chat_prompt``); the text after
    the last ``</think>`` is kept, tags included.
    """

    model: Any
    tokenizer: Any = None
    load_in_4bit: bool = False
    batch_size: int = 8
    max_new_tokens: int = 2048
    temperature: float = 0.7
    top_p: float = 0.95
    prompt_style: str = "v3"
    seed: int = 0
    name: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.model, str):
            if not self.model.strip():  # "" would load whatever model the current folder holds
                raise ValueError(
                    "the hf teacher needs a model: pass --model with a hub id or a local "
                    "model folder"
                )
            self.name = self.name or f"hf:{self.model}"
            self.model, self.tokenizer = _load_hf(self.model, self.load_in_4bit)
        self.name = self.name or f"hf:{getattr(self.model.config, '_name_or_path', '') or 'model'}"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

    def generate(self, problems: list[dict]) -> list[dict]:
        traces = []
        for start in range(0, len(problems), self.batch_size):
            batch = problems[start : start + self.batch_size]
            for problem, text in zip(
                batch, self.sample([p["question"] for p in batch], batch[0]["id"])
            ):
                text = strip_thinking(text)
                traces.append(
                    make_trace(problem, self.name, text, None if text else "empty output")
                )
        return traces

    def sample(self, questions: list[str], key: str = "") -> list[str]:
        """Decoded continuations (special tokens other than the parallel tags removed)."""
        import torch  # heavy: only the HF teacher needs it, the rule teacher stays light

        tok = self.tokenizer
        tok.padding_side = "left"
        prompts = [chat_prompt(q, tok, self.prompt_style) for q in questions]
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(
            self.model.device
        )
        torch.manual_seed(zlib.crc32(f"{self.seed}:{key}".encode()))
        with torch.no_grad():
            out = self.model.generate(
                **enc,
                do_sample=self.temperature > 0,
                temperature=self.temperature or None,
                top_p=self.top_p,
                max_new_tokens=self.max_new_tokens,
                pad_token_id=tok.pad_token_id,
            )
        return [self._decode(row.tolist()) for row in out[:, enc["input_ids"].shape[1] :]]

    def _decode(self, ids: list[int]) -> str:
        eos = self.model.generation_config.eos_token_id
        stops = {self.tokenizer.eos_token_id, *(eos if isinstance(eos, list) else [eos])} - {None}
        cut = next((i for i, t in enumerate(ids) if t in stops), len(ids))
        text = self.tokenizer.decode(ids[:cut], skip_special_tokens=False)
        for special in set(self.tokenizer.all_special_tokens) - set(TAGS):
            text = text.replace(special, "")
        return text


def _load_hf(name: str, load_in_4bit: bool):
    """Model and tokenizer for a hub id or folder, on GPU in half precision when there is one."""
    import torch  # heavy: only the HF teacher needs it, the rule teacher stays light

    dtype = "float32"
    if torch.cuda.is_available():
        dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    model, tokenizer, _ = load_policy(
        config=ModelConfig(name=name, load_in_4bit=load_in_4bit, dtype=dtype)
    )
    return model.eval(), tokenizer

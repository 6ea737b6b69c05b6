"""Steering a model without training it: a fixed bias on its logits (demos, tests, benchmarks).

A random or tiny model rarely opens a block; ``steer_logits`` makes it open one at once, write
paths of a set length or never stop, so the rollout engine's rules can be shown and measured.
"""

from __future__ import annotations

from typing import Any, Callable

import torch


class LogitBias(torch.nn.Module):
    """An output layer plus a fixed logit bias (steers a model without training it)."""

    def __init__(self, head: torch.nn.Module, bias: torch.Tensor):
        super().__init__()
        self.head = head
        self.register_buffer("bias", bias)  # (V,)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.head(hidden) + self.bias.to(hidden.dtype)  # (B, L, V)


def steer_logits(model: Any, bias: dict[int, float] | torch.Tensor) -> Callable[[], None]:
    """Add a fixed bias to the model's logits, in place (a ``{token id: offset}`` dict or a full
    ``(V,)`` tensor), so a random model opens blocks or never stops; returns the undo function.

    >>> from transformers import Qwen3Config, Qwen3ForCausalLM
    >>> model = Qwen3ForCausalLM(Qwen3Config(vocab_size=16, hidden_size=8, head_dim=4,
    ...     intermediate_size=8, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1))
    >>> undo = steer_logits(model, {3: 100.0})
    >>> int(model(torch.tensor([[1, 2]])).logits[0, -1].argmax())
    3
    >>> undo(); type(model.lm_head).__name__
    'Linear'
    """
    head = model.lm_head
    if isinstance(bias, dict):
        offsets = torch.zeros(head.weight.shape[0])  # (V,)
        for token, value in bias.items():
            offsets[token] = value
        bias = offsets
    model.lm_head = LogitBias(head, bias.to(head.weight.device))
    return lambda: setattr(model, "lm_head", head)

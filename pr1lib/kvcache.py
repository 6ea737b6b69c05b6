"""Decoding rows that share one KV cache: per-row positions, key masks with holes, regrouping.

``Streams`` is the memory under ``pr1lib.rollout``'s engine. Every row of the batch has its own
position counter and its own key mask (``valid``): a row that idles while the others decode adds
a *hole* (a masked column) instead of a key. ``regroup`` rebuilds the rows from segments of the
old rows' real keys (a fork repeats a row, a merge concatenates rows, a drop omits one) and
compacts the holes away; it copies the cache once, so memory peaks at about twice the cache.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from transformers import DynamicCache


class Streams:
    """Decoding rows that share one ``DynamicCache``; each row has its own positions and key mask.

    ``valid[r, t]`` says whether cached column ``t`` is a real key of row ``r`` (False = a hole).

    >>> from transformers import Qwen3Config, Qwen3ForCausalLM
    >>> _ = torch.manual_seed(0)
    >>> model = Qwen3ForCausalLM(Qwen3Config(vocab_size=16, hidden_size=8, head_dim=4,
    ...     intermediate_size=8, num_hidden_layers=1, num_attention_heads=2,
    ...     num_key_value_heads=1)).eval()
    >>> st = Streams(model)
    >>> _ = st.prefill([[1, 2], [3]], pad=0)
    >>> out = st.extend(torch.tensor([[4, 5], [6, 0]]), torch.tensor([[1, 1], [1, 0]]).bool())
    >>> full = model(torch.tensor([[1, 2, 4, 5]])).logits[0]  # the same row, decoded in one go
    >>> torch.allclose(out[0], full[2:], atol=1e-5), st.pos.tolist(), st.n_real(1)
    (True, [4, 2], 2)
    """

    def __init__(self, model: Any):
        self.model, self.cache, self.fed = model, None, 0
        self.valid = torch.zeros(0, 0, dtype=torch.bool)  # (R, T)
        self.pos = torch.zeros(0, dtype=torch.long)  # (R,) position of each row's next token

    def _forward(self, ids: torch.Tensor, live: torch.Tensor, positions: torch.Tensor,
                 keep: Any = 1) -> torch.Tensor:
        mask = torch.cat([self.valid, live], dim=1)  # (R, T + q)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                         cache=self.cache, use_cache=True, logits_to_keep=keep)
        self.cache, self.valid = out.cache, mask
        self.fed += int(live.sum())
        return out.logits  # (R, q, V)

    def prefill(self, prompts: Sequence[Sequence[int]], pad: int) -> torch.Tensor:
        """Right-padded prefill of every prompt; returns each row's last logits ``(R, V)``."""
        if not prompts or min(len(p) for p in prompts) == 0:
            raise ValueError("every prompt needs at least one token")
        dev = self.model.device
        lens = torch.tensor([len(p) for p in prompts], device=dev)  # (R,)
        width = int(lens.max())
        rows = [list(p) + [pad] * (width - len(p)) for p in prompts]
        ids = torch.tensor(rows, device=dev)  # (R, W)
        positions = torch.arange(width, device=dev).expand(len(prompts), -1)  # (R, W)
        self.cache = DynamicCache(config=self.model.config)
        self.valid = torch.zeros(len(prompts), 0, dtype=torch.bool, device=dev)  # (R, 0)
        last = torch.unique(lens - 1)  # (U,) sorted: only these columns need logits
        logits = self._forward(ids, positions < lens[:, None], positions, keep=last)  # (R, U, V)
        self.pos = lens.clone()  # (R,)
        pick = torch.searchsorted(last, lens - 1)  # (R,)
        return logits[torch.arange(len(prompts), device=dev), pick]  # (R, V)

    def extend(self, ids: torch.Tensor, live: torch.Tensor, keep: Any = 0) -> torch.Tensor:
        """Feed ``q`` tokens per row at once, causally (``live`` False: a hole, no position used);
        returns the logits ``(R, q, V)`` (``keep`` as the model's ``logits_to_keep``)."""
        offsets = (live.long().cumsum(dim=1) - 1).clamp(min=0)  # (R, q) live tokens before
        logits = self._forward(ids, live, self.pos[:, None] + offsets, keep)  # (R, q', V)
        self.pos = self.pos + live.long().sum(dim=1)  # (R,)
        return logits

    def step(self, tokens: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
        """Feed one token per row (``live`` False: a hole); returns the logits ``(R, V)``."""
        return self.extend(tokens[:, None], live[:, None], keep=1)[:, -1]  # (R, V)

    def regroup(self, plan: Sequence[Sequence[tuple[int, int, int]]], pos: Sequence[int]) -> None:
        """Rebuild the rows: new row i concatenates segments ``(row, a, b)``, keys ``a:b`` of the
        old row's real keys (holes skipped). Forks repeat a row, merges join rows, drops omit one.
        """
        dev = self.valid.device
        used = {seg[0] for row in plan for seg in row}
        real = {r: self.valid[r].nonzero().squeeze(1) for r in used}  # each (n_r,)
        parts = [[(r, real[r][a:b]) for r, a, b in row] for row in plan]
        width = max([sum(len(c) for _, c in row) for row in parts] + [1])
        rows = torch.zeros(len(plan), width, dtype=torch.long, device=dev)  # (R', T')
        cols = torch.zeros(len(plan), width, dtype=torch.long, device=dev)  # (R', T')
        valid = torch.zeros(len(plan), width, dtype=torch.bool, device=dev)  # (R', T')
        for i, row in enumerate(parts):
            r_idx = torch.cat([torch.full_like(c, r) for r, c in row])  # (n_i,)
            c_idx = torch.cat([c for _, c in row])  # (n_i,)
            n = len(c_idx)
            rows[i, :n], cols[i, :n], valid[i, :n] = r_idx, c_idx, True
        kv = [(layer.keys[rows, :, cols].transpose(1, 2).contiguous(),
               layer.values[rows, :, cols].transpose(1, 2).contiguous())
              for layer in self.cache.layers]  # each (R', H, T', D)
        self.cache, self.valid = DynamicCache(kv), valid
        self.pos = torch.tensor(list(pos), dtype=torch.long, device=dev)  # (R',)

    def n_real(self, row: int) -> int:
        """How many real (non-hole) keys row ``row`` has in the cache."""
        return int(self.valid[row].sum())

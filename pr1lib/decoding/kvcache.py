"""Decoding rows that share one KV cache: per-row positions, key masks with holes, regrouping.

``Streams`` is the memory under ``pr1lib.decoding.rollout``'s engine for a model that
``pr1lib.decoding.rowcache.RowStreams`` (packed rows, the tiny model's) does not cover, and the
prefill and re-read forwards of ``RowStreams`` itself. Every row of the batch has its own
position counter and its own key mask (``valid``): a row that idles while the others decode adds
a *hole* (a masked column) instead of a key. ``regroup`` rebuilds the rows from segments of the
old rows' real keys (a fork repeats a row, a merge concatenates rows, a drop omits one) and
compacts the holes away; it copies the cache once, so memory peaks at about twice the cache.

Each layer's keys and values live in a buffer with spare columns (``BufferLayer``): a decoding
step writes its column in place, where ``DynamicCache`` would copy the whole cache (``torch.cat``)
at every step, a cost that grows with the length of the rollout; ``extend_rows`` runs a few rows
(a re-read) without running the idle ones; a regroup that only keeps, drops or repeats whole
rows copies them block by block (holes and all, while they are few), any other one gathers the
real keys in one ``index_select``, both into the memory the last cache left; a regroup that
only drops rows moves the last rows into the freed places and keeps the memory; the prefill runs
each distinct prompt once; a one-token step runs ``pr1lib.decoding.decode.step`` where it applies,
else the model with ``pr1lib.decoding.decode``'s two-matmul attention and the key mask as its 4D
mask. ``bench grpo`` measures the whole step. ``Streams(model, buffered=False)`` is the first
engine: a plain ``DynamicCache``, ``extend`` on every row, a row-by-row regroup (the same numbers,
slower).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Sequence

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from pr1lib.decoding import decode
from pr1lib.decoding.structure import attn_implementation


class BufferLayer(DynamicLayer):
    """A ``DynamicLayer`` that appends in place: ``keys`` / ``values`` are views of the first
    ``length`` columns of a buffer that doubles when full, so a step copies one column, not all.

    >>> layer = BufferLayer()
    >>> for _ in range(3):
    ...     k, v = layer.update(torch.ones(2, 1, 1, 4), torch.zeros(2, 1, 1, 4))
    >>> tuple(k.shape), layer.get_seq_length(), layer.capacity
    ((2, 1, 3, 4), 3, 6)
    """

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.length, self.capacity = 0, 0

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n = key_states.shape[-2]
        if self.length + n > self.capacity:
            self._grow(key_states, value_states, 2 * (self.length + n))
        self._keys[:, :, self.length : self.length + n] = key_states  # (B, H, n, D)
        self._values[:, :, self.length : self.length + n] = value_states
        self.length += n
        self.keys, self.values = self._keys[:, :, : self.length], self._values[:, :, : self.length]
        return self.keys, self.values

    @classmethod
    def holding(cls, keys: torch.Tensor, values: torch.Tensor, length: int) -> BufferLayer:
        """A layer whose buffers are ``keys`` / ``values`` ``(B, H, C, D)``, ``length`` in use."""
        layer = cls()
        layer._keys, layer._values, layer.length = keys, values, length
        layer.capacity = keys.shape[2]
        layer.keys, layer.values = keys[:, :, :length], values[:, :, :length]
        layer.is_initialized, layer.device = True, keys.device
        return layer

    def _grow(self, key_states: torch.Tensor, value_states: torch.Tensor, capacity: int) -> None:
        b, h, _, d = key_states.shape
        keys = key_states.new_empty(b, h, capacity, d)  # (B, H, C, D)
        values = value_states.new_empty(b, h, capacity, value_states.shape[-1])
        if self.length:
            keys[:, :, : self.length], values[:, :, : self.length] = self.keys, self.values
        self._keys, self._values, self.capacity = keys, values, capacity
        self.is_initialized, self.device = True, key_states.device


def storage(layer: DynamicLayer) -> tuple[torch.Tensor, torch.Tensor]:
    """A layer's keys and values as contiguous ``(B, H, T, D)`` tensors (a buffer: all of it)."""
    if isinstance(layer, BufferLayer):
        return layer._keys, layer._values
    return layer.keys.contiguous(), layer.values.contiguous()


def gather_keys(
    tensor: torch.Tensor,
    rows: torch.Tensor,
    cols: torch.Tensor,
    spare: list[torch.Tensor] | None = None,
) -> torch.Tensor:
    """``out[i, :, j] = tensor[rows[i, j], :, cols[i, j]]`` for a contiguous ``(B, H, T, D)``
    tensor: one flat ``index_select``, several times faster than advanced indexing. ``out`` takes
    the memory of a large enough flat tensor of ``spare`` if there is one (and removes it):
    reusing it skips the page faults of fresh memory, which cost more than the copy.

    >>> t = torch.arange(24.0).view(2, 1, 3, 4)
    >>> gather_keys(t, torch.tensor([[1, 0]]), torch.tensor([[2, 0]]))[0, 0, :, 0].tolist()
    [20.0, 0.0]
    """
    b, h, t, d = tensor.shape
    heads = torch.arange(h, device=tensor.device)[None, :, None]  # (1, H, 1)
    flat = (rows[:, None, :] * h + heads) * t + cols[:, None, :]  # (R', H, T')
    out = _take(spare, flat.numel(), d, tensor)
    picked = torch.index_select(tensor.reshape(b * h * t, d), 0, flat.reshape(-1), out=out)
    return picked.view(*flat.shape, d)


def _take(spare: list[torch.Tensor] | None, n: int, d: int, like: torch.Tensor) -> Any:
    """An ``(n, d)`` view of the first large enough flat tensor of ``spare`` (removed from it);
    else of a new one with a quarter more room, so that the next regroups fit in it."""
    if spare is None:
        return None
    fits = [s for s in spare if s.numel() >= n * d and s.dtype == like.dtype]
    flat = spare.pop(spare.index(fits[0])) if fits else like.new_empty(n * d * 5 // 4)
    return flat[: n * d].view(n, d)


def _roots(cache: DynamicCache) -> list[torch.Tensor]:
    """The flat tensors under a buffered cache's keys and values (the next regroup's memory)."""
    return [
        (t if t._base is None else t._base).view(-1)
        for layer in cache.layers
        for t in storage(layer)
    ]


def new_cache(
    buffered: bool = True,
    kv: Sequence[tuple[torch.Tensor, torch.Tensor]] = (),
    length: int | None = None,
) -> DynamicCache:
    """A ``DynamicCache`` of ``BufferLayer`` (``buffered``: ``kv`` become its buffers, the first
    ``length`` columns in use) or of plain layers holding ``kv``."""
    cache = DynamicCache()
    if not buffered:
        for i, (keys, values) in enumerate(kv):
            cache.update(keys, values, i)
        return cache
    cache.layer_class_to_replicate = BufferLayer
    cache.layers = [
        BufferLayer.holding(k, v, k.shape[2] if length is None else length) for k, v in kv
    ]
    return cache


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

    def __init__(self, model: Any, buffered: bool = True):
        self.model, self.cache, self.fed, self.buffered = model, None, 0, buffered
        self.lean = buffered and decode.supported(model)  # one-token steps: decode.step
        self.spare: list[torch.Tensor] = []  # flat buffers of the last cache, for the next regroup
        self.valid = torch.zeros(0, 0, dtype=torch.bool)  # (R, T)
        self.pos = torch.zeros(0, dtype=torch.long)  # (R,) position of each row's next token

    def _forward(
        self, ids: torch.Tensor, live: torch.Tensor, positions: torch.Tensor, keep: Any = 1
    ) -> torch.Tensor:
        mask = torch.cat([self.valid, live], dim=1)  # (R, T + q)
        # one token under SDPA: every key is in its past, so the key mask is the 4D mask as it is
        one = ids.shape[1] == 1 and self.buffered and attn_implementation(self.model) == "sdpa"
        self.fed += int(live.sum())
        if one and self.lean and self.valid.shape[1]:  # after the prefill: every layer has keys
            logits = decode.step(self.model, ids, positions, mask, self.cache)  # (R, V)
            self.valid = mask
            return logits[:, None]  # (R, 1, V)
        attend = mask[:, None, None, :] if one else mask  # (R, 1, 1, T + 1): no mask building
        with decode.decoding(self.model) if self.buffered else nullcontext():
            out = self.model(
                input_ids=ids,
                attention_mask=attend,
                position_ids=positions,
                cache=self.cache,
                use_cache=True,
                logits_to_keep=keep,
            )
        self.cache, self.valid = out.cache, mask
        return out.logits  # (R, q, V)

    def prefill(self, prompts: Sequence[Sequence[int]], pad: int) -> torch.Tensor:
        """Right-padded prefill of every prompt; returns each row's last logits ``(R, V)``. A
        buffered cache runs each distinct prompt once (a GRPO group repeats its prompt) and
        copies its rows."""
        if not prompts or min(len(p) for p in prompts) == 0:
            raise ValueError("every prompt needs at least one token")
        distinct = list(dict.fromkeys(tuple(p) for p in prompts))
        if self.buffered and len(distinct) < len(prompts):
            logits = self.prefill(distinct, pad)  # (U, V)
            where = {p: i for i, p in enumerate(distinct)}
            rows = [where[tuple(p)] for p in prompts]
            self.pos = self.pos[rows]
            self._select_rows(rows)
            return logits[rows]
        dev = self.model.device
        lens = torch.tensor([len(p) for p in prompts], device=dev)  # (R,)
        width = int(lens.max())
        rows = [list(p) + [pad] * (width - len(p)) for p in prompts]
        ids = torch.tensor(rows, device=dev)  # (R, W)
        positions = torch.arange(width, device=dev).expand(len(prompts), -1)  # (R, W)
        self.cache = new_cache() if self.buffered else DynamicCache(config=self.model.config)
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

    def extend_rows(
        self, rows: Sequence[int], ids: torch.Tensor, live: torch.Tensor
    ) -> torch.Tensor:
        """``extend`` on ``rows`` only (``ids``, ``live``: ``(G, q)``): their forward runs on a copy
        of their cache and the other rows get ``q`` holes at no cost. Returns ``(G, q, V)``: what
        ``extend`` on every row gives these rows, without the idle rows' work."""
        idx = torch.tensor(list(rows), device=self.valid.device)  # (G,)
        part = Streams(self.model, self.buffered)
        part.cache = new_cache(
            self.buffered, [(layer.keys[idx], layer.values[idx]) for layer in self.cache.layers]
        )
        part.valid, part.pos = self.valid[idx], self.pos[idx]
        logits = part.extend(ids, live)  # (G, q, V)
        q = ids.shape[1]
        for layer, new in zip(self.cache.layers, part.cache.layers):
            r, h, _, d = layer.keys.shape
            keys = layer.keys.new_zeros(r, h, q, d)  # (R, H, q, D)
            values = torch.zeros_like(keys)
            keys[idx], values[idx] = new.keys[:, :, -q:], new.values[:, :, -q:]
            layer.update(keys, values)
        holes = torch.zeros(len(self.pos), q, dtype=torch.bool, device=idx.device)  # (R, q)
        holes[idx] = live
        self.valid, self.fed = torch.cat([self.valid, holes], dim=1), self.fed + part.fed
        self.pos[idx] = part.pos
        return logits

    def step(self, tokens: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
        """Feed one token per row (``live`` False: a hole); returns the logits ``(R, V)``."""
        return self.extend(tokens[:, None], live[:, None], keep=1)[:, -1]  # (R, V)

    def regroup(self, plan: Sequence[Sequence[tuple[int, int, int]]], pos: Sequence[int]) -> None:
        """Rebuild the rows: new row i concatenates segments ``(row, a, b)``, keys ``a:b`` of the
        old row's real keys (holes skipped). Forks repeat a row, merges join rows, drops omit one.
        """
        dev = self.valid.device
        self.pos = torch.tensor(list(pos), dtype=torch.long, device=dev)  # (R',)
        if not self.buffered:
            return self._first_regroup(plan)
        counts = self.valid.sum(dim=1).tolist()  # real keys per old row
        whole = [s[0][0] for s in plan if len(s) == 1 and s[0][1:] == (0, counts[s[0][0]])]
        few_holes = sum(counts[r] for r in whole) >= 0.875 * len(whole) * self.valid.shape[1]
        if len(whole) == len(plan) and few_holes:  # rows kept or forked whole: copy rows, holes too
            return self._select_rows(whole)
        rows, cols, valid = self._sources(plan)  # each (R', T')
        room = torch.zeros(len(plan), valid.shape[1] // 4 + 16, dtype=torch.long, device=dev)
        rows, cols = torch.cat([rows, room], dim=1), torch.cat([cols, room], dim=1)  # spare columns
        kv = [
            (gather_keys(k, rows, cols, self.spare), gather_keys(v, rows, cols, self.spare))
            for k, v in map(storage, self.cache.layers)
        ]  # each (R', H, T' + room, D)
        self.spare = _roots(self.cache)  # the old buffers: the next regroup's memory
        self.cache, self.valid = new_cache(self.buffered, kv, valid.shape[1]), valid

    def _select_rows(self, rows: list[int]) -> None:
        """New row i is old row ``rows[i]`` as it is (holes too): one block copy per row and head,
        much cheaper than a key-by-key gather."""
        idx = torch.tensor(rows, dtype=torch.long, device=self.valid.device)  # (R',)
        moved = [j for j, r in enumerate(rows) if r != j]
        if len(set(rows)) == len(rows) and all(rows[j] >= len(rows) for j in moved):
            return self._drop_rows(idx, moved)
        kv = []
        for layer in self.cache.layers:
            pair = []
            for t in storage(layer):  # (R, H, C, D), contiguous
                r, h, c, d = t.shape
                heads = torch.arange(h, device=idx.device)
                blocks = (idx[:, None] * h + heads).reshape(-1)  # (R' H,) one per row and head
                out = _take(self.spare, len(blocks), c * d, t)
                picked = torch.index_select(t.view(r * h, c * d), 0, blocks, out=out)
                pair.append(picked.view(len(rows), h, c, d))
            kv.append(pair)
        self.spare = _roots(self.cache)  # the old buffers: the next regroup's memory
        self.cache, self.valid = new_cache(True, kv, self.valid.shape[1]), self.valid[idx]

    def _drop_rows(self, idx: torch.Tensor, moved: list[int]) -> None:
        """Rows dropped, the last ones moved into the freed places (``idx[j] == j`` but at
        ``moved``): copy those rows in place and keep the first ``R'`` rows of every buffer."""
        dst = torch.tensor(moved, dtype=torch.long, device=idx.device)  # (M,)
        kv = []
        for layer in self.cache.layers:
            pair = storage(layer)  # (R, H, C, D) each
            for t in pair if moved else ():
                t.index_copy_(0, dst, t[idx[dst]])
            kv.append([t[: len(idx)] for t in pair])  # views: no new memory
        self.cache, self.valid = new_cache(True, kv, self.valid.shape[1]), self.valid[idx]

    def _first_regroup(self, plan: Sequence[Sequence[tuple[int, int, int]]]) -> None:
        """The first engine's regroup (row by row, advanced indexing), kept to measure against."""
        dev, used = self.valid.device, {seg[0] for row in plan for seg in row}
        real = {r: self.valid[r].nonzero().squeeze(1) for r in used}  # each (n_r,)
        parts = [[(r, real[r][a:b]) for r, a, b in row] for row in plan]
        width = max([sum(len(c) for _, c in row) for row in parts] + [1])
        rows, cols = (torch.zeros(len(plan), width, dtype=torch.long, device=dev) for _ in range(2))
        valid = torch.zeros(len(plan), width, dtype=torch.bool, device=dev)  # (R', T')
        for i, row in enumerate(parts):
            n = sum(len(c) for _, c in row)
            rows[i, :n] = torch.cat([torch.full_like(c, r) for r, c in row])
            cols[i, :n], valid[i, :n] = torch.cat([c for _, c in row]), True
        kv = [
            (
                layer.keys[rows, :, cols].transpose(1, 2).contiguous(),
                layer.values[rows, :, cols].transpose(1, 2).contiguous(),
            )
            for layer in self.cache.layers
        ]  # each (R', H, T', D)
        self.cache, self.valid = DynamicCache(kv), valid

    def _sources(self, plan: Sequence[Sequence[tuple[int, int, int]]]) -> tuple[torch.Tensor, ...]:
        """``(rows, cols, valid)``, each ``(R', T')``: the old row and column of every new key (all
        segments at once, so the cost does not grow with the number of rows)."""
        dev = self.valid.device
        segs = torch.tensor(
            [(i, r, a, b - a) for i, row in enumerate(plan) for r, a, b in row],
            dtype=torch.long,
            device=dev,
        ).reshape(-1, 4)  # (S, 4)
        new, old, start, length = segs.unbind(1)  # each (S,)
        counts = self.valid.sum(dim=1)  # (R,) real keys per old row
        real_cols = self.valid.nonzero()[:, 1]  # (N,) row by row, in column order
        seg = torch.repeat_interleave(torch.arange(len(segs), device=dev), length)  # (K,)
        k = torch.arange(len(seg), device=dev)  # (K,) every new key, rows one after another
        new_len = torch.zeros(len(plan), dtype=torch.long, device=dev).index_add_(0, new, length)
        rank = start[seg] + k - (length.cumsum(0) - length)[seg]  # (K,) among the old row's keys
        col = real_cols[counts.cumsum(0)[old[seg]] - counts[old[seg]] + rank]  # (K,)
        at = k - (new_len.cumsum(0) - new_len)[new[seg]]  # (K,) position in the new row
        width = max(int(new_len.max()) if len(plan) else 0, 1)
        rows, cols = (torch.zeros(len(plan), width, dtype=torch.long, device=dev) for _ in range(2))
        valid = torch.zeros(len(plan), width, dtype=torch.bool, device=dev)  # (R', T')
        rows[new[seg], at], cols[new[seg], at], valid[new[seg], at] = old[seg], col, True
        return rows, cols, valid

    def n_real(self, row: int) -> int:
        """How many real (non-hole) keys row ``row`` has in the cache."""
        return int(self.valid[row].sum())

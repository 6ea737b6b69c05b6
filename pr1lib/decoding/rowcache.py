"""Decoding rows whose keys sit packed at the front of their own row of one buffer, after a base
they share with other rows.

``RowStreams`` is the memory under the rollout engine (``pr1lib.decoding.engine``) for a model that
``pr1lib.decoding.decode.supported`` covers (the tiny model on the CPU). A row's keys are two
parts:

- its **base**, a prefix kept once for every row that shares it, in ``bases`` (a ``_Buffer``):
  after the prefill each distinct prompt is the base of its samples; a fork copies the row's
  keys once into a new base, the base of its k paths (no path copies the prefix); a merge
  copies the prefix and the paths' keys into the summary row's new base;
- its **own** keys, those it has decoded since, in ``buf``: one buffer
  ``(2 L, rows, H_kv, columns, D)`` holding every layer's keys and values, row ``r`` keeping its
  ``buf.lens[r]`` keys in columns ``:buf.lens[r]`` (no holes: a row that idles writes nothing).

A step (``pr1lib.decoding.decode.row_step`` with ``decode.Bases``) writes each row's new key at its
own column, reads every base once for all its rows (a block's paths: k queries against one copy)
and each row's own keys with a per-row length mask, one softmax over both. ``lens`` are the
rows' keys as the engine counts them (base and own).

Rows live in *slots*: ``regroup`` (fork, merge, drop) keeps every row that goes on in its slot
with its base and copies only what moves (the last rows' own keys moved into freed slots); a
fork's or merge's rows start with a new base and no own keys. ``pr1lib.decoding.kvcache.Streams``
is the engine before this one (one shared column count, finished paths waiting with holes, a
regroup that copies the cache); ``bench eval`` measures one against the other.

The engine sizes the own buffer up front: room for a whole completion per row and for every row
a prompt may fork into (``fan``: k paths), so a fork never grows it; it still grows (one copy) if
the rows or the columns run out. Memory comes unwritten and is zeroed a few columns ahead of the
longest row, on the rows in use; a finished rollout's buffers are kept for the next one
(``SPARE_BYTES``): fresh memory costs a page fault per page written, about what decoding reads of
it. Moves are slice copies (a row's keys are contiguous columns), read before any is written.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import torch

from pr1lib.decoding import decode
from pr1lib.decoding.kvcache import Streams, new_cache

CLEAN_AHEAD = 32  # columns zeroed ahead of the longest row (one memset per this many steps)
# Bases pay where many rows read one prefix: from SHARE_ROWS rows (prompts x fan; fewer rows read
# their keys from the CPU's caches at about the price of the bases' extra small ops), and for
# blocks of at least SHARE_FAN paths or a prompt's samples decoded serially (bases padded to the
# largest group: two-path blocks beside a prompt's eight samples cost more than they save).
SHARE_ROWS, SHARE_FAN = 32, 4
SPARE_BYTES = 2 << 30  # finished rollouts' buffers kept for the next ones, at most this much
# (a WideWorld batch of 64 forking into 9 paths: about 1 GiB)
_SPARE: list[torch.Tensor] = []  # the most recently freed first

Copy = tuple[int, int, int, int, int]  # (to slot, to column, from slot, from column, n keys)


class _Buffer:
    """The memory of the rows: ``kv`` ``(2 L, R', H_kv, C, D)`` (keys of layer ``l`` at ``l``,
    values at ``L + l``), ``lens`` the real keys of the rows in use; one op moves, writes or
    clears a part of every layer."""

    def __init__(self, layers: int, shape: tuple[int, int], like: torch.Tensor):
        self.layers, self.shape, self.like = layers, shape, like
        self.kv: torch.Tensor | None = None  # (2 L, R', H_kv, C, D); rows :len(lens) in use
        self.lens: list[int] = []  # real keys per row
        self.clean, self.rows_clean = 0, 0  # columns :clean of slots :rows_clean are finite

    def reserve(self, rows: int, columns: int, room: int = 0, capacity: int = 0) -> None:
        """Room for ``rows`` rows (``capacity`` if more: the rows it may come to) of ``columns +
        room`` keys, every column below ``columns`` of the first ``rows`` slots finite: a masked
        column is still multiplied (by a zero weight), and ``0 x NaN`` would spread. Memory comes
        unwritten (fresh or a spare) and is zeroed a few columns ahead of the longest row, on the
        slots in use only."""
        have = (self.kv.shape[1], self.kv.shape[3]) if self.kv is not None else (0, 0)
        if rows > have[0] or columns + room > have[1]:  # a few sizes (powers of 2, 64s): reused
            wide = -(-(columns + room) // 64) * 64
            self._grow(max(_quantum(rows, 8), capacity, have[0]), max(wide, have[1]))
        if rows > self.rows_clean:
            self.kv[:, self.rows_clean : rows, :, : self.clean].zero_()
            self.rows_clean = rows
        if columns > self.clean:
            upto = min(self.kv.shape[3], columns + CLEAN_AHEAD)
            self.kv[:, : self.rows_clean, :, self.clean : upto].zero_()
            self.clean = upto

    def _grow(self, rows: int, columns: int) -> None:
        """A buffer of at least ``rows x columns`` (a spare, else new) holding the rows in use."""
        size = (2 * self.layers, rows, self.shape[0], columns, self.shape[1])
        fresh = _spare(size, self.like)
        fresh = self.like.new_empty(size) if fresh is None else fresh
        used = len(self.lens)
        if self.kv is not None:
            fresh[:, :used, :, : self.clean] = self.kv[:, :used, :, : self.clean]
        self.kv, self.rows_clean = fresh, used

    def release(self) -> None:
        """Hand the buffer to the next rollout (at most ``SPARE_BYTES`` are kept)."""
        if self.kv is not None:
            _SPARE.insert(0, self.kv)
            held = 0
            for i, t in enumerate(_SPARE):
                held += t.numel() * t.element_size()
                if held > SPARE_BYTES:
                    del _SPARE[i:]
                    break
        self.kv, self.lens, self.clean, self.rows_clean = None, [], 0, 0

    def flat(self, slots: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """Flat row indices ``(2 L, N, H_kv)`` of the keys and values at ``(slots[i], cols[i])``
        in every layer, in ``kv`` viewed as ``(2 L R' H_kv C, D)``."""
        n, rows, heads, cap, _ = self.kv.shape
        ahead = torch.arange(heads, device=slots.device) * cap  # (H_kv,)
        per = torch.arange(n, device=slots.device)[:, None, None] * (rows * heads * cap)
        return per + ((slots * heads * cap + cols)[:, None] + ahead)  # (2 L, N, H_kv)

    def move(self, copies: list[Copy]) -> None:
        """Copy ``n`` keys from ``(from slot, from column)`` to ``(to slot, to column)`` for every
        copy, in every layer, as slice copies: all sources are read before anything is written
        (a source is copied aside first only where a copy writes its slot)."""
        kv, written = self.kv, {c[0] for c in copies}
        parts = [kv[:, f, :, a : a + n] for _, _, f, a, n in copies]  # (2 L, H_kv, n, D) views
        parts = [p.clone() if c[2] in written else p for c, p in zip(copies, parts)]
        for (to, at, _, _, n), part in zip(copies, parts):
            kv[:, to, :, at : at + n] = part

    def write(self, rows: list[int], at: list[int], new: torch.Tensor) -> None:
        """Write ``new`` ``(2 L, G, H_kv, q, D)`` into ``rows`` from column ``at[g]`` on."""
        dev, q, d = self.like.device, new.shape[3], self.shape[1]
        g = torch.tensor(rows, dtype=torch.long, device=dev).repeat_interleave(q)  # (G q,)
        start = torch.tensor(at, dtype=torch.long, device=dev)[:, None]  # (G, 1)
        dst = self.flat(g, (start + torch.arange(q, device=dev)).reshape(-1)).reshape(-1)
        self.kv.view(-1, d).index_copy_(0, dst, new.transpose(2, 3).reshape(-1, d))

    def regroup(self, plan: Sequence[Sequence[tuple[int, int, int]]]) -> list[int]:
        """New row ``i`` concatenates segments ``(row, a, b)`` (keys ``a:b`` of an old row); returns
        its slot. A new row whose first segment is a whole old row (the first
        such) keeps that row's slot if it is among the first ``len(plan)``; the others take the
        free slots; only the keys that move are copied."""
        n, kept = len(plan), {}
        for i, segments in enumerate(plan):
            r, a, _ = segments[0] if segments else (n, 1, 0)  # no keys: nothing to keep
            if a == 0 and r < n and r not in kept:
                kept[r] = i
        slots = [-1] * n
        for r, i in kept.items():
            slots[i] = r
        free = iter(sorted(set(range(n)) - set(kept)))
        slots = [s if s >= 0 else next(free) for s in slots]
        copies, lens = _copies(plan, slots, kept)
        self.reserve(n, max(lens, default=0) + 1)
        self.move(copies)
        self.lens = [lens[i] for i in sorted(range(n), key=slots.__getitem__)]
        return slots


def _copies(
    plan: Sequence[Sequence[tuple[int, int, int]]], slots: list[int], kept: dict[int, int]
) -> tuple[list[Copy], list[int]]:
    """``(copies, lengths)``: a ``Copy`` for every segment that is not already in place, and
    every new row's number of keys."""
    copies, lens = [], []
    for i, segments in enumerate(plan):
        col = 0
        for j, (r, a, b) in enumerate(segments):
            if not (j == 0 and a == 0 and kept.get(r) == i):
                copies.append((slots[i], col, r, a, b - a))
            col += b - a
        lens.append(col)
    return copies, lens


def _quantum(n: int, least: int) -> int:
    """The power of 2 at or above ``n`` (at least ``least``).

    >>> _quantum(17, 8), _quantum(3, 8)
    (32, 8)
    """
    return max(least, 1 << max(n - 1, 0).bit_length())


def _spare(size: tuple[int, ...], like: torch.Tensor) -> torch.Tensor | None:
    """A kept buffer at least ``size`` and at most twice its rows and columns, with ``like``'s
    dtype and device, taken out of the spares; ``None`` if none fits."""
    for i, t in enumerate(_SPARE):
        fits = t.shape[::2] == size[::2] and t.dtype == like.dtype and t.device == like.device
        if fits and all(n <= have <= 2 * n for n, have in zip(size[1::2], t.shape[1::2])):
            return _SPARE.pop(i)
    return None


class RowStreams:
    """Rows with packed keys (see the module docstring): the API of ``kvcache.Streams``
    (prefill, step, extend, extend_rows, regroup, n_real, pos, valid, fed) plus ``release``;
    ``regroup`` returns the slot of every new row.

    >>> from transformers import Qwen3Config, Qwen3ForCausalLM
    >>> _ = torch.manual_seed(0)
    >>> model = Qwen3ForCausalLM(Qwen3Config(vocab_size=16, hidden_size=8, head_dim=4,
    ...     intermediate_size=8, num_hidden_layers=1, num_attention_heads=2,
    ...     num_key_value_heads=1)).eval()
    >>> st = RowStreams(model)
    >>> _ = st.prefill([[1, 2], [3]], pad=0)
    >>> out = st.step(torch.tensor([4, 6]), torch.tensor([True, True]))
    >>> full = model(torch.tensor([[1, 2, 4]])).logits[0, -1]  # row 0, decoded in one go
    >>> torch.allclose(out[0], full, atol=1e-5), st.pos.tolist(), st.lens
    (True, [3, 2], [3, 2])
    >>> st.regroup([[(1, 0, 2)], [(0, 0, 3)], [(0, 0, 3)]], [2, 3, 3])  # row 0 forks, moves
    [1, 0, 2]
    >>> st.lens  # by slot: old row 0 (3 keys) stays, old row 1 moves up, the fork's copy
    [3, 2, 3]
    """

    def __init__(self, model: Any, columns: int = 64, fan: int = 1):
        self.model, self.fed, self.columns = model, 0, columns  # columns: a row's room to grow
        self.fan = fan  # rows a prompt may come to (k paths): the buffer's rows, up front
        self.lean = decode.LeanWeights(model)
        config = model.config
        shape = (config.num_key_value_heads, config.head_dim)
        like = model.model.embed_tokens.weight
        self.buf = _Buffer(config.num_hidden_layers, shape, like)  # the rows' own keys
        self.bases = _Buffer(config.num_hidden_layers, shape, like)  # shared prefixes
        self.base_of: list[int] = []  # each row's base (by slot)
        self.groups: decode.Bases | None = None  # the step's view of the bases (per regroup)
        self.shared = True  # False: no prompt is shared and no row forks: every key is own
        self.pos = torch.zeros(0, dtype=torch.long, device=model.device)  # (R,) next positions

    @property
    def lens(self) -> list[int]:
        """Real keys per row (by slot): its base's and its own."""
        return [self.bases.lens[b] + n for b, n in zip(self.base_of, self.buf.lens)]

    @property
    def valid(self) -> torch.Tensor:
        """``(R, T)``: True where a column holds a real key of the row (the ``Streams`` view)."""
        lens = torch.tensor(self.lens, dtype=torch.long, device=self.pos.device)  # (R,)
        return torch.arange(max(self.lens, default=0), device=lens.device) < lens[:, None]

    def n_real(self, row: int) -> int:
        return self.bases.lens[self.base_of[row]] + self.buf.lens[row]

    def prefill(self, prompts: Sequence[Sequence[int]], pad: int) -> torch.Tensor:
        """One row per prompt (each distinct prompt run once, by the model's own forward, its
        keys the base of its rows); returns each row's last logits ``(R, V)``."""
        distinct = list(dict.fromkeys(tuple(p) for p in prompts))
        part = Streams(self.model)
        logits = part.prefill(distinct, pad)  # (U, V)
        where = {p: i for i, p in enumerate(distinct)}
        self.release()
        wide = self.fan >= SHARE_FAN or (self.fan == 1 and len(distinct) < len(prompts))
        self.shared = wide and len(prompts) * self.fan >= SHARE_ROWS  # else: one part, no base
        self.base_of = [where[tuple(p)] if self.shared else 0 for p in prompts]
        pick = torch.tensor([where[tuple(p)] for p in prompts], device=self.pos.device)  # (n,)
        width, room, n = part.valid.shape[1], self.columns, len(prompts)
        layers = part.cache.layers
        new = torch.stack([x.keys for x in layers] + [x.values for x in layers])  # (2 L, U, ...)
        if self.shared:
            self.buf.reserve(n, 0, room=room, capacity=n * self.fan)
            self.buf.lens = [0] * n
            self.bases.reserve(len(distinct), width, room=room)
            self.bases.kv[:, : len(distinct), :, :width] = new  # (2 L, U, H_kv, width, D)
            self.bases.lens = [len(p) for p in distinct]
        else:
            self.buf.reserve(n, width, room=room, capacity=n * self.fan)
            self.buf.kv[:, :n, :, :width] = new[:, pick]  # (2 L, R, H_kv, width, D)
            self.buf.lens, self.bases.lens = [len(p) for p in prompts], [0]
        self.pos, self.fed, self.groups = part.pos[pick], self.fed + part.fed, None
        return logits[pick]

    def release(self) -> None:
        """Hand the memory to the next rollout; no row is left."""
        self.bases.release()
        self.buf.release()
        self.pos, self.base_of, self.groups = self.pos[:0], [], None

    # -- decoding -------------------------------------------------------------------------
    def step(self, tokens: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
        """Feed one token per row (``live`` False: the row idles, nothing is kept); returns the
        logits ``(R, V)``. ``tokens`` ``(R, q)``: ``q`` tokens per live row in one forward
        (causally, as ``q`` steps would), the logits ``(R, q, V)``; ``unstep`` takes back the last
        ones."""
        q = 1 if tokens.dim() == 1 else tokens.shape[1]
        alive, dev = live.tolist(), self.pos.device
        ends = [n + a * q for n, a in zip(self.buf.lens, alive)]
        width = max(ends)
        self.buf.reserve(len(ends), width + q)  # an idle row writes (and drops) at its length
        if self.groups is None and self.shared:
            used = max(self.base_of) + 1
            lens = self.bases.lens[:used]
            self.bases.reserve(used, max(lens))
            heads, groups = self.lean.kv_heads, self.lean.heads // self.lean.kv_heads
            self.groups = decode.Bases(self.bases.kv, lens, self.base_of, heads, groups)
        at = torch.tensor(self.buf.lens, dtype=torch.long, device=dev)  # (R,)
        upto = torch.tensor(ends, dtype=torch.long, device=dev)[:, None]  # (R, 1)
        pos = self.pos
        if q > 1:  # token j of a live row sees its columns up to its own; an idle row, its own
            upto = at[:, None] + live.long()[:, None] * torch.arange(1, q + 1, device=dev)  # (R, q)
            upto, pos = upto[..., None], pos[:, None] + torch.arange(q, device=dev)  # (R, q, 1)
        mask = torch.arange(width, device=dev) < upto  # (R, W) | (R, q, W)
        kv = self.buf.kv
        logits = decode.row_step(self.lean, tokens, pos, kv, at, mask, self.groups)
        self.buf.lens = ends
        added = live.long() if q == 1 else live.long() * q  # (R,)
        self.pos, self.fed = self.pos + added, self.fed + q * sum(alive)
        return logits

    def unstep(self, live: torch.Tensor, n: int) -> None:
        """Take back the last ``n`` tokens of every ``live`` row (fed by ``step``, by a forward
        that ran ahead of the engine's decisions): their keys are left behind, unread."""
        alive = live.tolist()
        self.buf.lens = [m - n * a for m, a in zip(self.buf.lens, alive)]
        self.pos, self.fed = self.pos - n * live.long(), self.fed - n * sum(alive)

    def extend(self, ids: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
        """``q`` tokens on every row at once, causally (``live`` False: not kept; the live
        tokens of a row come first); returns the logits ``(R, q, V)``."""
        return self.extend_rows(range(len(self.pos)), ids, live)

    def extend_rows(
        self, rows: Sequence[int], ids: torch.Tensor, live: torch.Tensor
    ) -> torch.Tensor:
        """``extend`` on ``rows`` only (``ids``, ``live``: ``(G, q)``), by the model's own forward
        on a copy of their keys (base and own); the new keys go to the end of each row's own."""
        dev, rows = self.pos.device, list(rows)
        idx = torch.tensor(rows, dtype=torch.long, device=dev)  # (G,)
        lens = [self.n_real(r) for r in rows]
        width, q, n = max(lens), ids.shape[1], self.buf.layers
        part = Streams(self.model)
        mine = self.gather(rows, width)  # (2 L, G, H_kv, width, D)
        part.cache, part.pos = (
            new_cache(True, [(mine[i], mine[n + i]) for i in range(n)]),
            self.pos[idx],
        )
        lengths = torch.tensor(lens, dtype=torch.long, device=dev)[:, None]  # (G, 1)
        part.valid = torch.arange(width, device=dev)[None, :] < lengths  # (G, width)
        logits = part.extend(ids, live)  # (G, q, V)
        own = [self.buf.lens[r] for r in rows]
        self.buf.reserve(len(self.buf.lens), max(own) + q + 1)
        layers = part.cache.layers
        new = torch.stack([x.keys for x in layers] + [x.values for x in layers])[..., width:, :]
        self.buf.write(rows, own, new)  # (2 L, G, H_kv, q, D), at each row's own end
        for r, added in zip(rows, live.long().sum(dim=1).tolist()):
            self.buf.lens[r] += added
        self.pos[idx], self.fed = part.pos, self.fed + part.fed
        return logits

    def gather(self, rows: list[int], width: int) -> torch.Tensor:
        """The keys of ``rows``, base then own, packed in a new ``(2 L, G, H_kv, width, D)``."""
        kv = self.buf.kv
        out = kv.new_zeros(kv.shape[0], len(rows), kv.shape[2], width, kv.shape[4])
        for g, r in enumerate(rows):
            b, n = self.base_of[r], self.bases.lens[self.base_of[r]]
            if n:
                out[:, g, :, :n] = self.bases.kv[:, b, :, :n]
            out[:, g, :, n : n + self.buf.lens[r]] = kv[:, r, :, : self.buf.lens[r]]
        return out

    def regroup(
        self, plan: Sequence[Sequence[tuple[int, int, int]]], pos: Sequence[int]
    ) -> list[int]:
        """New row ``i`` concatenates segments ``(row, a, b)`` (keys ``a:b`` of an old row);
        returns the slot of every new row. A row that goes on (one whole old row, continued by
        no other) keeps its base and its own keys (``_Buffer.regroup``: only what moves is
        copied); any other (a fork's paths, a merge) gets a new base, its keys copied once
        (one copy for the rows of one fork), and no own keys."""
        if not self.shared:  # no bases: the segments are the rows' own keys
            return self.place(self.buf.regroup(plan), [0] * len(plan), pos)
        total = self.lens
        whole = [len(p) == 1 and p[0][1] == 0 and p[0][2] == total[p[0][0]] for p in plan]
        heirs = Counter(p[0][0] for p, w in zip(plan, whole) if w)
        goes_on = [w and heirs[p[0][0]] == 1 for p, w in zip(plan, whole)]
        fresh = list(dict.fromkeys(tuple(p) for p, g in zip(plan, goes_on) if not g))
        taken = set(self.base_of)
        free = iter(b for b in range(len(taken) + len(fresh)) if b not in taken)
        new_base = {key: next(free) for key in fresh}
        self.rebase(new_base)
        own = [[(p[0][0], 0, self.buf.lens[p[0][0]])] if g else [] for p, g in zip(plan, goes_on)]
        bases = [self.base_of[p[0][0]] if g else new_base[tuple(p)] for p, g in zip(plan, goes_on)]
        slots = self.place(self.buf.regroup(own), bases, pos)
        used = set(self.base_of)
        self.bases.lens = [n if b in used else 0 for b, n in enumerate(self.bases.lens)]
        return slots

    def place(self, slots: list[int], bases: list[int], pos: Sequence[int]) -> list[int]:
        """Put the new rows' bases and next positions in their slots; returns the slots."""
        self.base_of = [bases[i] for i in sorted(range(len(slots)), key=slots.__getitem__)]
        self.groups = None
        new_pos = torch.tensor(list(pos), dtype=torch.long, device=self.pos.device)  # (R',)
        self.pos = torch.empty_like(new_pos)
        self.pos[torch.tensor(slots, dtype=torch.long, device=new_pos.device)] = new_pos
        return slots

    def rebase(self, new_base: dict[tuple, int]) -> None:
        """Copy each plan's keys (segments of old rows, base then own) into its new base."""
        lens = {b: sum(e - a for _, a, e in key) for key, b in new_base.items()}
        rows = max([len(self.bases.lens), *(b + 1 for b in lens)])
        self.bases.reserve(rows, max(lens.values(), default=0) + 1)
        self.bases.lens += [0] * (rows - len(self.bases.lens))
        dst, kv = self.bases.kv, self.buf.kv
        for key, b in new_base.items():
            col = 0
            for r, a, e in key:
                base, n = self.base_of[r], self.bases.lens[self.base_of[r]]
                if a < n:
                    dst[:, b, :, col : col + min(e, n) - a] = dst[:, base, :, a : min(e, n)]
                    col += min(e, n) - a
                if e > n:
                    m = e - max(a, n)
                    dst[:, b, :, col : col + m] = kv[:, r, :, max(a, n) - n : e - n]
                    col += m
            self.bases.lens[b] = lens[b]

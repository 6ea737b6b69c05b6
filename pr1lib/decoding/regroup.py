"""The rollout engine's cache bookkeeping: forks, merges, finished rows and re-reads, applied to
the rows' keys (``pr1lib.decoding.engine`` makes the decisions, this part moves the rows).

The engine keeps its rows in one *logical* order, the order in which they draw their random
numbers (the first engine's order: a fork's rows side by side, the last rows moved into the
places of finished ones). Each row also has a *slot*, its row in the cache: for
``pr1lib.decoding.kvcache.Streams`` the two orders agree; ``pr1lib.decoding.rowcache.RowStreams``
keeps a row in its slot for as long as it lives and says where new rows go, so that only what moves
is copied while the logical order, and so every sample, stays what the first engine would draw.

A regroup builds, per new row, a *plan*: segments ``(old row, a, b)`` of the old rows' real keys
(a fork repeats a row, a merge concatenates the prefix-and-path-1 row with the other paths'
keys, a finished row is left out). In ``reread`` mode the completed groups first re-read paths
2..k onto their path-1 row (``reread``, ``feed_rows``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from pr1lib.decoding.clock import OFF

# Re-read paths are fed this many tokens per forward: logits for the re-reading rows are
# (G, chunk, V).
REREAD_CHUNK = 64


@dataclass(eq=False)
class _Row:
    """Python bookkeeping of one cache row."""

    sample: int
    kind: str = "trunk"  # "trunk" | "summary" | "path"
    feed: int | None = None  # token to feed at the next step (None: the row idles)
    queue: list[int] = field(default_factory=list)  # forced tokens to feed after ``feed`` (a
    # summary's newline and <Summary>, a numbered path's header)
    fork_pending: bool = False  # it is feeding <Parallel>: fork at the next decision
    done: bool = False
    slot: int = 0  # its row in the cache
    in_plan: bool = False  # trunk rows: it is writing its plan line (width_temperature only)
    choice: str = ""  # its next token is a width choice of its plan (explore.next_choice)
    last: int = -1  # the token it wrote last (width_temperature only)
    # path rows only
    index: int = 0
    group: list["_Row"] = field(default_factory=list)
    cap: int = 0
    n_prefix: int = 0
    buf: Any = None  # the path's own Rollout
    closing: bool = False  # it is feeding </Path>
    waiting: bool = False  # </Path> fed: waiting for the siblings
    after_lp: float = 0.0  # log-prob of the next linearized token after its </Path>


class _Rows:
    """The engine's bookkeeping half (``pr1lib.decoding.engine.Engine`` inherits it): rows, slots,
    regroups, re-reads.
    It expects ``rows``, ``streams``, ``cfg``, ``pad``, ``tags``, ``merge`` from the engine."""

    rows: list[_Row]
    clock: Any = OFF  # pr1lib.decoding.clock: the engine's

    def place(self, slots: list[int] | None = None) -> None:
        """Give the rows (logical order) their slots; ``None``: slot = place."""
        for i, row in enumerate(self.rows):
            row.slot = i if slots is None else slots[i]
        order = [r.slot for r in self.rows]
        self.in_order = order == list(range(len(order)))
        self.perm = torch.tensor(order, dtype=torch.long, device=self.streams.pos.device)  # (R,)

    def logical(self, logits: torch.Tensor) -> torch.Tensor:
        """Logits ``(R, V)`` by slot -> in the rows' logical order."""
        return logits if self.in_order else logits[self.perm]

    def advance(self) -> list[torch.Tensor]:
        """One decoding step: every row feeds its token (or idles), and with it the forced tokens
        its next decisions will take where every feeding row has some (``ahead``: one forward
        for a block's path headers); the logits ``(R, V)`` of each token fed, logical order.
        ``self.course`` keeps the tokens the rows are expected to feed after each decision."""
        q = self.ahead()
        self.course = [
            [r.queue[j - 1] if r.feed is not None else None for r in self.rows] for j in range(1, q)
        ]
        feed, live = [self.pad] * len(self.rows), [False] * len(self.rows)
        for row in self.rows:
            if row.feed is not None:
                feed[row.slot], live[row.slot] = row.feed, True
        if q > 1:  # (R, q): each row's token and the forced ones after it
            feed = [[self.pad] * q for _ in self.rows]
            for row in self.rows:
                if row.feed is not None:
                    feed[row.slot] = [row.feed, *row.queue[: q - 1]]
        dev = self.streams.pos.device
        kind = self.clock.on and (
            "step_k" if any(r.kind == "path" for r in self.rows) else "step_1"
        )
        with self.clock.part(kind):
            feed_t = torch.tensor(feed, device=dev)  # (R,) | (R, q) by slot
            self.live = torch.tensor(live, device=dev)  # (R,) by slot
            logits = self.streams.step(feed_t, self.live)
        self.steps += 1
        return list(self.logical(logits).unbind(1)) if q > 1 else [self.logical(logits)]

    def ahead(self) -> int:
        """How many tokens the next forward feeds every feeding row: 1, or (a cache with
        ``unstep``) 1 + the forced tokens that all of them queue for their next decisions (a path
        within its cap, a summary's newline and ``<Summary>``). The decisions still come one at a
        time, each with its own random draws; one that leaves the course takes the rest back."""
        if not hasattr(self.streams, "unstep") or not all(
            r.queue or r.feed is None for r in self.rows
        ):
            return 1  # most steps: the first row already has nothing queued
        return min((_forced_run(r) for r in self.rows if r.feed is not None), default=1)

    def on_course(self, j: int) -> bool:
        """After the decisions on the ``j``-th token of a forward: does every row feed what the
        forward fed next (and nothing forks, merges or ends)?"""
        if any(r.feed != t for r, t in zip(self.rows, self.course[j - 1])):
            return False
        return not any(map(self.changes, self.rows))

    @staticmethod
    def changes(row: _Row) -> bool:
        """Does the row end, fork, or complete its group of paths?"""
        if row.done:
            return True
        return all(r.waiting for r in row.group) if row.kind == "path" else bool(row.group)

    def regroup(self) -> None:
        """Apply forks, merges and finished rows to the cache (only when something changed)."""
        if not any(map(self.changes, self.rows)):
            return  # nothing forks, merges or ends this step
        with self.clock.part(self.clock.on and self.regroup_kind()):
            self._regroup()

    def regroup_kind(self) -> str:
        """The clock's name for this regroup: ``merge`` if a group completes, else ``fork`` if a
        row forks, else ``drop``."""
        if any(r.kind == "path" and all(x.waiting for x in r.group) for r in self.rows):
            return "merge"
        return "fork" if any(r.group and r.kind != "path" for r in self.rows) else "drop"

    def _regroup(self) -> None:
        """``regroup`` once something changes."""
        if self.cfg.mode == "reread":
            self.reread()  # before reading the rows' lengths: it adds keys to path 1's rows
        slot = [r.slot for r in self.rows]
        pos, real = self.streams.pos.tolist(), self.streams.valid.sum(dim=1).tolist()
        old_pos, real = [pos[s] for s in slot], [real[s] for s in slot]  # logical order
        entries = self.plans(real, old_pos)
        keep = _from_tail([e for e in entries if not e[0].done])
        self.rows = [r for r, _, _ in keep]
        if self.rows:
            plan = [[(slot[i], a, b) for i, a, b in p] for _, p, _ in keep]  # old rows -> slots
            self.place(self.streams.regroup(plan, [q for _, _, q in keep]))

    def plans(self, real: list[int], old_pos: list[int]) -> list[tuple[_Row, list, int]]:
        """``(new row, segments over the old rows' logical indices, next position)`` for every
        row that goes on (merged groups become their summary row, forks their k path rows)."""
        out = []
        where = {id(r): i for i, r in enumerate(self.rows)}
        for i, row in enumerate(self.rows):
            n = real[i]
            merging = row.kind == "path" and all(r.waiting for r in row.group)
            if row.done or (merging and row is not row.group[0]):
                continue  # dropped, or merged into the group's first row
            if merging:
                segments, next_pos = self.merge_plan(row.group, where, real, old_pos)
                out.append((self.merge(row.group), segments, next_pos))
            elif row.group and row.kind != "path":  # a fork: k copies of the row (a hidden plan
                # left out: its paths start where it did)
                out += [(r, [(i, 0, r.n_prefix)], old_pos[i] - n + r.n_prefix) for r in row.group]
            else:
                out.append((row, [(i, 0, n)], old_pos[i]))
        return out

    def merge_plan(
        self, group: list[_Row], where: dict[int, int], real: list[int], old_pos: list[int]
    ) -> tuple[list[tuple[int, int, int]], int]:
        """The summary row's cache segments and next position (logical indices)."""
        idx = [where[id(r)] for r in group]
        first = [(idx[0], 0, real[idx[0]])]  # the prefix and path 1 (and, re-read, paths 2..k)
        if self.cfg.mode == "reread":
            return first, old_pos[idx[0]]  # sequential: right after the re-read paths
        rest = [(j, r.n_prefix, real[j]) for j, r in zip(idx[1:], group[1:])]  # path keys only
        return first + rest, max(old_pos[j] for j in idx)  # max path end + 1

    # -- reread mode: the seen summary ----------------------------------------------------
    def reread(self) -> None:
        """Feed paths 2..k of every completed group onto its path 1 row (which holds the prefix
        and path 1), causally at sequential positions, and record their causal log-probs: the
        seen trainer's view. The paths were *sampled* apart; only the summary reads them so."""
        groups = [
            r.group
            for r in self.rows
            if r.kind == "path" and r is r.group[0] and all(x.waiting for x in r.group)
        ]
        if not groups:
            return
        rows = [g[0].slot for g in groups]
        seqs = [sum((r.buf.completion_ids for r in g[1:]), []) for g in groups]
        for g, lp in zip(groups, self.feed_rows(rows, seqs, self.tags.end_parallel)):
            at = 0
            for r in g[1:]:  # lp[c] is the log-prob of the token after re-read token c
                n = len(r.buf.completion_ids)
                r.buf.logprobs[1:] = lp[at : at + n - 1]  # its <Path>'s: the previous after_lp
                r.after_lp = lp[at + n - 1]  # the next <Path>, or </Parallel>
                at += n

    def feed_rows(self, rows: list[int], seqs: list[list[int]], last: int) -> list[list[float]]:
        """Feed ``seqs[g]`` on slot ``rows[g]`` while the other rows idle, ``REREAD_CHUNK``
        columns per forward; returns each fed token's log-prob of the token after it (``last``
        after the last one), at the rollout temperature like every recorded log-prob."""
        dev, width = self.streams.pos.device, max(len(q) for q in seqs)
        ids = torch.full((len(self.rows), width), self.pad, device=dev)  # (R, W) by slot
        target = torch.full((len(rows), width), self.pad, device=dev)  # (G, W)
        for g, (i, q) in enumerate(zip(rows, seqs)):
            ids[i, : len(q)] = torch.tensor(q, device=dev)
            target[g, : len(q)] = torch.tensor(q[1:] + [last], device=dev)
        lens = torch.zeros(len(self.rows), dtype=torch.long, device=dev)  # (R,)
        lens[rows] = torch.tensor([len(q) for q in seqs], device=dev)
        live = torch.arange(width, device=dev)[None, :] < lens[:, None]  # (R, W)
        temp = self.cfg.temperature if self.cfg.temperature > 0 else 1.0
        out = []
        for a in range(0, width, REREAD_CHUNK):
            b = a + REREAD_CHUNK
            if self.cfg.fast_cache:  # only these rows run; the others get holes for free
                logits = self.streams.extend_rows(rows, ids[rows, a:b], live[rows, a:b])
            else:
                logits = self.streams.extend(ids[:, a:b], live[:, a:b])[rows]  # (G, q, V)
            logp = torch.log_softmax(logits.float() / temp, dim=-1)  # (G, q, V)
            out.append(logp.gather(-1, target[:, a:b, None]).squeeze(-1))  # (G, q)
        self.reread_tokens += int(lens.sum())
        return [lp[: len(q)] for lp, q in zip(torch.cat(out, dim=1).tolist(), seqs)]


def _forced_run(row: _Row) -> int:
    """1 + the queued tokens a feeding row's next decisions will force (a path's cap may close it
    first; a closing path idles next).

    >>> _forced_run(_Row(0, kind="summary", queue=[5, 6])), _forced_run(_Row(0))
    (3, 1)
    """
    if row.kind != "path":
        return 1 + (0 if row.fork_pending else len(row.queue))
    if row.closing:
        return 1
    return 1 + max(0, min(len(row.queue), row.cap - 1 - len(row.buf.completion_ids)))


def _from_tail(keep: list[tuple[_Row, list, int]]) -> list[tuple[_Row, list, int]]:
    """If the regroup only drops rows (each kept row continues one old row, none twice), the
    survivors keep their places and the last rows fill the freed ones, so that the cache moves
    those rows alone (``Streams.regroup``); any other regroup keeps its order.

    >>> keep = [("a", [(0, 0, 5)], 5), ("c", [(2, 0, 5)], 5), ("d", [(3, 0, 5)], 5)]
    >>> [row for row, _, _ in _from_tail(keep)]  # row 1 ended: the last row takes its place
    ['a', 'd', 'c']
    """
    old = [p[0][0] if len(p) == 1 else -1 for _, p, _ in keep]
    if -1 in old or len(set(old)) < len(old):
        return keep
    at, tail = dict(zip(old, keep)), iter(k for k, o in zip(keep, old) if o >= len(keep))
    return [at[j] if j in at else next(tail) for j in range(len(keep))]

"""The decision loop of ``pr1lib.rollout``: one shared cache, the rules, forks, merges and drops.

``Engine(model, tokenizer, config, generator).run(prompt_ids)`` returns one ``Rollout`` per prompt;
``pr1lib.rollout.generate`` is the public entry and describes the modes.

Rules (all deterministic):

- **forced tokens** (``forced = 1``, ``env_mask = 0``): ``<Path>`` at a fork, ``</Parallel>``,
  the ``\\n`` token(s), ``<Summary>``, and closers the engine writes: ``</Path>`` when a path
  samples eos or reaches its cap, ``</Summary>`` when a summary samples eos (eos is *replaced*).
- **log-probs**: every completion token, forced or not, gets the policy's log-prob of that token
  in the linearized sequence as the variant's trainer scores it (softmax of logits / temperature,
  before top-p and the structural bans), so ``rollout_logprobs(..., mode)`` recomputes them:
  the unseen mask for ``forked``, plain causal for ``seen`` and ``reread``. In ``reread`` mode
  the tokens of paths 2..k (and the token after each ``</Path>``) are *sampled* without the
  earlier paths but *recorded* with them (the re-read's logits), as verl recomputes old
  log-probs with the actor.
- **block limit**: ``<Parallel>`` is masked out inside paths and summaries (no nesting) and once
  a sample has ``max_blocks`` blocks. ``at_block_limit="stop"`` (the default, the paper's):
  the sample ends right after the ``max_blocks``-th block's ``</Summary>`` (in ``seen`` mode:
  the first ``</Summary>`` the model writes after its ``max_blocks``-th ``<Parallel>``), with
  ``finish_reason="block_limit"`` and no final answer. ``"mask"``: decoding goes on.
- **budgets**: a path has at most ``max_path_length`` tokens (and at most an equal share of the
  remaining completion budget), ``</Path>`` included and forced at the cap; the completion is cut
  hard at ``max_completion_length`` tokens (``finish_reason="length"``), possibly inside a path or
  summary, which ``pr1lib.structure`` parses as a truncated block.
- Other tags sampled out of place are ordinary tokens (the structure parser agrees).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from pr1lib.config import ROLLOUT_MODES, RolloutConfig
from pr1lib.format import path_header
from pr1lib.kvcache import Streams
from pr1lib.structure import TagIds, tag_ids

BLOCK_LIMITS = ("stop", "mask")  # RolloutConfig.at_block_limit: the paper's stop | go on, masked
# Re-read paths are fed this many tokens per forward: logits for all rows are (R, chunk, V).
REREAD_CHUNK = 64


@dataclass
class Rollout:
    """One sampled completion, linearized: trunk, ``<Parallel>``, path 1, path 2, …, summary, …"""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    forced: list[int] = field(default_factory=list)  # 1 = inserted by the engine, 0 = sampled
    text: str = ""  # decoded with the tags
    finish_reason: str = ""  # "eos" | "length" | "block_limit"
    blocks: int = 0
    path_lengths: list[list[int]] = field(default_factory=list)  # per block, tokens per path

    @property
    def env_mask(self) -> list[int]:
        """TRL's ``env_mask``: 1 for sampled tokens (trained), 0 for forced ones."""
        return [1 - f for f in self.forced]

    def add(self, token: int, logprob: float, forced: int) -> None:
        self.completion_ids.append(int(token))
        self.logprobs.append(float(logprob))
        self.forced.append(int(forced))


def sample_tokens(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """One token per row from ``(R, V)`` logits: greedy at ``temperature == 0``, else top-p, by
    inverting each row's CDF at one uniform draw (``torch.multinomial`` draws V numbers a row:
    about 15x slower for the tiny model's 512 tokens, the same distribution).

    >>> sample_tokens(torch.tensor([[0.0, 5.0, 1.0]]), temperature=0).tolist()
    [1]
    >>> sample_tokens(torch.tensor([[0.0, 9.0, 1.0]]), top_p=0.5).tolist()
    [1]
    """
    if temperature == 0:
        return logits.argmax(dim=-1)  # (R,)
    probs = torch.softmax(logits.float() / temperature, dim=-1)  # (R, V)
    if top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)  # (R, V)
        drop = sorted_p.cumsum(dim=-1) - sorted_p > top_p  # (R, V) keeps at least the top token
        probs = probs.scatter(-1, order, sorted_p.masked_fill(drop, 0.0))  # (R, V)
    cdf = probs.double().cumsum(dim=-1)  # (R, V) a zero-probability token adds no width
    u = torch.rand(len(cdf), 1, generator=generator, device=cdf.device, dtype=cdf.dtype)  # (R, 1)
    picked = torch.searchsorted(cdf, u * cdf[:, -1:], right=True)  # (R, 1) first cdf above u
    return picked.squeeze(1).clamp(max=cdf.shape[-1] - 1)  # (R,)


@dataclass(eq=False)
class _Row:
    """Python bookkeeping of one cache row."""

    sample: int
    kind: str = "trunk"  # "trunk" | "summary" | "path"
    feed: int | None = None  # token to feed at the next step (None: the row idles)
    queue: list[int] = field(default_factory=list)  # forced tokens to feed after ``feed``
    fork_pending: bool = False  # it is feeding <Parallel>: fork at the next decision
    done: bool = False
    # path rows only
    index: int = 0
    group: list["_Row"] = field(default_factory=list)
    cap: int = 0
    n_prefix: int = 0
    buf: Rollout | None = None
    closing: bool = False  # it is feeding </Path>
    waiting: bool = False  # </Path> fed: waiting for the siblings
    after_lp: float = 0.0  # log-prob of the next linearized token after its </Path>


class Engine:
    """The decision loop over ``Streams``: sample, apply the rules, fork, merge, drop."""

    def __init__(
        self, model: Any, tokenizer: Any, config: RolloutConfig, generator: torch.Generator | None
    ):
        if config.mode not in ROLLOUT_MODES:
            raise ValueError(f"mode must be one of {ROLLOUT_MODES}, got {config.mode!r}")
        if config.at_block_limit not in BLOCK_LIMITS:
            raise ValueError(
                f"at_block_limit must be one of {BLOCK_LIMITS}, got {config.at_block_limit!r}"
            )
        self.model, self.tok, self.cfg, self.gen = model, tokenizer, config, generator
        self.tags: TagIds = tag_ids(tokenizer)
        self.eos = tokenizer.eos_token_id
        self.pad = self.tags.pad if self.tags.pad is not None else self.eos
        self.newline = tokenizer.encode("\n", add_special_tokens=False)
        # numbered paths: the tokens path j opens with, forced after its <Path>
        self.headers = [
            tokenizer.encode(path_header(j), add_special_tokens=False)
            if config.path_headers
            else []
            for j in range(config.num_paths)
        ]
        self.streams = Streams(model, config.fast_cache)
        self.reread_tokens = 0  # path tokens run through the model a second time (reread mode)

    # -- the loop ---------------------------------------------------------------------------
    @torch.no_grad()
    def run(self, prompts: Sequence[Sequence[int]]) -> list[Rollout]:
        self.samples = [Rollout(list(p)) for p in prompts]
        self.rows = [_Row(sample=i) for i in range(len(prompts))]
        logits = self.streams.prefill(prompts, self.pad)  # (R, V)
        self.steps = 0
        while True:
            self.decide(logits)
            self.regroup()
            if not self.rows:
                break
            feed = [self.pad if r.feed is None else r.feed for r in self.rows]
            dev = logits.device
            live = torch.tensor([r.feed is not None for r in self.rows], device=dev)  # (R,)
            logits = self.streams.step(torch.tensor(feed, device=dev), live)  # (R, V)
            self.steps += 1
        for s in self.samples:
            self.finalize(s)
        return self.samples

    def decide(self, logits: torch.Tensor) -> None:
        """Choose every row's next token from its logits ``(R, V)`` and record it."""
        temp = self.cfg.temperature
        # (R, V)
        self.logp = torch.log_softmax(logits.float() / (temp if temp > 0 else 1.0), dim=-1)
        banned = logits.clone()  # (R, V)
        ban = torch.tensor([self.bans_parallel(r) for r in self.rows], device=logits.device)  # (R,)
        banned[ban, self.tags.parallel] = float("-inf")
        cand = sample_tokens(banned, temp, self.cfg.top_p, self.gen)  # (R,)
        if temp == 0 and self.cfg.distinct_greedy_paths:
            self.distinct_starts(banned, cand)
        cand_lp = self.logp.gather(1, cand[:, None]).squeeze(1).tolist()  # (R,)
        for i, (row, tok, lp) in enumerate(zip(self.rows, cand.tolist(), cand_lp)):
            if row.waiting:  # a finished path waiting for its siblings
                continue
            (self.path_step if row.kind == "path" else self.main_step)(i, row, tok, lp)

    def distinct_starts(self, logits: torch.Tensor, cand: torch.Tensor) -> None:
        """Greedy forked decoding: path j (j > 0) opens with the (j+1)-th most likely token that
        does not close it. Siblings share their context exactly: plain argmax makes k copies."""
        for i, row in enumerate(self.rows):
            if (
                row.kind != "path"
                or row.index == 0
                or len(row.buf.completion_ids) != 1
                or row.closing
            ):
                continue
            # best first
            ranked = logits[i].topk(min(row.index + 3, logits.shape[-1])).indices.tolist()
            ranked = [t for t in ranked if t not in (self.tags.end_path, self.eos)]
            if len(ranked) > row.index:
                cand[i] = ranked[row.index]

    def lp(self, i: int, token: int) -> float:
        return float(self.logp[i, token])

    def bans_parallel(self, row: _Row) -> bool:
        return row.kind != "trunk" or self.samples[row.sample].blocks >= self.cfg.max_blocks

    # -- trunk and summary rows -------------------------------------------------------------
    def main_step(self, i: int, row: _Row, tok: int, lp: float) -> None:
        s = self.samples[row.sample]
        if row.fork_pending:
            return self.fork(i, row)
        if row.queue:
            tok, lp, forced = row.queue.pop(0), None, 1
        elif row.kind == "summary" and tok == self.eos:
            tok, lp, forced = self.tags.end_summary, None, 1  # eos inside a summary closes it
        else:
            forced = 0
        s.add(tok, self.lp(i, tok) if lp is None else lp, forced)
        row.feed = tok
        if row.kind == "summary" and tok == self.tags.end_summary and not row.queue:
            row.kind = "trunk"
        elif row.kind == "trunk" and tok == self.tags.parallel:
            s.blocks += 1
            row.fork_pending = self.cfg.mode != "seen"
        if self.at_block_limit(s, tok):
            self.finish(row, "block_limit")
        full = len(s.completion_ids) >= self.cfg.max_completion_length
        if (row.kind == "trunk" and tok == self.eos) or full:
            self.finish(row, "eos" if tok == self.eos and not forced else "length")

    def at_block_limit(self, s: Rollout, tok: int) -> bool:
        """The paper's stop: the ``max_blocks``-th block's ``</Summary>`` ends the sample. In
        ``seen`` mode it is the first ``</Summary>`` the model writes after that ``<Parallel>``."""
        limit = self.cfg.at_block_limit == "stop" and s.blocks >= self.cfg.max_blocks
        return limit and tok == self.tags.end_summary

    def finish(self, row: _Row, reason: str) -> None:
        s = self.samples[row.sample]
        s.finish_reason = s.finish_reason or reason
        for r in row.group or [row]:
            r.done, r.feed = True, None

    def fork(self, i: int, row: _Row) -> None:
        """Turn a row that has just fed ``<Parallel>`` into k path rows (done in ``regroup``)."""
        s, k = self.samples[row.sample], self.cfg.num_paths
        room = self.cfg.max_completion_length - len(s.completion_ids)
        cap = max(2, min(self.cfg.max_path_length, room // k))
        group = [
            _Row(
                sample=row.sample,
                kind="path",
                feed=self.tags.path,
                index=j,
                cap=cap,
                n_prefix=self.streams.n_real(i),
                buf=Rollout([]),
            )
            for j in range(k)
        ]
        for j, r in enumerate(group):
            r.group, r.queue = group, list(self.headers[j])
            r.buf.add(self.tags.path, self.lp(i, self.tags.path) if j == 0 else 0.0, 1)
        row.fork_pending, row.group = False, group

    # -- path rows --------------------------------------------------------------------------
    def path_step(self, i: int, row: _Row, tok: int, lp: float) -> None:
        if row.closing:  # its </Path> is in the cache: note the next linearized token's log-prob
            last = row.index == len(row.group) - 1
            row.after_lp = self.lp(i, self.tags.end_parallel if last else self.tags.path)
            row.closing, row.waiting, row.feed = False, True, None
            return
        forced = len(row.buf.completion_ids) >= row.cap - 1 or tok == self.eos
        if row.queue and not forced:  # its header, written by the engine
            tok, forced = row.queue.pop(0), True
            lp = self.lp(i, tok)
        elif forced:
            tok, lp = self.tags.end_path, self.lp(i, self.tags.end_path)
        row.buf.add(tok, lp, int(forced))
        row.feed, row.closing = tok, tok == self.tags.end_path

    def merge(self, group: list[_Row]) -> _Row:
        """Append the paths to the sample in order and make the summary row (cache: ``regroup``)."""
        s = self.samples[group[0].sample]
        for j, r in enumerate(group):
            lps = r.buf.logprobs if j == 0 else [group[j - 1].after_lp] + r.buf.logprobs[1:]
            for tok, lp, f in zip(r.buf.completion_ids, lps, r.buf.forced):
                s.add(tok, lp, f)
        s.path_lengths.append([len(r.buf.completion_ids) for r in group])
        s.add(self.tags.end_parallel, group[-1].after_lp, 1)
        row = _Row(
            sample=group[0].sample,
            kind="summary",
            feed=self.tags.end_parallel,
            queue=self.newline + [self.tags.summary],
        )
        if len(s.completion_ids) >= self.cfg.max_completion_length:
            self.finish(row, "length")
        return row

    # -- cache bookkeeping ------------------------------------------------------------------
    @staticmethod
    def changes(row: _Row) -> bool:
        """Does the row end, fork, or complete its group of paths?"""
        if row.done:
            return True
        return all(r.waiting for r in row.group) if row.kind == "path" else bool(row.group)

    def regroup(self) -> None:
        """Apply forks, merges and finished rows to ``Streams`` (only when something changed)."""
        if not any(map(self.changes, self.rows)):
            return  # nothing forks, merges or ends this step
        if self.cfg.mode == "reread":
            self.reread()  # before reading the rows' lengths: it adds keys to path 1's rows
        rows, plan, pos = [], [], []
        old_pos, real = self.streams.pos.tolist(), self.streams.valid.sum(dim=1).tolist()
        where = {id(r): i for i, r in enumerate(self.rows)}
        for i, row in enumerate(self.rows):
            n = real[i]
            merging = row.kind == "path" and all(r.waiting for r in row.group)
            if row.done or (merging and row is not row.group[0]):
                continue  # dropped, or merged into the group's first row
            if merging:
                rows.append(self.merge(row.group))
                segments, next_pos = self.merge_plan(row.group, where, real, old_pos)
                plan.append(segments), pos.append(next_pos)
            elif row.group and row.kind != "path":  # a fork: k copies of the row
                rows += row.group
                plan += [[(i, 0, n)]] * len(row.group)
                pos += [old_pos[i]] * len(row.group)
            else:
                rows.append(row), plan.append([(i, 0, n)]), pos.append(old_pos[i])
        keep = _from_tail([(r, p, q) for r, p, q in zip(rows, plan, pos) if not r.done])
        self.rows = [r for r, _, _ in keep]
        if self.rows:
            self.streams.regroup([p for _, p, _ in keep], [q for _, _, q in keep])

    def merge_plan(
        self, group: list[_Row], where: dict[int, int], real: list[int], old_pos: list[int]
    ) -> tuple[list[tuple[int, int, int]], int]:
        """The summary row's cache segments and next position, for ``Streams.regroup``."""
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
        rows = [self.rows.index(g[0]) for g in groups]
        seqs = [sum((r.buf.completion_ids for r in g[1:]), []) for g in groups]
        for g, lp in zip(groups, self.feed_rows(rows, seqs, self.tags.end_parallel)):
            at = 0
            for r in g[1:]:  # lp[c] is the log-prob of the token after re-read token c
                n = len(r.buf.completion_ids)
                r.buf.logprobs[1:] = lp[at : at + n - 1]  # its <Path>'s: the previous after_lp
                r.after_lp = lp[at + n - 1]  # the next <Path>, or </Parallel>
                at += n

    def feed_rows(self, rows: list[int], seqs: list[list[int]], last: int) -> list[list[float]]:
        """Feed ``seqs[g]`` on row ``rows[g]`` while the other rows idle, ``REREAD_CHUNK`` columns
        per forward; returns each fed token's log-prob of the token after it (``last`` after the
        last one), at the rollout temperature like every recorded log-prob."""
        dev, width = self.streams.pos.device, max(len(q) for q in seqs)
        ids = torch.full((len(self.rows), width), self.pad, device=dev)  # (R, W)
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

    def finalize(self, s: Rollout) -> None:
        cut = self.cfg.max_completion_length
        s.completion_ids, s.logprobs = s.completion_ids[:cut], s.logprobs[:cut]
        s.forced = s.forced[:cut]
        s.finish_reason = s.finish_reason or "length"
        text_ids = [t for t in s.completion_ids if t not in (self.eos, self.tags.pad)]
        s.text = self.tok.decode(text_ids, skip_special_tokens=False)


def _from_tail(keep: list[tuple[_Row, list, int]]) -> list[tuple[_Row, list, int]]:
    """If the regroup only drops rows (each kept row continues one old row, none twice), the
    survivors keep their places and the last rows fill the freed ones, so that the cache moves
    those rows alone (``Streams.regroup``); any other regroup keeps its order."""
    old = [p[0][0] if len(p) == 1 else -1 for _, p, _ in keep]
    if -1 in old or len(set(old)) < len(old):
        return keep
    at, tail = dict(zip(old, keep)), iter(k for k, o in zip(keep, old) if o >= len(keep))
    return [at[j] if j in at else next(tail) for j in range(len(keep))]

"""The decision loop of ``pr1lib.decoding.rollout``: sample every row's next token, apply the rules,
fork, merge and finish rows (``pr1lib.decoding.regroup`` moves the rows in the cache).

``Engine(model, tokenizer, config, generator).run(prompt_ids)`` returns one ``Rollout`` per prompt;
``pr1lib.decoding.rollout.generate`` is the public entry and describes the modes.

The caches (``pick_streams``): ``pr1lib.decoding.rowcache.RowStreams`` (each row's keys packed in
its own row of one buffer after a base it shares: a prompt's samples share the prompt, a block's
paths the prefix; a fork, merge or finished row copies only what moves) where
``pr1lib.decoding.decode.supported`` covers the model, else ``pr1lib.decoding.kvcache.Streams`` (one
column count shared by all rows). Either samples the same tokens: the rows draw their random numbers
in one *logical* order whatever their places in the cache (``pr1lib.decoding.regroup``).

Rules (all deterministic):

- **forced tokens** (``forced = 1``, ``env_mask = 0``): ``<Path>`` at a fork, ``</Parallel>``,
  the ``\\n`` token(s), ``<Summary>``, and closers the engine writes: ``</Path>`` when a path
  samples eos or reaches its cap, ``</Summary>`` when a summary samples eos (eos is *replaced*).
  Where every feeding row queues forced tokens (a block's ``<Path>`` and header, a summary's
  ``</Parallel>``, newline and ``<Summary>``), one forward feeds them all (``_Rows.advance``);
  the decisions still come one token at a time, each drawing its random numbers, so the samples
  are those of one token a step; a row that leaves the course (say a numbered path that
  samples eos where its header goes: it closes) takes the tokens fed after it back
  (``RowStreams.unstep``). ``kvcache.Streams`` feeds one token a step.
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
  summary, which ``pr1lib.decoding.structure`` parses as a truncated block.
- **plans** (``header_style="plan"``): at a fork the engine reads the model's own plan, the last
  line before ``<Parallel>`` (``pr1lib.format.plans``), and opens one path per item it names, each
  forced to open with that item's label; the model decides the width and who takes what. A fork
  after a line that is no plan of 2 to ``num_paths`` items ends the sample
  (``finish_reason="bad_plan"``, graded as any malformed block). A queued label is written even
  where the path samples eos (only its cap closes it first).
- **hidden plans** (``hide_plan``, forked mode): the paths' rows leave out the plan line and
  ``<Parallel>`` (``structure.plan_length``) and start at the plan's first position, so a path,
  and the summary and text built on path 1's row, never read the plan (the unseen mask's
  ``hide_plan`` rule: the trainer scores the same thing).
- **nothing forced** (``header_style="none"``, or no ``path_headers``): every fork opens
  ``num_paths`` paths and each path's first token after ``<Path>`` is sampled: the paths are told
  nothing about which share is theirs (the plan-removed control of docs/planworld.md).
- Other tags sampled out of place are ordinary tokens (the structure parser agrees).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from pr1lib.config import ROLLOUT_MODES, RolloutConfig
from pr1lib.decoding import decode
from pr1lib.decoding.clock import OFF
from pr1lib.decoding.explore import WidthTokens, hotter, next_choice
from pr1lib.decoding.kvcache import Streams
from pr1lib.decoding.regroup import _Row, _Rows
from pr1lib.decoding.rowcache import RowStreams
from pr1lib.decoding.structure import TagIds, attn_implementation, plan_length, tag_ids
from pr1lib.format import plans
from pr1lib.format.grammar import path_header

BLOCK_LIMITS = ("stop", "mask")  # RolloutConfig.at_block_limit: the paper's stop | go on, masked
CACHES = ("rows", "shared")  # RowStreams | kvcache.Streams (the cache before RowStreams)


@dataclass
class Rollout:
    """One sampled completion, linearized: trunk, ``<Parallel>``, path 1, path 2, …, summary, …"""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    forced: list[int] = field(default_factory=list)  # 1 = inserted by the engine, 0 = sampled
    text: str = ""  # decoded with the tags
    finish_reason: str = ""  # "eos" | "length" | "block_limit" | "bad_plan"
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


def pick_streams(model: Any, config: RolloutConfig, cache: str | None = None) -> Any:
    """The cache for a rollout: ``cache`` ``"rows"`` (``RowStreams``), ``"shared"``
    (``kvcache.Streams``) or ``None``: rows where they apply (``fast_cache``, a model
    ``decode.supported`` covers, SDPA attention), else shared; ``fast_cache=False`` is always
    the first engine (``Streams(model, buffered=False)``).

    >>> pick_streams(None, RolloutConfig(), cache="paged")
    Traceback (most recent call last):
    ...
    ValueError: cache must be one of ('rows', 'shared') or None, got 'paged'
    """
    if cache not in (None, *CACHES):
        raise ValueError(f"cache must be one of {CACHES} or None, got {cache!r}")
    fits = cache is None and decode.supported(model) and attn_implementation(model) == "sdpa"
    if config.fast_cache and (cache == "rows" or fits):
        fan = 1 if config.mode == "seen" else config.num_paths  # rows a prompt may fork into
        return RowStreams(model, config.max_completion_length + 1, fan)  # a completion's room
    return Streams(model, config.fast_cache)


class Engine(_Rows):
    """The decision loop over the rows' cache (``pick_streams``; ``cache`` chooses): sample,
    apply the rules, fork, merge, drop; ``pr1lib.decoding.regroup._Rows`` moves the rows."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        config: RolloutConfig,
        generator: torch.Generator | None,
        cache: str | None = None,
        clock: Any = None,
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
        # numbered paths: the tokens path j opens with, forced after its <Path>; planned paths:
        # the labels of the model's own plan, read at each fork (plan_headers)
        self.planned = config.path_headers and config.header_style == "plan"
        fixed = config.path_headers and config.header_style in ("number", "letter")
        self.headers = [
            tokenizer.encode(path_header(j, config.header_style), add_special_tokens=False)
            if fixed
            else []
            for j in range(config.num_paths)
        ]
        self.widths = WidthTokens.of(tokenizer) if config.width_temperature > 0 else None
        self.streams = pick_streams(model, config, cache)
        self.reread_tokens = 0  # path tokens run through the model a second time (reread mode)
        self.clock = clock or OFF  # pr1lib.decoding.clock: seconds per phase, when one is given

    # -- the loop ---------------------------------------------------------------------------
    @torch.no_grad()
    def run(self, prompts: Sequence[Sequence[int]]) -> list[Rollout]:
        """Every prompt's sample, in order (``self.clock`` times the phases)."""
        clock = self.clock
        with clock.run(len(prompts)):
            self.samples = [Rollout(list(p)) for p in prompts]
            self.rows = [_Row(sample=i) for i in range(len(prompts))]
            with clock.part("prefill"):
                logits = self.streams.prefill(prompts, self.pad)  # (R, V)
            self.place()
            self.steps, fed = 0, [logits]
            while True:
                self.decide_each(fed)
                self.regroup()
                if not self.rows:
                    break
                fed = self.advance()  # each (R, V), the rows' logical order
            getattr(self.streams, "release", lambda: None)()  # its memory: the next rollout's
            for s in self.samples:
                self.finalize(s)
        return self.samples

    def decide_each(self, fed: list[torch.Tensor]) -> None:
        """The decisions on each token a forward fed, in turn (``fed``: their logits ``(R, V)``);
        where the rows leave the course the forward assumed (``on_course``), the tokens fed after
        are taken back and the rest of ``fed`` is not read: the next step feeds what was
        decided."""
        for j, logits in enumerate(fed):
            with self.clock.part("sample"):
                self.decide(logits)
            if j + 1 < len(fed) and not self.on_course(j + 1):
                self.streams.unstep(self.live, len(fed) - j - 1)
                return

    def decide(self, logits: torch.Tensor) -> None:
        """Choose every row's next token from its logits ``(R, V)`` and record it."""
        temp = self.cfg.temperature
        # (R, V)
        self.logp = torch.log_softmax(logits.float() / (temp if temp > 0 else 1.0), dim=-1)
        banned = logits.clone()  # (R, V)
        ban = torch.tensor([self.bans_parallel(r) for r in self.rows], device=logits.device)  # (R,)
        banned[ban, self.tags.parallel] = float("-inf")
        if self.widths is not None and temp > 0:  # the plans' width choices, sampled hotter
            banned = hotter(banned, [r.choice for r in self.rows], self.widths, temp, self.cfg)
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

    def track_plan(self, row: _Row, tok: int, s: Rollout) -> None:
        """Note the row's place in its plan line (``explore.next_choice``); a plan line's newline
        is followed by its block's ``<Parallel>``, forced (a plan is a spawn, as in APR: a plan
        wider than any the cold start wrote opens its block too)."""
        if row.in_plan and tok in self.newline and s.blocks < self.cfg.max_blocks:
            row.queue.append(self.tags.parallel)
        row.in_plan, row.choice = next_choice(self.widths, row.in_plan, row.last, tok)
        row.choice = row.choice if row.kind == "trunk" else ""
        row.last = tok

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
        if self.widths is not None:
            self.track_plan(row, tok, s)
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
        s, headers = self.samples[row.sample], self.headers
        if self.planned:
            headers = self.plan_headers(s)
            if headers is None:
                return self.finish(row, "bad_plan")
        k = len(headers)
        room = self.cfg.max_completion_length - len(s.completion_ids)
        cap = max(2, min(self.cfg.max_path_length, room // k))
        group = [
            _Row(
                sample=row.sample,
                kind="path",
                feed=self.tags.path,
                index=j,
                cap=cap,
                n_prefix=self.streams.n_real(row.slot) - self.hidden(s),
                buf=Rollout([]),
            )
            for j in range(k)
        ]
        for j, r in enumerate(group):
            r.group, r.queue = group, list(headers[j])
            r.buf.add(self.tags.path, self.lp(i, self.tags.path) if j == 0 else 0.0, 1)
        row.fork_pending, row.group = False, group

    def hidden(self, s: Rollout) -> int:
        """How many of the row's last keys its paths leave out: the plan and ``<Parallel>`` with
        ``hide_plan``, else none."""
        if not (self.cfg.hide_plan and self.cfg.mode == "forked"):
            return 0
        return plan_length(s.prompt_ids + s.completion_ids, self.tags)

    def plan_headers(self, s: Rollout) -> list[list[int]] | None:
        """The label tokens of each path the sample's own plan names (its last line before the
        ``<Parallel>`` it has just written; the prompt's where the completion has none before it:
        a forced block after a given plan), or ``None`` when that line is no plan of 2 to
        ``num_paths`` items."""
        text = self.tok.decode(s.completion_ids[:-1], skip_special_tokens=False)
        if not text.strip():
            text = self.tok.decode(s.prompt_ids, skip_special_tokens=False)
        items = plans.plan_items(plans.last_line(text))
        if items is None or len(items) > self.cfg.num_paths:
            return None
        return [self.tok.encode(f"({x})", add_special_tokens=False) for x in items]

    # -- path rows --------------------------------------------------------------------------
    def path_step(self, i: int, row: _Row, tok: int, lp: float) -> None:
        if row.closing:  # its </Path> is in the cache: note the next linearized token's log-prob
            last = row.index == len(row.group) - 1
            row.after_lp = self.lp(i, self.tags.end_parallel if last else self.tags.path)
            row.closing, row.waiting, row.feed = False, True, None
            return
        at_cap = len(row.buf.completion_ids) >= row.cap - 1
        forced = at_cap or tok == self.eos
        if row.queue and not at_cap and (self.planned or not forced):  # its header: the engine's
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

    def finalize(self, s: Rollout) -> None:
        cut = self.cfg.max_completion_length
        s.completion_ids, s.logprobs = s.completion_ids[:cut], s.logprobs[:cut]
        s.forced = s.forced[:cut]
        s.finish_reason = s.finish_reason or "length"
        text_ids = [t for t in s.completion_ids if t not in (self.eos, self.tags.pad)]
        s.text = self.tok.decode(text_ids, skip_special_tokens=False)

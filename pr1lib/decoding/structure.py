"""The structure of a parallel-thinking sequence: path spans, the "unseen" mask and position ids.

Everything is derived from token ids (the six tags are single tokens), so nothing has to travel
next to a batch. For the official layout
``… <Parallel><Path>…</Path><Path>…</Path></Parallel>\\n<Summary>…</Summary> …``:

- **mask** ("unseen"): causal, except that a token of a path never sees a *sibling* path of the
  same block. A path span runs from ``<Path>`` to ``</Path>``, both included. ``</Parallel>``,
  the summary and all later text see every path. ``mode="seen"`` is the plain causal mask.
- **positions**: sequential, except that every path restarts at ``pos(<Parallel>) + 1`` and the
  first token after the paths (``</Parallel>``) gets ``max path end + 1``.
- **hidden plans** (``hide_plan=True``, unseen only): a block's plan, the line before its
  ``<Parallel>`` (from the line's start, or the last tag, to ``<Parallel>`` itself), is read by
  nothing after that ``<Parallel>``: its paths, summary and later text attend past it, as if it
  had been taken out, and the paths restart at the plan's first position. A path then reads what
  a path of any plan reads: the question, the text before the plan and its own label
  (docs/planworld.md, regime 7). ``plan_length`` is the span the rollout engine leaves out.

Malformed or truncated structure never raises (unless ``strict=True``); the rule is causal, so
the structure of a prefix is the prefix of the structure (a rollout cut at its token budget
parses the same as the full one):

- outside a block, ``<Parallel>`` opens one; every other token, stray tags included, is text;
- inside a block, tokens before the first ``<Path>`` are shared context (paths start after them);
- ``<Path>`` opens a path, and inside a path only ``</Path>`` closes it (other tags are path text);
- between paths, ``<Path>`` opens the next path, ``</Parallel>`` closes the block, ``<Summary>``
  starts a summary inside the block (the other layout: it sees all paths, ``</Parallel>`` later
  closes the block) and any other token is *glue*: it is attached to the preceding path, so no
  later sibling can see it;
- input that ends inside a path or a block is a truncated block: the open path is still a path.

``strict=True`` raises ``ValueError`` on stray or nested tags, glue and empty blocks instead.

Mask types: ``sdpa`` takes bool (True = attend); ``eager`` needs an additive float mask (a bool
mask is silently added as 0/1 there, i.e. ignored); ``flex_attention`` takes a ``BlockMask``.
Pad query rows attend to themselves only, so no row is fully masked (no NaN).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, Sequence

import torch

from pr1lib.format.grammar import TAGS

MASK_MODES = ("seen", "unseen")  # the plain causal mask | the path-isolating one


class TagIds(NamedTuple):
    """Token ids of the six tags (in ``TAGS`` order), plus the pad id."""

    parallel: int
    end_parallel: int
    path: int
    end_path: int
    summary: int
    end_summary: int
    pad: int | None = None
    newline: int | None = None  # "\n" (hidden plans: where a plan line starts)


def tag_ids(tokenizer: Any) -> TagIds:
    """The ``TagIds`` of a tokenizer whose tags are single tokens (a ``TagIds`` passes through).

    >>> tag_ids(TagIds(1, 2, 3, 4, 5, 6, pad=0)).end_path
    4
    """
    if isinstance(tokenizer, TagIds):
        return tokenizer
    ids = tokenizer.convert_tokens_to_ids(list(TAGS))
    unk = getattr(tokenizer, "unk_token_id", None)
    if any(i is None or (unk is not None and i == unk) for i in ids):
        raise ValueError(
            f"the tokenizer lacks some of the tags {TAGS}; add them first (pr1lib.decoding.tokens)"
        )
    newline = tokenizer.encode("\n", add_special_tokens=False)
    return TagIds(*ids, pad=tokenizer.pad_token_id, newline=newline[-1] if newline else None)


def plan_length(ids: Sequence[int], tags: TagIds) -> int:
    """How many tokens a hidden plan takes out: from the start of the line before the last token
    (a ``<Parallel>``) to that token, both included. The line starts after the last newline or tag;
    a newline right before ``<Parallel>`` ends the plan line and belongs to it.

    >>> t = TagIds(1, 2, 3, 4, 5, 6, pad=0, newline=9)
    >>> plan_length([7, 9, 8, 8, 8, 9, 1], t), plan_length([6, 8, 8, 1], t), plan_length([9, 1], t)
    (5, 3, 2)
    """
    if tags.newline is None:
        raise ValueError("hidden plans need the newline's token id (TagIds.newline)")
    breaks = {tags.newline, *tags[:6]}
    end = len(ids) - 1  # the <Parallel>
    i = end - 1 if end > 0 and ids[end - 1] == tags.newline else end
    while i > 0 and ids[i - 1] not in breaks:
        i -= 1
    return end - i + 1


@dataclass
class Structure:
    """Per-token labels of one sequence: position id, block index and path index (-1 = none).

    Path indices are unique in the sequence (they count paths over all blocks).
    """

    positions: list[int] = field(default_factory=list)
    block: list[int] = field(default_factory=list)
    path: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    cut: list[int] = field(default_factory=list)  # a hidden plan's tokens: the index of its
    # <Parallel>, the last token that reads them (-1: read by all later tokens)

    def spans(self) -> list[tuple[int, int, int]]:
        """``(block, start, end)`` of every path, ``end`` exclusive."""
        out: list[tuple[int, int, int]] = []
        for i, p in enumerate(self.path):
            if p >= 0 and (i == 0 or self.path[i - 1] != p):
                out.append((self.block[i], i, i + 1))
            elif p >= 0:
                out[-1] = (out[-1][0], out[-1][1], i + 1)
        return out


class _Parser:
    """A state machine (``out`` / ``block`` / ``path`` / ``tail``) over token ids, one token at a
    time."""

    def __init__(self, tags: TagIds, hide_plan: bool = False):
        self.t, self.s, self.hide_plan, self.ids = tags, Structure(), hide_plan, []
        self.state, self.next_pos, self.n_blocks, self.n_paths = "out", 0, 0, 0
        self.base = self.top = 0  # where paths start; the largest position used in the block

    def emit(self, pos: int, block: int = -1, path: int = -1) -> None:
        self.s.positions.append(pos)
        self.s.block.append(block)
        self.s.path.append(path)
        self.s.cut.append(-1)
        self.next_pos, self.top = pos + 1, max(self.top, pos)

    def text(self, tok: int) -> None:
        self.emit(self.next_pos)

    def feed(self, tok: int) -> None:
        getattr(self, "_" + self.state)(tok)

    def hide(self) -> None:
        """The block just opened: hide its plan from what follows; its paths start where it did."""
        i = len(self.s.cut) - 1  # the <Parallel>, the last of ``self.ids``
        a = i + 1 - plan_length(self.ids, self.t)
        self.s.cut[a : i + 1] = [i] * (i + 1 - a)
        self.base, self.top = self.s.positions[a], self.s.positions[a] - 1

    def _out(self, tok: int) -> None:
        if tok == self.t.parallel:
            self.state, self.blk, self.path_idx = "block", self.n_blocks, -1
            self.n_blocks += 1
            self.top = self.next_pos
            self.emit(self.next_pos, self.blk)
            self.base = self.next_pos
            if self.hide_plan:
                self.hide()
            return
        if tok in (self.t.path, self.t.end_path, self.t.end_parallel):
            self.s.errors.append(f"stray tag {tok} outside a block at {len(self.s.positions)}")
        self.text(tok)

    def _block(self, tok: int) -> None:
        i = len(self.s.positions)
        if tok == self.t.path:
            self.state, self.path_idx = "path", self.n_paths
            self.n_paths += 1
            self.emit(self.base, self.blk, self.path_idx)
        elif tok == self.t.end_parallel:
            if self.path_idx < 0:
                self.s.errors.append(f"block closed without a path at {i}")
            self.state = "out"
            self.emit(self.top + 1, self.blk)
        elif tok == self.t.summary and self.path_idx >= 0:  # a summary inside the block
            self.state = "tail"
            self.emit(self.top + 1, self.blk)
        elif self.path_idx < 0:  # shared context before the first path
            self.emit(self.next_pos, self.blk)
            self.base = self.next_pos
        else:  # glue after a path: part of that path
            self.s.errors.append(f"token {tok} between paths at {i}")
            self.emit(self.next_pos, self.blk, self.path_idx)

    def _tail(self, tok: int) -> None:
        if tok in (self.t.parallel, self.t.path, self.t.end_path):
            self.s.errors.append(f"tag {tok} after the paths at {len(self.s.positions)}")
        if tok == self.t.end_parallel:
            self.state = "out"
        self.emit(self.next_pos, self.blk)

    def _path(self, tok: int) -> None:
        if tok in (self.t.parallel, self.t.path, self.t.end_parallel):
            self.s.errors.append(f"tag {tok} inside a path at {len(self.s.positions)}")
        if tok == self.t.end_path:
            self.state = "block"
        self.emit(self.next_pos, self.blk, self.path_idx)


def parse(
    ids: Sequence[int], tags: Any, start: int = 0, strict: bool = False, hide_plan: bool = False
) -> Structure:
    """Label every token of ``ids``; structure is read only from index ``start`` on.

    ``tags`` is a tokenizer or a ``TagIds``. With ``strict=True`` malformed input raises.
    ``hide_plan``: each block's plan is hidden from what follows (``Structure.cut``).

    >>> t = TagIds(1, 2, 3, 4, 5, 6)
    >>> s = parse([9, 1, 3, 7, 4, 3, 7, 7, 4, 2, 8], t)
    >>> s.positions
    [0, 1, 2, 3, 4, 2, 3, 4, 5, 6, 7]
    >>> s.path
    [-1, -1, 0, 0, 0, 1, 1, 1, 1, -1, -1]
    """
    tags = tag_ids(tags)
    p = _Parser(tags, hide_plan)
    for i, tok in enumerate(ids):
        p.ids.append(int(tok))
        if i < start:
            p.text(int(tok))  # the prompt: plain sequential text
        else:
            p.feed(int(tok))
    if strict and p.s.errors:
        raise ValueError("malformed parallel structure: " + "; ".join(p.s.errors))
    return p.s


def _valid_mask(input_ids: torch.Tensor, pad: int | None) -> torch.Tensor:
    """Right padding: every token before the trailing run of pad ids is real."""
    if pad is None:
        return torch.ones_like(input_ids, dtype=torch.bool)  # (B, L)
    real = input_ids != pad  # (B, L)
    idx = torch.arange(input_ids.shape[1], device=input_ids.device)  # (L,)
    last = torch.where(real, idx, -1).amax(dim=1, keepdim=True)  # (B, 1)
    return idx[None, :] <= last  # (B, L)


def structure_tensors(
    input_ids: torch.Tensor,
    tags: Any,
    mode: str = "unseen",
    response_start: Any = None,
    padding_mask: torch.Tensor | None = None,
    strict: bool = False,
    hide_plan: bool = False,
) -> dict[str, torch.Tensor]:
    """Per-token ``position_ids``, ``block``, ``path``, ``cut``, ``valid`` tensors, all ``(B, L)``.

    Pads get position 0 and no path. ``mode="seen"`` gives sequential positions and no paths.
    ``cut``: a hidden plan's tokens hold the index of their ``<Parallel>`` (later queries do not
    read them), every other token ``L``.

    >>> t = TagIds(1, 2, 3, 4, 5, 6, pad=0)
    >>> ids = torch.tensor([[1, 3, 7, 4, 3, 4, 2], [9, 9, 0, 0, 0, 0, 0]])
    >>> structure_tensors(ids, t)["position_ids"].tolist()
    [[0, 1, 2, 3, 1, 2, 4], [0, 1, 0, 0, 0, 0, 0]]
    """
    if mode not in MASK_MODES:
        raise ValueError(f"mode must be one of {MASK_MODES}, got {mode!r}")
    tags = tag_ids(tags)
    # (B, L)
    valid = _valid_mask(input_ids, tags.pad) if padding_mask is None else padding_mask.bool()
    B, L = input_ids.shape
    out = {
        k: torch.full((B, L), v, dtype=torch.long)
        for k, v in (("position_ids", 0), ("block", -1), ("path", -1), ("cut", L))
    }
    for b in range(B):
        idx = valid[b].nonzero().squeeze(1).cpu()  # (n,)
        start = 0 if response_start is None else int(response_start[b])
        n_before = int((idx < start).sum())
        if mode == "seen":
            out["position_ids"][b, idx] = torch.arange(len(idx))
            continue
        s = parse(input_ids[b, idx].tolist(), tags, n_before, strict, hide_plan)
        for key, values in (("position_ids", s.positions), ("block", s.block), ("path", s.path)):
            out[key][b, idx] = torch.tensor(values, dtype=torch.long)
        cut = torch.tensor(s.cut, dtype=torch.long)  # (n,) local indices, -1: none
        out["cut"][b, idx[cut >= 0]] = idx[cut[cut >= 0]]  # the <Parallel>'s padded index
    out = {k: v.to(input_ids.device) for k, v in out.items()}
    return {**out, "valid": valid}


def allowed_mask(
    block: torch.Tensor,
    path: torch.Tensor,
    valid: torch.Tensor,
    cut: torch.Tensor | None = None,
) -> torch.Tensor:
    """Bool ``(B, L, L)``: query ``q`` may attend to key ``k`` (True = attend); with ``cut``
    (``structure_tensors``), not to a hidden plan's key after its ``<Parallel>``.

    >>> m = allowed_mask(
    ...     torch.tensor([[-1, 0, 0]]),
    ...     torch.tensor([[-1, 0, 1]]),
    ...     torch.ones(1, 3, dtype=torch.bool),
    ... )
    >>> m[0].int().tolist()
    [[1, 0, 0], [1, 1, 0], [1, 0, 1]]
    """
    L = block.shape[1]
    causal = torch.ones(L, L, dtype=torch.bool, device=block.device).tril()  # (L, L)
    in_path = path >= 0  # (B, L)
    # (B, L, L)
    sibling = (block[:, :, None] == block[:, None, :]) & (path[:, :, None] != path[:, None, :])
    sibling &= in_path[:, :, None] & in_path[:, None, :]  # (B, L, L)
    allowed = causal[None] & ~sibling & valid[:, None, :]  # (B, L, L)
    if cut is not None:
        q = torch.arange(L, device=block.device)[None, :, None]  # (1, L, 1)
        allowed &= q <= cut[:, None, :]  # (B, L, L)
    eye = torch.eye(L, dtype=torch.bool, device=block.device)[None]  # (1, L, L)
    return torch.where(valid[:, :, None], allowed, eye)  # (B, L, L) pad rows: diagonal only


def _block_mask(
    block: torch.Tensor, path: torch.Tensor, valid: torch.Tensor, cut: torch.Tensor
) -> Any:
    """The same rule as ``allowed_mask`` as a flex-attention ``BlockMask``."""
    from torch.nn.attention.flex_attention import create_block_mask

    def mask_mod(b, h, q, k):
        sibling = (
            (block[b, q] == block[b, k])
            & (path[b, q] != path[b, k])
            & (path[b, q] >= 0)
            & (path[b, k] >= 0)
        )
        keep = (k <= q) & ~sibling & valid[b, k] & (q <= cut[b, k])
        return torch.where(valid[b, q], keep, q == k)

    B, L = block.shape
    return create_block_mask(mask_mod, B, None, L, L, device=block.device)


def to_model_mask(
    allowed: torch.Tensor, attn_implementation: str = "sdpa", dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """``(B, L, L)`` bool -> ``(B, 1, L, L)`` in the form the implementation needs.

    >>> a = torch.ones(1, 2, 2, dtype=torch.bool).tril()
    >>> to_model_mask(a, "eager")[0, 0, 0, 1].item() == torch.finfo(torch.float32).min
    True
    """
    mask = allowed[:, None]  # (B, 1, L, L)
    if attn_implementation == "eager":  # additive: 0 = attend, finfo.min = blocked (not -inf: NaN)
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
            ~mask, torch.finfo(dtype).min
        )
    if attn_implementation == "sdpa":
        return mask
    raise ValueError(f"no dense 4D mask for attention implementation {attn_implementation!r}")


def attention_inputs(
    input_ids: torch.Tensor,
    tokenizer: Any,
    mode: str = "unseen",
    response_start: Any = None,
    attn_implementation: str = "sdpa",
    *,
    padding_mask: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    strict: bool = False,
    hide_plan: bool = False,
) -> dict[str, Any]:
    """``attention_mask`` (4D, or a ``BlockMask`` for flex) and ``position_ids`` for a causal LM.

    ``input_ids`` is ``(B, L)``, right-padded with the pad id (or pass ``padding_mask``, 1 = real,
    for other padding). Structure is read from ``response_start[b]`` on. ``dtype`` is the eager
    mask's dtype (use the model's compute dtype).

    >>> t = TagIds(1, 2, 3, 4, 5, 6, pad=0)
    >>> out = attention_inputs(torch.tensor([[1, 3, 7, 4, 3, 8, 4, 2, 0]]), t)
    >>> out["attention_mask"].shape, out["attention_mask"].dtype
    (torch.Size([1, 1, 9, 9]), torch.bool)
    >>> out["position_ids"].tolist()
    [[0, 1, 2, 3, 1, 2, 3, 4, 0]]
    """
    st = structure_tensors(
        input_ids, tokenizer, mode, response_start, padding_mask, strict, hide_plan
    )
    parts = st["block"], st["path"], st["valid"], st["cut"]
    if attn_implementation == "flex_attention":
        mask = _block_mask(*parts)
    else:
        mask = to_model_mask(allowed_mask(*parts), attn_implementation, dtype)
    return {"attention_mask": mask, "position_ids": st["position_ids"]}


def attn_implementation(model: Any) -> str:
    """The model's attention kernel name (``sdpa`` when unset)."""
    return getattr(model.config, "_attn_implementation", None) or "sdpa"


def structured_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    tokenizer: Any,
    mode: str = "unseen",
    response_start: Any = None,
    *,
    padding_mask: torch.Tensor | None = None,
    temperature: float = 1.0,
    logits_to_keep: int = 0,
    hide_plan: bool = False,
) -> torch.Tensor:
    """Log-prob of every token given what it may see: ``(B, L)``, column 0 is 0.

    With ``logits_to_keep=n`` only the last ``n`` tokens are scored: ``(B, n)``. ``temperature``
    divides the logits (as TRL does). The forward always gets the 4D mask with the positions
    (restarted positions without a mask would trip transformers' packed-sequence detection).
    """
    dtype = getattr(model, "dtype", torch.float32)
    inputs = attention_inputs(
        input_ids,
        tokenizer,
        mode,
        response_start,
        attn_implementation(model),
        padding_mask=padding_mask,
        dtype=dtype,
        hide_plan=hide_plan,
    )
    keep = logits_to_keep + 1 if logits_to_keep else 0
    # (B, K, V)
    logits = model(input_ids=input_ids, use_cache=False, logits_to_keep=keep, **inputs).logits
    logp = torch.log_softmax(logits[:, :-1].float() / temperature, dim=-1)  # (B, K-1, V)
    target = input_ids[:, -logp.shape[1] :]  # (B, K-1)
    out = logp.gather(-1, target[..., None]).squeeze(-1)  # (B, K-1)
    # (B, L)
    return out if logits_to_keep else torch.cat([torch.zeros_like(out[:, :1]), out], dim=1)

"""Batched KV-cache rollouts for parallel thinking: modes ``seen``, ``forked`` and ``reread``.

``generate(model, tokenizer, prompts, config)`` returns one ``Rollout`` per prompt. The modes:

- ``seen``: plain sampling; the model writes every tag itself (only the block limit applies).
- ``forked`` (the unseen variant's view, decoded for real in parallel):

  1. the trunk decodes until the model samples ``<Parallel>``;
  2. the row is forked into k rows from its cache; each starts with a forced ``<Path>`` at
     position ``pos(<Parallel>) + 1``; the k rows decode together until each has its ``</Path>``;
  3. the rows are merged by concatenating their cached keys/values (prefix, path 1, path 2, …);
     no path token is processed again;
  4. the engine feeds ``</Parallel>``, ``\\n`` and ``<Summary>``, at position ``max path end + 1``;
     the summary decodes until ``</Summary>``, then the trunk goes on.

  The summary sees the paths exactly as ``pr1lib.decoding.structure``'s unseen mask and positions
  say.
- ``reread`` (the paper's Seen rollout: its one engine, read causally): steps 1-2 as ``forked``, so
  no path sees a sibling while it is sampled; at the merge the summary row keeps the prefix and
  path 1 (already at sequential positions) and *re-reads* paths 2..k on top of them, one causal
  multi-token forward on that row while the other rows idle; ``</Parallel>`` follows at the next
  sequential position and everything after decodes causally. The official loop gets the same
  by re-prefilling prompt + paths as one vLLM request. ``stats["reprefill_tokens"]`` counts the
  re-read tokens.

All rows of all prompts share one cache: ``pr1lib.decoding.rowcache.RowStreams`` for a model that
``pr1lib.decoding.decode.supported`` covers (the tiny model on the CPU: each row's keys packed in
its own row of one buffer after a base it shares, a prompt or a block's prefix kept once; a fork,
merge or finished row copies only what moves), else
``pr1lib.decoding.kvcache.Streams`` (one column count for all rows, finished paths waiting with
masked "holes", a regroup that copies the cache once, so memory peaks at about twice the cache; pass
prompts in chunks if that is too much). Both sample the same tokens.

The decision loop and its rules live in ``pr1lib.decoding.engine``, the row bookkeeping in
``pr1lib.decoding.regroup``.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from pr1lib.config import RolloutConfig
from pr1lib.decoding.engine import BLOCK_LIMITS, Engine, Rollout, sample_tokens
from pr1lib.decoding.structure import structured_logprobs, tag_ids

__all__ = ["BLOCK_LIMITS", "Rollout", "as_columns", "generate", "rollout_logprobs", "sample_tokens"]


def as_columns(rollouts: Sequence[Rollout]) -> dict[str, list]:
    """Column form for TRL's ``rollout_func``: ``prompt_ids``, ``completion_ids``, ``logprobs``,
    ``env_mask``, ``text``.

    >>> as_columns([Rollout([1], [5, 6], [-0.1, -0.2], [0, 1])])["env_mask"]
    [[1, 0]]
    """
    return {
        "prompt_ids": [r.prompt_ids for r in rollouts],
        "completion_ids": [r.completion_ids for r in rollouts],
        "logprobs": [r.logprobs for r in rollouts],
        "env_mask": [r.env_mask for r in rollouts],
        "text": [r.text for r in rollouts],
    }


def _encode_prompts(tokenizer: Any, prompts: Sequence[Any]) -> list[list[int]]:
    return [
        tokenizer.encode(p, add_special_tokens=False) if isinstance(p, str) else list(p)
        for p in prompts
    ]


def generate(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Any],
    config: RolloutConfig | None = None,
    generator: torch.Generator | None = None,
    stats: dict | None = None,
    cache: str | None = None,
    clock: Any = None,
    **overrides: Any,
) -> list[Rollout]:
    """Sample one completion per prompt (token ids or strings); see the module docstring.

    ``overrides`` replace ``config`` fields, e.g. ``mode="seen"``, ``num_paths=4``. A ``stats``
    dict receives ``fed_tokens`` (tokens run through the model: each prompt and completion token
    at most once, plus in ``reread`` mode the re-read paths), ``reprefill_tokens`` (those re-read
    tokens: paths 2..k of every block; 0 in the other modes) and ``steps`` (decoding steps: the
    model's forwards after the prefill; a run of forced tokens that every row feeds is one).
    ``generator`` (on the model's device) makes sampling reproducible; it is shared by the batch,
    each step drawing one number per row in the rows' order. ``cache`` picks the rows' cache
    (``pr1lib.decoding.engine.pick_streams``; ``None``: the fastest that applies; the choice changes
    no sample, only the rounding of the last bits). A ``clock`` (``pr1lib.decoding.clock.Clock``)
    adds the rollout's seconds per phase.

    >>> from transformers import Qwen3Config, Qwen3ForCausalLM
    >>> from pr1lib.decoding.models import train_tiny_tokenizer
    >>> from pr1lib.decoding.tokens import add_parallel_tags
    >>> tok = train_tiny_tokenizer(["think in parallel"] * 5, vocab_size=270)
    >>> model = Qwen3ForCausalLM(Qwen3Config(vocab_size=len(tok), hidden_size=16, head_dim=8,
    ...     intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
    ...     num_key_value_heads=1)).eval()
    >>> _ = add_parallel_tags(tok, model)
    >>> g = torch.Generator().manual_seed(0)
    >>> r = generate(model, tok, ["think"], max_completion_length=8, generator=g)[0]
    >>> len(r.completion_ids) <= 8, len(r.logprobs) == len(r.forced) == len(r.completion_ids)
    (True, True)
    >>> again = rollout_logprobs(model, tok, [r])[0]  # the trainer's view: the same numbers
    >>> max(abs(a - b) for a, b in zip(r.logprobs, again)) < 1e-4
    True
    """
    config = (config or RolloutConfig()).replace(**overrides)
    engine = Engine(model, tokenizer, config, generator, cache, clock)
    rollouts = engine.run(_encode_prompts(tokenizer, prompts))
    if stats is not None:
        stats.update(
            fed_tokens=engine.streams.fed, steps=engine.steps, reprefill_tokens=engine.reread_tokens
        )
    return rollouts


def rollout_logprobs(
    model: Any,
    tokenizer: Any,
    rollouts: Sequence[Rollout],
    mode: str = "forked",
    temperature: float = 1.0,
    hide_plan: bool = False,
) -> list[list[float]]:
    """Each completion token's log-prob, recomputed with one structure-masked forward (the
    trainer's view).

    ``mode`` is the rollout mode: ``forked`` scores under the unseen mask (``hide_plan``: plans
    hidden, ``RolloutConfig.hide_plan``), ``seen`` and ``reread`` causally (sequential positions).
    ``temperature=0`` (greedy) scores at 1, as the engine records greedy log-probs.
    """
    temperature = temperature if temperature > 0 else 1.0
    pad = tag_ids(tokenizer).pad
    pad = tokenizer.eos_token_id if pad is None else pad
    seqs = [r.prompt_ids + r.completion_ids for r in rollouts]
    width = max(len(s) for s in seqs)
    ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs], device=model.device)  # (B, L)
    # (B, L)
    real = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs], device=model.device)
    starts = [len(r.prompt_ids) for r in rollouts]
    with torch.no_grad():
        lp = structured_logprobs(
            model,
            ids,
            tokenizer,
            "unseen" if mode == "forked" else "seen",
            starts,
            padding_mask=real,
            temperature=temperature,
            hide_plan=hide_plan and mode == "forked",
        )  # (B, L)
    return [lp[b, starts[b] : len(seqs[b])].tolist() for b in range(len(rollouts))]

"""Cheaper loss forwards: a padded batch run as length-sorted chunks, each distinct prompt once.

TRL pads a GRPO batch to its longest prompt (on the left) and its longest completion (on the
right), so one long completion makes every row of the batch pay for its length in the loss's
forward and backward. ``by_length`` sorts the rows by length, splits them into ``buckets``
chunks, cuts each chunk to its own columns, runs ``forward`` on it and returns the results in
the batch's order and width (zeros where the batch had padding). Attention never reads padding,
so only the rounding changes: the positions shift by the padding removed, and rotary attention
depends on differences of positions only.

A GRPO batch also repeats each prompt ``num_generations`` times, and in the tiny profile a prompt
is about a third of a row. ``by_prompt`` runs each distinct prompt once, keeps its KV cache, and
runs the completions (in the same length buckets) on top of their rows' copies of it; gradients
flow back through the copies into the one prompt forward.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

import torch
import torch.nn.functional as F
from transformers import DynamicCache

Forward = Callable[[torch.Tensor, torch.Tensor, int], tuple[torch.Tensor, torch.Tensor | None]]


def by_length(
    forward: Forward,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    buckets: int,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``forward(ids, mask, keep) -> (logps, entropies or None)``, each ``(b, keep)``, run on
    ``buckets`` length-sorted chunks of a TRL batch (prompts left-padded, completions right-padded,
    ``logits_to_keep`` completion columns); returns both as ``(B, logits_to_keep)``.

    >>> ids = torch.tensor([[0, 5, 6, 7, 0], [4, 5, 6, 0, 0]])  # 2 prompt + 3 completion columns
    >>> last = lambda i, m, keep: (i[:, -keep:].float(), None)  # the completion tokens themselves
    >>> by_length(last, ids, (ids > 0).long(), 3, buckets=2)[0].tolist()
    [[6.0, 7.0, 0.0], [6.0, 0.0, 0.0]]
    """
    width = input_ids.size(1) - logits_to_keep  # prompt columns
    real = attention_mask.bool()  # (B, L)
    prompt, completion = real[:, :width].sum(dim=1), real[:, width:].sum(dim=1)  # (B,)
    order = torch.argsort(completion * (width + 1) + prompt)  # (B,) shortest first
    parts = []
    for chunk in order.tensor_split(buckets):
        if len(chunk) == 0:
            continue
        a, c = int(prompt[chunk].max()), max(int(completion[chunk].max()), 1)
        cols = slice(width - a, width + c)  # the chunk's own columns
        parts.append((chunk, *forward(input_ids[chunk, cols], attention_mask[chunk, cols], c)))
    return _in_batch_order(parts, logits_to_keep)


def _in_batch_order(
    parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]], width: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Chunks' ``(rows, logps, entropies or None)``, each ``(b, c)``, padded to ``width`` columns
    and put back in the batch's row order: ``(B, width)`` each."""
    back = torch.argsort(torch.cat([rows for rows, _, _ in parts]))  # (B,) the batch's order
    logps = torch.cat([F.pad(lp, (0, width - lp.size(1))) for _, lp, _ in parts])[back]
    if parts[0][2] is None:
        return logps, None
    return logps, torch.cat([F.pad(e, (0, width - e.size(1))) for _, _, e in parts])[back]


Call = Callable[..., Any]  # model(**inputs): TRL's fused forward (log_probs, entropy) or a cache
SMALL_VOCAB = 8192  # up to this many tokens, ``full_logits_head``'s logits fit and are cheaper


def full_logits_head(call: Call, temperature: float = 1.0, entropy_grad: bool = False) -> Call:
    """``call`` whose ``fused_lm_head=True`` answer comes from the model's own full logits
    ``(b, q, V)``: log-probs of the next labels and entropies at ``temperature``, as TRL's tiled
    head gives them. For a small vocabulary (the tiny model's 512) this costs about half as much
    on the CPU; the entropies carry a gradient only if ``entropy_grad`` (TRL's entropy bonus).

    >>> from transformers import Qwen3Config, Qwen3ForCausalLM
    >>> from trl.trainer.utils import add_fused_lm_head
    >>> model = Qwen3ForCausalLM(Qwen3Config(vocab_size=16, hidden_size=8, head_dim=4,
    ...     intermediate_size=8, num_hidden_layers=1, num_attention_heads=2,
    ...     num_key_value_heads=1))
    >>> add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    >>> ids = torch.tensor([[3, 4, 5, 6]]); labels = torch.tensor([[-100, 4, 5, -100]])
    >>> tiled = model(input_ids=ids, labels=labels, fused_lm_head=True)
    >>> full = full_logits_head(model, 0.7)(input_ids=ids, labels=labels, fused_lm_head=True)
    >>> [torch.allclose(a, b, atol=1e-6) for a, b in ((tiled.log_probs, full.log_probs),
    ...                                                (tiled.entropy, full.entropy))]
    [True, True]
    """

    def head(labels: torch.Tensor | None = None, fused_lm_head: bool = False, **inputs: Any) -> Any:
        if not fused_lm_head:
            return call(**inputs)
        logits = call(**inputs, use_cache=False).logits[:, :-1].float() / temperature  # (b, q-1, V)
        target, real = labels[:, 1:], labels[:, 1:] != -100  # (b, q-1) each
        logp = torch.log_softmax(logits, dim=-1)  # (b, q-1, V)
        lp = logp.gather(-1, target.clamp(min=0)[..., None]).squeeze(-1)  # (b, q-1)
        with torch.enable_grad() if entropy_grad else torch.no_grad():
            entropy = -(logp.exp() * logp).sum(dim=-1)  # (b, q-1)
        return SimpleNamespace(
            log_probs=lp.masked_fill(~real, 0.0), entropy=entropy.masked_fill(~real, 0.0)
        )

    return head


def loss_head(model: Any, vocab_size: int, temperature: float, entropy_grad: bool) -> Call:
    """``model`` itself (TRL's tiled head), or ``full_logits_head`` over it when its vocabulary
    has at most ``SMALL_VOCAB`` tokens."""
    small = vocab_size <= SMALL_VOCAB
    return full_logits_head(model, temperature, entropy_grad) if small else model


def by_prompt(
    call: Call,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    buckets: int,
    extra: dict[str, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, Any]:
    """``by_length`` with each distinct prompt run once: a GRPO group repeats its prompt
    ``num_generations`` times. The prompt columns but the last run once per distinct prompt and
    leave a KV cache; each length-sorted chunk of completions continues from its rows' copies of
    it (the last prompt token goes with the completion: its logits score the first token).

    ``call(**inputs)`` is the model with TRL's ``add_fused_lm_head`` forward; ``extra`` holds the
    unseen variant's 4D ``attention_mask`` ``(B, 1, L, L)`` and ``position_ids`` ``(B, L)``
    (else the 2D mask is used). The same keys, positions and masks as the padded batch, so the
    same numbers up to float rounding. Returns log-probs and entropies ``(B, logits_to_keep)``.

    >>> from transformers import Qwen3Config, Qwen3ForCausalLM
    >>> from trl.trainer.utils import add_fused_lm_head
    >>> model = Qwen3ForCausalLM(Qwen3Config(vocab_size=16, hidden_size=8, head_dim=4,
    ...     intermediate_size=8, num_hidden_layers=1, num_attention_heads=2,
    ...     num_key_value_heads=1))
    >>> add_fused_lm_head(model)
    >>> ids = torch.tensor([[3, 4, 5, 6, 0], [3, 4, 7, 0, 0], [0, 9, 5, 8, 2]])  # 2 + 3 columns
    >>> mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0], [0, 1, 1, 1, 1]])  # 2 prompts
    >>> labels = ids.masked_fill(mask == 0, -100); labels[:, :2] = -100
    >>> padded = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    >>> shared, _ = by_prompt(model, ids, mask, 3, buckets=2)
    >>> torch.allclose(shared, padded.log_probs[:, -3:], atol=1e-6)
    True
    """
    width = input_ids.size(1) - logits_to_keep  # prompt columns (left-padded)
    head = width - 1  # the columns run once per prompt
    kv, inverse = _prompt_cache(call, input_ids, attention_mask, extra, head)
    completion = attention_mask[:, width:].sum(dim=1)  # (B,)
    parts = []
    for chunk in torch.argsort(completion).tensor_split(buckets):  # shortest first
        if len(chunk) == 0:
            continue
        c = max(int(completion[chunk].max()), 1)
        cache, rows = DynamicCache(), inverse[chunk]  # (b,) their prompts
        for layer, (keys, values) in enumerate(kv):
            cache.update(keys[rows], values[rows], layer)  # (b, H, head, D) copies
        inputs = _columns(input_ids, attention_mask, extra, chunk, head, width + c)
        labels = inputs["input_ids"].masked_fill(attention_mask[chunk, head : width + c] == 0, -100)
        res = call(**inputs, cache=cache, labels=labels, fused_lm_head=True)  # (b, c) each
        parts.append((chunk, res.log_probs, res.entropy))
    return _in_batch_order(parts, logits_to_keep)


def _prompt_cache(
    call: Call, input_ids: torch.Tensor, attention_mask: torch.Tensor, extra: dict | None, head: int
) -> tuple[list[tuple[torch.Tensor, ...]], Any]:
    """Keys and values ``(U, H, head, D)`` per layer of each distinct prompt's first ``head``
    columns, and which prompt each row has ``(B,)``."""
    width = head + 1
    rows = torch.cat([input_ids[:, :width], attention_mask[:, :width]], dim=1)  # (B, 2 W)
    _, inverse = torch.unique(rows, dim=0, return_inverse=True)  # (B,)
    batch = torch.arange(len(inverse))
    first = torch.full((int(inverse.max()) + 1,), len(inverse)).scatter_reduce(
        0, inverse, batch, "amin"
    )  # (U,) a row of each prompt
    inputs = _columns(input_ids, attention_mask, extra, first, 0, head)
    cache = call(**inputs, use_cache=True, logits_to_keep=1).cache
    return [(layer.keys, layer.values) for layer in cache.layers], inverse


def _columns(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    extra: dict | None,
    rows: torch.Tensor,
    start: int,
    stop: int,
) -> dict[str, torch.Tensor]:
    """The model's inputs for ``rows``: tokens ``start:stop``, attending to keys ``:stop``."""
    ids = input_ids[rows, start:stop]
    if extra is None:
        return {"input_ids": ids, "attention_mask": attention_mask[rows, :stop]}
    mask = extra["attention_mask"][:, :, start:stop, :stop][rows]  # (b, 1, stop - start, stop)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "position_ids": extra["position_ids"][rows, start:stop],
    }

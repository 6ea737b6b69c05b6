"""Length buckets: a padded batch run as length-sorted chunks, each cut to the columns it uses.

TRL pads a GRPO batch to its longest prompt (on the left) and its longest completion (on the
right), so one long completion makes every row of the batch pay for its length in the loss's
forward and backward. ``by_length`` sorts the rows by length, splits them into ``buckets``
chunks, cuts each chunk to its own columns, runs ``forward`` on it and returns the results in
the batch's order and width (zeros where the batch had padding). Attention never reads padding,
so only the rounding changes: the positions shift by the padding removed, and rotary attention
depends on differences of positions only.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

Forward = Callable[[torch.Tensor, torch.Tensor, int], tuple[torch.Tensor, torch.Tensor | None]]


def by_length(forward: Forward, input_ids: torch.Tensor, attention_mask: torch.Tensor,
              logits_to_keep: int, buckets: int) -> tuple[torch.Tensor, torch.Tensor | None]:
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
    rows, logps, entropies = [], [], []
    for chunk in order.tensor_split(buckets):
        if len(chunk) == 0:
            continue
        a, c = int(prompt[chunk].max()), max(int(completion[chunk].max()), 1)
        cols = slice(width - a, width + c)  # the chunk's own columns
        lp, ent = forward(input_ids[chunk, cols], attention_mask[chunk, cols], c)
        rows.append(chunk)
        logps.append(F.pad(lp, (0, logits_to_keep - c)))  # (b, logits_to_keep)
        entropies.append(None if ent is None else F.pad(ent, (0, logits_to_keep - c)))
    back = torch.argsort(torch.cat(rows))  # (B,) the batch's order
    entropy = None if entropies[0] is None else torch.cat(entropies)[back]
    return torch.cat(logps)[back], entropy

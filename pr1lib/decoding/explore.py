"""RL's exploration of a plan's width (``RolloutConfig.width_temperature``, docs/planworld.md).

A PlanWorld cold start writes plans of two or three deals, and at T = 1 a wider one has a chance
near 1e-6: RL cannot reward what it never samples. With ``width_temperature`` the engine samples
the plan's *width choices* hotter, and only those:

- in a list plan, ``Check (A), (B)``, the token after each item's letter: one more item (``"),"``)
  or not. An unlikely go-on is raised to p^(1/h) / (p^(1/h) + (1-p)^(1/h)) (``widen``); a likely
  one is never lowered;
- in a span plan, ``Check (A)-(C)``, the end letter: the letters are sampled at the hotter
  temperature among themselves, their total chance kept (``spread``).

Everything else is sampled at the rollout's temperature, and the recorded log-probs stay the
policy's (the trainer recomputes them at its temperature): the engine still decides nothing, it
only tries the model's unlikely widths more often.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from pr1lib.decoding.structure import tag_ids
from pr1lib.format import plans


@dataclass(frozen=True)
class WidthTokens:
    """The token ids a plan line's width choices are read from."""

    word: int  # the plan word, "Check": a plan line opens with it
    ends: frozenset[int]  # the tokens that end a plan line: a newline, <Parallel>
    letters: frozenset[int]  # the deal letters A..Z
    go_on: int  # "),": one more list item
    item: int  # " (": a list item's opening, before its letter
    dash: int  # "-" and "(": a span's end letter follows them
    paren: int

    @classmethod
    def of(cls, tokenizer: Any) -> "WidthTokens":
        """The ids in ``tokenizer``; one that writes any of them as several tokens is refused."""
        texts = (plans.PLAN_WORD, "),", " (", "-", "(", *plans.LETTERS)
        ids = [tokenizer.encode(x, add_special_tokens=False) for x in texts]
        if any(len(i) != 1 for i in ids):
            several = [repr(t) for t, i in zip(texts, ids) if len(i) != 1]
            raise ValueError(
                "width_temperature needs a tokenizer that writes the plan's words, marks and "
                f"letters as one token each (PlanWorld's models do); this one splits "
                f"{', '.join(several[:4])}"
            )
        word, go_on, item, dash, paren, *letters = (i[0] for i in ids)
        ends = {*tokenizer.encode("\n", add_special_tokens=False), tag_ids(tokenizer).parallel}
        return cls(word, frozenset(ends), frozenset(letters), go_on, item, dash, paren)


def next_choice(ids: WidthTokens, in_plan: bool, last: int, tok: int) -> tuple[bool, str]:
    """``(in_plan, choice)`` after a row writes ``tok`` (``last`` before it): whether it is in a
    plan line, and which width choice its next token makes: ``"go_on"`` after a list item's
    letter, ``"end"`` after a span's ``-(``, ``""`` none."""
    in_plan = tok == ids.word or (in_plan and tok not in ids.ends)
    if not in_plan:
        return False, ""
    if tok in ids.letters and last == ids.item:
        return True, "go_on"
    return True, "end" if (last, tok) == (ids.dash, ids.paren) else ""


def widen(logits: torch.Tensor, go_on: int, temperature: float, hotter: float) -> torch.Tensor:
    """``logits`` ``(R, V)`` with the chance p of ``go_on`` (at ``temperature``) raised to
    p^(1/h) / (p^(1/h) + (1-p)^(1/h)), h = ``hotter`` / ``temperature``, where that is more: the
    choice of one more item, when unlikely, is sampled hotter; it is never lowered (a likely one
    keeps its chance), and the other tokens keep their ratios.

    >>> out = widen(torch.tensor([[4.0, -5.0, 1.0]]), 1, 1.0, 3.0)  # p = 1.2e-4 -> 0.047
    >>> [round(x, 3) for x in torch.softmax(out, -1)[0].tolist()]  # 0 and 2 keep their ratio
    [0.908, 0.047, 0.045]
    >>> round(float(torch.softmax(widen(torch.tensor([[-5.0, 4.0]]), 1, 1.0, 3.0), -1)[0, 1]), 4)
    0.9999
    """
    lp = torch.log_softmax(logits.float() / temperature, dim=-1)  # (R, V)
    p_log = lp[:, go_on]  # (R,)
    rest_log = torch.log1p(-p_log.exp().clamp(max=1 - 1e-7))  # (R,) log(1 - p)
    odds = p_log - rest_log  # (R,) log(p / (1 - p))
    new_odds = torch.maximum(odds, odds / (hotter / temperature))  # (R,) log(p' / (1 - p'))
    out = lp.clone()  # (R, V) log-probs at temperature: the logits sample_tokens divides by it
    out[:, go_on] = float("-inf")
    out[:, go_on] = torch.logsumexp(out, dim=-1) + new_odds
    return out * temperature


def spread(logits: torch.Tensor, letters: list[int], temperature: float, hotter: float):
    """``logits`` ``(R, V)`` with the ``letters`` sampled at ``hotter`` among themselves, their
    total chance at ``temperature`` kept, the other tokens untouched.

    >>> out = spread(torch.tensor([[0.0, 9.0, 0.0]]), [1, 2], 1.0, 3.0)
    >>> [round(x, 3) for x in torch.softmax(out, -1)[0].tolist()]  # token 0 keeps its chance
    [0.0, 0.952, 0.047]
    """
    lp = torch.log_softmax(logits.float() / temperature, dim=-1)  # (R, V)
    idx = torch.tensor(letters, device=logits.device)  # (L,)
    mass = torch.logsumexp(lp[:, idx], dim=-1, keepdim=True)  # (R, 1) the letters' total
    hot = torch.log_softmax(lp[:, idx] * (temperature / hotter), dim=-1)  # (R, L) among them
    out = lp.clone()
    out[:, idx] = mass + hot
    return out * temperature


def hotter(logits: torch.Tensor, choices: list[str], ids: WidthTokens, temperature: float, cfg):
    """``logits`` ``(R, V)`` with each row's width choice (``choices``, ``next_choice``'s) sampled
    at ``cfg.width_temperature``; rows with none are untouched."""
    for kind in ("go_on", "end"):
        rows = torch.tensor([c == kind for c in choices], device=logits.device)  # (R,)
        if not rows.any():
            continue
        logits = logits.clone()
        if kind == "go_on":
            logits[rows] = widen(logits[rows], ids.go_on, temperature, cfg.width_temperature)
        else:
            letters = sorted(ids.letters)
            logits[rows] = spread(logits[rows], letters, temperature, cfg.width_temperature)
    return logits

"""PlanWorld: WideWorld's lettered deals, where the model writes its own plan and RL may widen it
(docs/planworld.md).

A problem lists lettered deals (WideWorld's ``Deals``) and asks which one a price names:
``... (A) 4 and 9, (B) 6 and 8, (C) 5 and 7. Mia pays 14 coins for one deal. Which deal is it?``
(answer ``B``). Some questions narrow the search to a span, ``... for one of deals (C) to (E).``
Exactly one candidate sums to the total. The tiers differ only in how many candidates there are:

- ``easy``: WideWorld's forward items on one named deal (its sum, a difference, a check);
- ``small``: the cold start's searches, plans of 2 or 3 deals, in three kinds: a whole list of 2
  or 3 deals; a span of 2 or 3 deals inside a list of 4 to 10 (so plans and paths name letters
  past C); a list of 4 to 10 deals searched in 2 or 3 deals in a row (``plan_window``) that hold
  the answer, anywhere in the list (a partial plan: the teacher's plans never name more than
  ``PLANNED`` deals, and a path of any letter is trained on a question that names no span);
- ``w2``, ``w3``, ``w4``, ``w6``, ``hard``: whole lists of 2, 3, 4, 6 and 10 deals;
- ``mixed``: whole lists of 2 to 10 deals, each width as likely (regime 10's RL problems: a plan
  must fit its list, so RL cannot simply widen every plan to ten).

Every searching form opens with the model's plan (``pr1lib.format.plans``), ``Check (A)-(C)``:

- **parallel** (the teacher's trace): the plan, then one block whose paths check the plan's deals,
  one each, path i opening with its deal's label; the summary copies the letter that checked out;
- **serial**: the plan, then the same checks in one stream, stopping at the first ✓;
- **plain**: the right deal's check alone (the no-search control).

The forked engine reads the plan the model wrote and forces each path's label from it
(``header_style="plan"``): width and assignment are the model's. The cold start holds plans of
two and three items only; RL runs on the ten-deal items, where a plan that names more deals
finds the answer more often.

>>> rec = generate(1, "hard", "test", seed=0)[0]
>>> len(parse_question(rec["question"])[2]), rec["answer"].splitlines()[-1][:5]
(10, '#### ')
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import replace

from pr1lib.format.grammar import linearize, parse
from pr1lib.format.plans import LETTERS, plan_line
from pr1lib.format.prompts import linear_solution
from pr1lib.worlds import register, wideworld
from pr1lib.worlds.tasks import check_request, distinct_records
from pr1lib.worlds.teachers import SearchTeacher
from pr1lib.worlds.wideworld import (
    GOODS,
    MISSES,
    NO,
    OK,
    TOP,
    Deals,
    _who,
    checked_deals,
    easy_problem,
)

TIER_WIDTHS = {"w2": 2, "w3": 3, "w4": 4, "w6": 6, "hard": 10}  # candidates per search item
MIXED = range(2, 11)  # the mixed tier's widths, one drawn per problem
TIERS = ("easy", "small", *TIER_WIDTHS, "mixed")
MOST = 10  # deals in the longest list (A)..(J): the widest plan
# the teacher writes three or more deals in a row as a span, Check (A)-(C): a width is then one
# end letter, which the cold start has seen end spans anywhere in the list and RL can move; as a
# list its 4th item was a choice the cold start never made (docs/planworld.md, regimes 4 and 9)
SPANS = True
PLANNED = 3  # the teacher's plans name at most this many deals: the first ones of a longer list
# the plan-removed control (docs/planworld.md): with no plan to read, the engine forks this many
# paths and forces nothing into them; PLANNED, the widest plan the cold start holds, so its blocks
# are as wide as the planned arm's widest and only the plan is missing
BLIND_PATHS = PLANNED
BLIND = {"num_paths": BLIND_PATHS, "header_style": "none"}  # its rollouts' layout (RL and eval)


def line(j: int, pair: tuple[int, int], total: int) -> str:
    """The check of deal ``j``: its sum beside the total, and its letter when it checks out.

    >>> line(1, (6, 8), 14), line(0, (4, 9), 14)
    ('(B) 6+8=14 vs 14 ✓ B', '(A) 4+9=13 vs 14 ✗')
    """
    a, b = pair
    head = f"({LETTERS[j]}) {a}+{b}={a + b} vs {total}"
    return f"{head} {OK} {LETTERS[j]}" if a + b == total else f"{head} {NO}"


# --------------------------------------------------------------------------- problems
def _deals(rng: random.Random, n: int) -> tuple[list[tuple[int, int]], int]:
    """``(deals, total)``: ``n`` distinct one-digit pairs (cheap < dear), exactly one of them
    (deals[0]; the caller places it) summing to ``total``, the others near it."""
    while True:
        a = rng.randint(1, TOP - 1)
        b = rng.randint(a + 1, TOP)
        total, deals = a + b, [(a, b)]
        for _ in range(50 * n):
            if len(deals) == n:
                return deals, total
            near = total + rng.choice(MISSES) * rng.choice((-1, 1))
            lows = [x for x in range(1, TOP) if x < near - x <= TOP]
            pair = (x := rng.choice(lows), near - x) if lows else None
            if pair and pair not in deals:
                deals.append(pair)


def search_problem(rng: random.Random, n: int, span: tuple[int, int] | None = None) -> dict:
    """A search over ``n`` deals, or over the deals ``span`` (first, last index) names."""
    lo, hi = span or (0, n - 1)
    deals, total = _deals(rng, n)
    right, wrong = rng.randint(lo, hi), deals[1:]
    rng.shuffle(wrong)
    deals = wrong[:right] + [deals[0]] + wrong[right:]
    names, (who, _) = rng.choice(GOODS), _who(rng)
    where = f"one of deals ({LETTERS[lo]}) to ({LETTERS[hi]})" if span else "one deal"
    question = (
        f"{Deals(names, tuple(deals)).header()} {who} pays {total} coins for {where}. "
        "Which deal is it?"
    )
    answer = f"{line(right, deals[right], total)}\n#### {LETTERS[right]}"
    return {"question": question, "answer": answer}


def small_problem(rng: random.Random) -> dict:
    """The cold start's search: a whole list of 2 or 3 deals, a span of 2 or 3 inside a longer
    list, or a longer list its teacher searches in 2 or 3 deals that hold the answer
    (``plan_window``)."""
    kind, width = rng.randrange(3), rng.choice((2, 3))
    if kind == 0:
        return search_problem(rng, width)
    n = rng.randint(PLANNED + 1, MOST)
    if kind == 2:
        return search_problem(rng, n)
    lo = rng.randint(0, n - width)
    return search_problem(rng, n, (lo, lo + width - 1))


def mixed_problem(rng: random.Random) -> dict:
    """A whole list of 2 to 10 deals, each width as likely (the mixed tier)."""
    return search_problem(rng, rng.choice(MIXED))


def generate(n: int, tier: str = "easy", split: str = "train", seed: int = 0) -> list[dict]:
    """``n`` distinct PlanWorld records of ``tier`` from ``split`` (splits never overlap).

    >>> a = generate(3, "w4", "train", seed=7)
    >>> a == generate(3, "w4", "train", seed=7), [len(parse_question(r["question"])[2]) for r in a]
    (True, [4, 4, 4])
    """
    check_request(n, tier, split, TIERS)
    rng = random.Random(f"planworld/{tier}/{split}/{seed}")
    make = {"easy": easy_problem, "small": small_problem, "mixed": mixed_problem}.get(tier)
    if make is None:  # a whole list of the tier's width
        return distinct_records(n, split, lambda: search_problem(rng, TIER_WIDTHS[tier]))
    return distinct_records(n, split, lambda: make(rng))


# ------------------------------------------------------------------- reading a question back
_DEAL_RE = re.compile(r"\(([A-Z])\) (\d+) and (\d+)")
_ASK_RE = re.compile(r"pays (\d+) coins for (?:one deal|one of deals \(([A-Z])\) to \(([A-Z])\))\.")


def parse_question(question: str) -> tuple[list[tuple[int, int]], int, list[int]] | None:
    """``(deals, total, candidates)`` of a search question (candidates: deal indices), else
    ``None``.

    >>> parse_question("(A) 4 and 9, (B) 6 and 8, (C) 5 and 7. Al pays 14 coins for one of "
    ...                "deals (B) to (C). Which deal is it?")
    ([(4, 9), (6, 8), (5, 7)], 14, [1, 2])
    """
    found, ask = _DEAL_RE.findall(question), _ASK_RE.search(question)
    if not found or ask is None or "".join(j for j, _, _ in found) != LETTERS[: len(found)]:
        return None
    deals = [(int(a), int(b)) for _, a, b in found]
    lo, hi = (LETTERS.index(ask[2]), LETTERS.index(ask[3])) if ask[2] else (0, len(deals) - 1)
    return deals, int(ask[1]), list(range(lo, min(hi, len(deals) - 1) + 1))


def solve(deals: list[tuple[int, int]], total: int, candidates: list[int]) -> int | None:
    """The one candidate that sums to ``total`` (``None`` unless exactly one does)."""
    hits = [j for j in candidates if sum(deals[j]) == total]
    return hits[0] if len(hits) == 1 else None


def block_shares(question: str, text: str) -> list[bool]:
    """Per block of ``text``, whether its paths took distinct, correct shares: each path checks
    one candidate, with that deal's own prices, and no two paths the same one (however many
    paths the model planned; a block of no paths takes none); ``[]`` for a question that is not
    a search.

    >>> q = generate(1, "w3", "test", seed=3)[0]["question"]
    >>> block_shares(q, parallel_trace(*parse_question(q)))
    [True]
    >>> block_shares(q, "<Parallel><Path>(A) 1+2=3</Path><Path>(A) 1+2=3</Path></Parallel>")
    [False]
    >>> block_shares(q, "Check (A), (B)\\n<Parallel>")  # no path: no share taken (a bad plan)
    [False]
    """
    parsed = parse_question(question)
    if parsed is None:
        return []
    deals, _, candidates = parsed
    verdicts = []
    for block in parse(text).blocks:
        firsts = [checked_deals(path.text)[:1] for path in block.paths]
        picks = [f[0] for f in firsts if f]
        fine = 0 < len(picks) == len(firsts) and len({j for j, _ in picks}) == len(picks)
        verdicts.append(fine and all(j in candidates and deals[j] == p for j, p in picks))
    return verdicts


def checks_hold(question: str, text: str) -> bool:
    """Whether every check ``text`` writes adds the prices of the deal it names, on any path or
    line (a letter the list does not hold fails); ``True`` for a question that is not a search.

    >>> q = generate(1, "w3", "test", seed=3)[0]["question"]
    >>> checks_hold(q, parallel_trace(*parse_question(q))), checks_hold(q, "(Z) 1+2=3 vs 3 ✓")
    (True, False)
    """
    parsed = parse_question(question)
    if parsed is None:
        return True
    deals = parsed[0]
    return all(j < len(deals) and deals[j] == p for j, p in checked_deals(text))


# --------------------------------------------------------------------------- the three forms
def parallel_trace(deals: list[tuple[int, int]], total: int, candidates: list[int]) -> str:
    """The plan, one block of one path per candidate, a summary holding the letter.

    >>> print(parallel_trace([(4, 9), (6, 8)], 14, [0, 1]))
    Check (A), (B)
    <Parallel><Path>(A) 4+9=13 vs 14 ✗</Path><Path>(B) 6+8=14 vs 14 ✓ B</Path></Parallel>
    <Summary>B</Summary>
    Final Answer: B
    """
    letter = LETTERS[solve(deals, total, candidates)]
    paths = "".join(f"<Path>{line(j, deals[j], total)}</Path>" for j in candidates)
    plan = plan_line([LETTERS[j] for j in candidates], span=SPANS)
    return (
        f"{plan}\n<Parallel>{paths}</Parallel>\n<Summary>{letter}</Summary>\nFinal Answer: {letter}"
    )


def serial_trace(deals: list[tuple[int, int]], total: int, candidates: list[int]) -> str:
    """The same plan and checks as one stream, stopping at the first ✓.

    >>> print(serial_trace([(4, 9), (6, 8), (5, 7)], 14, [0, 1, 2]))
    Check (A)-(C)
    (A) 4+9=13 vs 14 ✗
    (B) 6+8=14 vs 14 ✓ B
    Final Answer: B
    """
    right = solve(deals, total, candidates)
    checks = [line(j, deals[j], total) for j in candidates[: candidates.index(right) + 1]]
    plan = plan_line([LETTERS[j] for j in candidates], span=SPANS)
    return "\n".join([plan, *checks, f"Final Answer: {LETTERS[right]}"])


def plan_width(question: str) -> int:
    """How many deals the teacher's partial plan of a long list names: 2 or 3, fixed by the
    question (so plans on long lists vary in width, and a model that imitates them does too)."""
    return 2 + hashlib.sha256(question.encode()).digest()[0] % 2


def plan_window(question: str, right: int, n: int) -> range:
    """The deals the teacher's partial plan of a list of ``n`` names: ``plan_width`` of them in a
    row holding the answer ``right``, where in the list fixed by the question. A model cannot know
    where the answer lies: on a long list it learns plans that start anywhere, and paths of every
    letter on questions that name no span.

    >>> all(7 in plan_window(f"q{i}", 7, 10) for i in range(20))
    True
    >>> sorted({plan_window(f"q{i}", 7, 10).start for i in range(40)})  # every window holding (H)
    [5, 6, 7]
    """
    width = plan_width(question)
    starts = range(max(0, right - width + 1), min(right, n - width) + 1)
    lo = starts[hashlib.sha256(question.encode()).digest()[1] % len(starts)]
    return range(lo, lo + width)


def _solved(question: str):
    """``(deals, total, planned)`` of a search question: its candidates, or on a longer list the
    teacher's partial plan (``plan_window``); ``None``: not a search."""
    parsed = parse_question(question)
    if parsed is None:
        return None
    deals, total, candidates = parsed
    if len(candidates) > PLANNED:
        window = plan_window(question, solve(deals, total, candidates), len(candidates))
        candidates = [candidates[j] for j in window]
    return deals, total, candidates


def serial_solution(question: str, completion: str) -> str:
    """The serial form of an item whose parallel trace is ``completion``."""
    parsed = _solved(question)
    return serial_trace(*parsed) if parsed else linearize(completion)


def plain_completion(question: str, completion: str) -> str:
    """The no-search solution: the right deal's check alone (a model can only guess it)."""
    parsed = parse_question(question)
    right = solve(*parsed) if parsed is not None else None
    if right is None:
        return linearize(completion)
    deals, total, _ = parsed
    return linear_solution(f"{line(right, deals[right], total)}\n#### {LETTERS[right]}")


def answer_mode(text: str) -> str:
    """``"guess"`` for a completion that checks at most one deal and opens no block, else
    ``"search"``."""
    return "search" if "<Parallel>" in text or text.count(" vs ") > 1 else "guess"


WORLD_VERSION = 6  # bump when the traces change: part of the teacher's name (cache key)


class PlanTeacher(SearchTeacher):
    """PlanWorld's rule teacher: ``parallel_trace`` of its plan on search items its plan solves,
    the plain solution on easy ones (deterministic).

    >>> rec = {"id": "p1", **generate(1, "small", seed=2)[0]}
    >>> PlanTeacher().generate([{**rec, "answer_text": rec["answer"]}])[0]["text"][:6]
    'Check '
    """

    prefix, knobs = "plan", (WORLD_VERSION, MOST)

    def search(self, question: str) -> str | None:
        parsed = _solved(question)
        return parallel_trace(*parsed) if parsed is not None else None


# PlanWorld's settings (docs/planworld.md): WideWorld's lengths, presets and base model (the same
# deals, the same pretraining text), with paths laid out by the model's plan (at most MOST), the
# cold start on easy and small items only and both RL stages on the ten-deal items; RL at lr 1e-4,
# the rate at which its plans widened (WideWorld's 1e-5 guards paths the engine assigns)
WIDE = wideworld.WORLD
WORLD = register(
    replace(
        WIDE,
        name="planworld",
        title="PlanWorld",
        generate=generate,
        rule_teacher=PlanTeacher,
        plain_solution=plain_completion,
        serial_solution=serial_solution,
        answer_mode=answer_mode,
        block_splits=block_shares,
        checks_hold=checks_hold,
        starts_from=(WIDE.name,),
        tiers=TIERS,
        tier_labels={
            "easy": WIDE.tier_labels["easy"],
            "small": "search 2 or 3 deals",
            **{t: f"search {w} deals" for t, w in TIER_WIDTHS.items()},
            "mixed": "search 2 to 10 deals",
        },
        checkpoints={"base": WIDE.checkpoints["base"], "unseen": "data/planworld-sft-unseen"},
        budgets={**WIDE.budgets, "num_paths": MOST, "header_style": "plan"},
        # regime 9 (docs/planworld.md): in every arm a letter pays only where a check marked it
        stage_presets={**WIDE.stage_presets, "learning_rate": 1e-4, "grader": "checked"},
        # the forked engine samples the end of the unseen arm's span plans hotter in RL (the
        # trainer scores the policy's own log-probs); a serial plan is sampled at T = 1
        variant_presets={**WIDE.variant_presets, "unseen": {"width_temperature": 5.0}},
        sft_presets={**WIDE.sft_presets, "source": "planworld-easy+planworld-small"},
        # unseen paths do not read the plan (hidden plans): a path's context is the same at any
        # width, so a wider plan than the cold start's still opens paths that check their deals
        sft_variant_presets={"unseen": {"hide_plan": True}},
        # notebook 06's short run: the committed runs' 8 prompts a step, their first 30 of 300 steps
        notebook_presets={3: {"tiny": {"per_device_train_batch_size": 64, "max_steps": 30}}},
    )
)

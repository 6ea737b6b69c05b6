"""TinyGSM: procedural grade-school word problems shaped exactly like GSM8K records.

A problem is a little story about one person's pile of things: a start (``has 12 apples`` or
``buys 3 bags of 4 apples``) followed by events (buys more, gives some away, splits into equal
piles, ...). Each arithmetic step becomes one answer line with a GSM8K calculator annotation
``<<a+b=c>>`` and the record ends with ``#### N``, so every later stage reads TinyGSM and real
GSM8K through the same code (``pr1lib.format.prompts.split_gsm8k_answer``).

Two tiers: ``easy`` (1-2 steps, small numbers; the GSM8K analogue) and ``hard`` (3-5 steps,
larger numbers; the DAPO analogue). Each tier has a ``train`` and a held-out ``test`` split; a
question belongs to ``test`` iff a hash of its text falls in the test bucket, so the splits can
never overlap, whatever the seed. Simplification relative to the paper: the real tasks are
GSM8K/DAPO-Math; TinyGSM only keeps their answer format and their step structure.

>>> rec = generate(1, "easy", "test", seed=0)[0]
>>> sorted(rec)
['answer', 'question']
>>> rec["answer"].splitlines()[-1].startswith("#### ")
True
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Callable

TIERS = ("easy", "hard")
SPLITS = ("train", "test")
TEST_BUCKETS = 5  # a question is held out iff hash(question) % 25 < TEST_BUCKETS (20%)

NAMES = (
    ("Tom", "He"),
    ("Ben", "He"),
    ("Sam", "He"),
    ("Leo", "He"),
    ("Max", "He"),
    ("Jack", "He"),
    ("Omar", "He"),
    ("Ravi", "He"),
    ("Ann", "She"),
    ("Mia", "She"),
    ("Eva", "She"),
    ("Lily", "She"),
    ("Zoe", "She"),
    ("Sara", "She"),
    ("Nina", "She"),
    ("Rosa", "She"),
)
ITEMS = (
    "apples",
    "pens",
    "books",
    "cards",
    "shells",
    "stamps",
    "eggs",
    "cookies",
    "marbles",
    "stickers",
    "coins",
    "flowers",
)
FRIENDS = ("a friend", "a neighbor", "a cousin", "the teacher", "the class")


@dataclass(frozen=True)
class TierSpec:
    """Step counts and number ranges of one tier."""

    steps: tuple[int, int]  # inclusive range of answer lines (arithmetic steps)
    start: tuple[int, int]  # starting amount
    delta: tuple[int, int]  # amounts added / removed
    factor: tuple[int, int]  # multipliers and divisors
    per_bag: tuple[int, int]  # items per bag
    cap: int  # no intermediate amount exceeds this


SPECS = {
    "easy": TierSpec(
        steps=(1, 2), start=(2, 40), delta=(1, 30), factor=(2, 5), per_bag=(2, 12), cap=200
    ),
    "hard": TierSpec(
        steps=(3, 5), start=(10, 150), delta=(5, 99), factor=(2, 9), per_bag=(3, 25), cap=999
    ),
}


def _line(text: str, a: int, op: str, b: int, result: int, unit: str) -> str:
    """One GSM8K-style step line: ``text a+b = <<a+b=c>>c unit.``"""
    expr = f"{a}{op}{b}"
    return f"{text} {expr} = <<{expr}={result}>>{result} {unit}."


def _start(rng: random.Random, spec: TierSpec, who: str, item: str) -> tuple[str, list[str], int]:
    """The opening sentence, its step lines (0 or 1) and the starting amount."""
    if rng.random() < 0.3:
        bags, each = rng.randint(*spec.factor), rng.randint(*spec.per_bag)
        total = bags * each
        sentence = f"{who} buys {bags} bags of {item} with {each} {item} in each bag."
        return sentence, [_line(f"{who} buys", bags, "*", each, total, item)], total
    amount = rng.randint(*spec.start)
    return f"{who} has {amount} {item}.", [], amount


def _event(rng: random.Random, spec: TierSpec, pron: str, item: str, x: int, room: int):
    """One event applied to the pile ``x``: (sentence, step lines, new amount), or None."""
    kinds = ("add", "sub", "mul", "div", "bags") if room >= 2 else ("add", "sub", "mul", "div")
    kind = rng.choice(kinds)
    low = pron.lower()
    if kind == "add":
        b = rng.randint(*spec.delta)
        verb = rng.choice(("buys", "finds", "gets"))
        return (
            f"{pron} {verb} {b} more {item}.",
            [_line(f"{pron} has", x, "+", b, x + b, item)],
            x + b,
        )
    if kind == "sub":
        if x < 2:
            return None
        b = rng.randint(1, min(x - 1, spec.delta[1]))
        sentence = f"{pron} gives {b} {item} to {rng.choice(FRIENDS)}."
        return sentence, [_line(f"{pron} has", x, "-", b, x - b, f"{item} left")], x - b
    if kind == "mul":
        k = rng.randint(*spec.factor)
        sentence = f"Then the number of {item} {low} has becomes {k} times as large."
        return sentence, [_line(f"{pron} has", x, "*", k, x * k, item)], x * k
    if kind == "div":
        divisors = [k for k in range(spec.factor[0], spec.factor[1] + 1) if x % k == 0 and x > k]
        if not divisors:
            return None
        k = rng.choice(divisors)
        sentence = f"{pron} splits the {item} into {k} equal piles and keeps one pile."
        return sentence, [_line("Each pile has", x, "/", k, x // k, item)], x // k
    bags, each = rng.randint(*spec.factor), rng.randint(*spec.per_bag)
    sentence = f"{pron} buys {bags} bags with {each} {item} in each bag."
    lines = [
        _line("The bags hold", bags, "*", each, bags * each, item),
        _line(f"{pron} has", x, "+", bags * each, x + bags * each, item),
    ]
    return sentence, lines, x + bags * each


def make_problem(rng: random.Random, tier: str = "easy") -> dict:
    """One random TinyGSM record of ``tier`` drawn from ``rng`` (no split filtering).

    >>> rec = make_problem(random.Random(1), "hard")
    >>> 3 <= rec["answer"].count("<<") <= 5
    True
    """
    spec = SPECS[tier]
    (who, pron), item = rng.choice(NAMES), rng.choice(ITEMS)
    target = rng.randint(*spec.steps)
    sentence, lines, x = _start(rng, spec, who, item)
    sentences = [sentence]
    while len(lines) < target:
        event = _event(rng, spec, pron, item, x, target - len(lines))
        if event is None or event[2] > spec.cap:
            continue
        sentences.append(event[0])
        lines.extend(event[1])
        x = event[2]
    question = " ".join(sentences) + f" How many {item} does {who} have now?"
    return {"question": question, "answer": "\n".join([*lines, f"#### {x}"])}


def split_of(question: str) -> str:
    """``"test"`` or ``"train"``: a fixed function of the question text, so splits never overlap.

    >>> split_of("Tom has 3 apples. How many apples does Tom have now?") in SPLITS
    True
    """
    digest = int(hashlib.sha256(question.encode()).hexdigest()[:8], 16)
    return "test" if digest % 25 < TEST_BUCKETS else "train"


# the most problems one request generates: more than any stage or study asks for (a few seconds
# and tens of MB); beyond it a typo such as --n 100000000 would grow memory for minutes in silence
MAX_PROBLEMS = 100_000


def check_request(n: int, tier: str, split: str, tiers: tuple[str, ...] = TIERS) -> None:
    """Refuse a ``generate`` request any world would misread: an unknown tier or split, or an
    ``n`` that is not a whole number from 0 to ``MAX_PROBLEMS`` (one ``ValueError`` line);
    ``tiers``: the world's own, where it has more than easy and hard.

    >>> check_request(2, "hard", "test")
    >>> check_request(-5, "easy", "train")
    Traceback (most recent call last):
    ...
    ValueError: n must be a whole number of 0 or more, got -5
    """
    if tier not in tiers or split not in SPLITS:
        raise ValueError(
            f"tier must be one of {tiers} and split one of {SPLITS}; got {tier!r}, {split!r}"
        )
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n must be a whole number of 0 or more, got {n!r}")
    if n > MAX_PROBLEMS:
        raise ValueError(f"n={n} problems: a world generates at most {MAX_PROBLEMS:,} per request")


def distinct_records(n: int, split: str, make: Callable[[], dict]) -> list[dict]:
    """The first ``n`` records ``make()`` draws whose question is new and falls in ``split``
    (``split_of``): the loop every world's ``generate`` runs on its own seeded draws.

    >>> rng = random.Random(0)
    >>> len(distinct_records(3, "train", lambda: make_problem(rng, "easy")))
    3
    """
    records: list[dict] = []
    seen: set[str] = set()
    while len(records) < n:
        record = make()
        question = record["question"]
        if question in seen or split_of(question) != split:
            continue
        seen.add(question)
        records.append(record)
    return records


def generate(n: int, tier: str = "easy", split: str = "train", seed: int = 0) -> list[dict]:
    """``n`` distinct TinyGSM records of ``tier`` from ``split``; the same arguments give the same
    list.

    >>> a = generate(3, "easy", "train", seed=7)
    >>> a == generate(3, "easy", "train", seed=7), len({r["question"] for r in a})
    (True, 3)
    """
    check_request(n, tier, split)
    rng = random.Random(f"tinygsm/{tier}/{split}/{seed}")
    return distinct_records(n, split, lambda: make_problem(rng, tier))

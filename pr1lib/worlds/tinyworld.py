"""TinyWorld: a shop where checking an answer is much easier than finding it (a verification gap),
the world where a ``<Parallel>`` block pays (docs/tinyworld.md).

Every problem opens with two price lists, e.g. ``Toys cost 7 or 12 coins. Books cost 40 or 46
coins.`` Two tiers, both in GSM8K's record shape (``<<a+b=c>>`` lines, ``#### N``), so every
stage reads them unchanged:

- ``easy`` (forward, 1-2 steps): add two given prices, count the change, subtract two given
  prices, or check whether two given prices make a given total (``check: 53 vs 52 ✗``, 1 or 0).
- ``hard`` (search): ``Mia buys one toy and one book and pays 52 coins. How much more does the
  book cost than the toy?`` Exactly one pair of prices adds up to the total. *Finding* it is a
  search over the 2 x 2 pairs; *checking* a guess is one addition and a comparison: ``Toy 12,
  book 40: 12+40=<<12+40=52>>52. check: 52 vs 52 ✓``. The answer (book minus toy) needs the whole
  pair, so a blind guess is right 1 time in 4, and trying two guesses side by side in a
  ``<Parallel>`` block and keeping the one whose check passes pays; on easy items a block can only
  do the same work twice (pure overhead).

Why the check compares two adjacent numbers and hard items ask for a difference (earlier designs
the tiny model could not learn, or a blind guess could pass): docs/tinyworld.md, design notes.

``WorldTeacher`` writes the cold-start traces: on hard items the block splits the search
(``search_block``): each path fixes one cheap price and checks it against both dear prices, so
the two paths try all four pairs and one finds the pair that checks out (written from the prompt
alone, never from the answer); the summary names it, and the answer line follows; on easy items
both paths solve the item (a first sum, terms swapped), the summary states their result.
``plain_completion`` is the no-block solution of the same item (the plain baseline, the half-plain
start). The block always opens the response: "force a block" means "start with ``<Parallel>``".

>>> rec = generate(1, "hard", "test", seed=0)[0]
>>> sorted(rec), rec["answer"].splitlines()[-1].startswith("#### ")
(['answer', 'question'], True)
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

from pr1lib.format.grammar import linearize
from pr1lib.format.prompts import linear_solution, split_gsm8k_answer
from pr1lib.worlds import World, register
from pr1lib.worlds.tasks import NAMES, check_request, distinct_records
from pr1lib.worlds.teachers import RuleTeacher, make_trace

TIERS = ("easy", "hard")
# (singular, plural) of the two lists; the first list is cheap, the second dearer
GOODS = (
    (("toy", "toys"), ("book", "books")),
    (("cake", "cakes"), ("drink", "drinks")),
    (("pen", "pens"), ("bag", "bags")),
    (("hat", "hats"), ("scarf", "scarves")),
)
LOW, HIGH = (2, 25), (30, 70)  # price ranges of the two lists: every book is dearer than every toy
LIST_SIZE = 2  # prices per list: 2 x 2 pairs, one of which makes the total
OK, NO = "✓", "✗"


@dataclass(frozen=True)
class Shop:
    """The two price lists of a problem: ``names[i]`` is ``(singular, plural)`` of list ``i``."""

    names: tuple[tuple[str, str], tuple[str, str]]
    prices: tuple[tuple[int, ...], tuple[int, ...]]

    def header(self) -> str:
        """``Toys cost 7 or 12 coins. Books cost 40 or 46 coins.``"""
        parts = [
            f"{plural.capitalize()} cost {_listing(p)} coins."
            for (_, plural), p in zip(self.names, self.prices)
        ]
        return " ".join(parts)


def _listing(prices: tuple[int, ...]) -> str:
    return ", ".join(map(str, prices[:-1])) + f" or {prices[-1]}"


def _draw_prices(rng: random.Random, span: tuple[int, int], n: int, avoid: set[int]) -> list[int]:
    """``n`` distinct prices from ``span``, none in ``avoid``."""
    pool = [p for p in range(span[0], span[1] + 1) if p not in avoid]
    return rng.sample(pool, n)


def _unique(lists: list[list[int]], pair: tuple[int, int]) -> bool:
    """Only ``pair`` makes its sum, and no other pair has its difference (one answer, and a wrong
    pair never lands on it by luck)."""
    pairs = [(a, b) for a in lists[0] for b in lists[1]]
    return (
        sum(a + b == sum(pair) for a, b in pairs) == 1
        and sum(b - a == pair[1] - pair[0] for a, b in pairs) == 1
    )


def _shop(rng: random.Random, pair: tuple[int, int] | None = None) -> Shop:
    """A random shop; with ``pair = (a, b)`` it holds a on list 0 and b on list 1 and
    ``_unique``."""
    names = rng.choice(GOODS)
    while True:
        lists = [_draw_prices(rng, span, LIST_SIZE, set()) for span in (LOW, HIGH)]
        if pair is not None:
            lists = [
                [x] + _draw_prices(rng, span, LIST_SIZE - 1, {x})
                for x, span in zip(pair, (LOW, HIGH))
            ]
            if not _unique(lists, pair):
                continue
        for prices in lists:
            rng.shuffle(prices)
        return Shop(names, (tuple(lists[0]), tuple(lists[1])))


def _ann(a: int, op: str, b: int) -> str:
    """``a+b=<<a+b=c>>c`` (true by construction)."""
    c = a + b if op == "+" else a - b
    return f"{a}{op}{b}=<<{a}{op}{b}={c}>>{c}"


def check_line(value: int, total: int) -> str:
    """The check of a guess: the sum it gives next to the total it must give.

    >>> check_line(52, 52), check_line(53, 52)
    ('check: 52 vs 52 ✓', 'check: 53 vs 52 ✗')
    """
    return f"check: {value} vs {total} {OK if value == total else NO}"


def try_line(shop: Shop, total: int, pair: tuple[int, int]) -> str:
    """One guess: a price from each list (the cheap item first), their sum, the check.

    >>> try_line(Shop(GOODS[0], ((7, 12), (40, 46))), 52, (12, 40))
    'Toy 12, book 40: 12+40=<<12+40=52>>52. check: 52 vs 52 ✓'
    >>> try_line(Shop(GOODS[0], ((7, 12), (40, 46))), 52, (7, 46))
    'Toy 7, book 46: 7+46=<<7+46=53>>53. check: 53 vs 52 ✗'
    """
    (one, _), (other, _) = shop.names
    x, y = pair
    return f"{one.capitalize()} {x}, {other} {y}: {_ann(x, '+', y)}. {check_line(x + y, total)}"


def more_line(pair: tuple[int, int]) -> str:
    """The answer step: how much more the dear item costs. ``more_line((12, 40))`` ->
    ``'40-12=<<40-12=28>>28 more.'``"""
    return f"{_ann(pair[1], '-', pair[0])} more."


# --------------------------------------------------------------------------- problems
def _who(rng: random.Random) -> tuple[str, str]:
    who, pron = rng.choice(NAMES)
    return who, pron.lower()


def hard_problem(rng: random.Random) -> dict:
    """``... buys one toy and one book and pays T coins. How much more does the book cost than
    the toy?`` (a search over the pairs).

    >>> rec = hard_problem(random.Random(3))
    >>> "pays" in rec["question"], OK in rec["answer"]
    (True, True)
    """
    a, b = rng.randint(*LOW), rng.randint(*HIGH)
    shop, (who, _) = _shop(rng, (a, b)), _who(rng)
    (one, _), (other, _) = shop.names
    question = (
        f"{shop.header()} {who} buys one {one} and one {other} and pays {a + b} coins. "
        f"How much more does the {other} cost than the {one}?"
    )
    return {"question": question, "answer": hard_answer(question)}


def hard_answer(question: str) -> str:
    """The plain (no-block) GSM8K-style solution of a hard question: one guess that checks out,
    then the answer step.

    >>> print(hard_answer("Toys cost 7 or 12 coins. Books cost 40 or 46 coins. Tom buys one toy "
    ...                   "and one book and pays 52 coins. How much more does the book cost "
    ...                   "than the toy?"))
    Toy 12, book 40: 12+40=<<12+40=52>>52. check: 52 vs 52 ✓
    40-12=<<40-12=28>>28 more.
    #### 28
    """
    shop, total = parse_hard(question)
    pair = solve_pair(shop, total)
    return f"{try_line(shop, total, pair)}\n{more_line(pair)}\n#### {pair[1] - pair[0]}"


def easy_problem(rng: random.Random) -> dict:
    """A forward item on two given prices: their sum, the change, how much more the dear one
    costs, or whether they make a given total (1 or 0; a wrong total is off in the units or the
    tens digit, so the check reads both).

    >>> [easy_problem(random.Random(s))["answer"].count("<<") for s in range(4)]
    [2, 1, 1, 2]
    """
    shop, (who, pron) = _shop(rng), _who(rng)
    a, b = rng.choice(shop.prices[0]), rng.choice(shop.prices[1])
    (one, _), (other, _) = shop.names
    buys = f"{who} buys the {a}-coin {one} and the {b}-coin {other}"
    kind = rng.choice(("sum", "change", "more", "check"))
    if kind == "sum":
        question = f"{buys}. How many coins does {pron} pay?"
        lines, final = [f"{_ann(a, '+', b)} coins."], a + b
    elif kind == "change":
        paid = a + b
        change = rng.randint(1, max(1, min(40, 99 - paid)))  # two-digit amounts where possible
        question = f"{who} has {paid + change} coins. {buys}. How many coins are left?"
        lines = [f"{_ann(a, '+', b)} coins.", f"{_ann(paid + change, '-', paid)} coins left."]
        final = change
    elif kind == "more":
        question = f"{buys}. How much more does the {other} cost than the {one}?"
        lines, final = [more_line((a, b))], b - a
    else:
        # units or tens digit off
        miss = rng.choice([*range(1, 10), 10, 10, 20, 20]) * rng.choice([-1, 1])
        total = a + b + (0 if rng.random() < 0.5 else miss)
        question = f"{buys}. Does {pron} pay exactly {total} coins (1 for yes, 0 for no)?"
        lines, final = [f"{_ann(a, '+', b)}. {check_line(a + b, total)}"], int(a + b == total)
    return {
        "question": f"{shop.header()} {question}",
        "answer": "\n".join([*lines, f"#### {final}"]),
    }


def make_problem(rng: random.Random, tier: str = "easy") -> dict:
    """One random TinyWorld record of ``tier`` drawn from ``rng`` (no split filtering)."""
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {TIERS}, got {tier!r}")
    return hard_problem(rng) if tier == "hard" else easy_problem(rng)


def generate(n: int, tier: str = "easy", split: str = "train", seed: int = 0) -> list[dict]:
    """``n`` distinct TinyWorld records of ``tier`` from ``split`` (the test split is a fixed
    hash bucket of the question, as in ``pr1lib.worlds.tasks``, so splits never overlap).

    >>> a = generate(3, "hard", "train", seed=7)
    >>> a == generate(3, "hard", "train", seed=7), len({r["question"] for r in a})
    (True, 3)
    """
    check_request(n, tier, split)
    rng = random.Random(f"tinyworld/{tier}/{split}/{seed}")
    return distinct_records(n, split, lambda: make_problem(rng, tier))


# ------------------------------------------------------------------- reading a question back
_LIST_RE = re.compile(r"(\w+) cost ((?:\d+, )*\d+ or \d+) coins\.")
_HARD_RE = re.compile(
    r"buys one (\w+) and one (\w+) and pays (\d+) coins\. "
    r"How much more does the \w+ cost"
)


def parse_shop(question: str) -> Shop | None:
    """The price lists of a TinyWorld question, or ``None`` when it is not one.

    >>> parse_shop("Toys cost 7 or 12 coins. Books cost 40 or 46 coins. Tom pays.").prices
    ((7, 12), (40, 46))
    """
    lists = _LIST_RE.findall(question)
    if len(lists) != 2:
        return None
    names, prices = [], []
    for plural, listing in lists:
        singular = next((s for pair in GOODS for s, p in pair if p == plural.lower()), None)
        if singular is None:
            return None
        names.append((singular, plural.lower()))
        prices.append(tuple(int(x) for x in re.findall(r"\d+", listing)))
    return Shop((names[0], names[1]), (prices[0], prices[1]))


def parse_hard(question: str) -> tuple[Shop, int] | None:
    """``(shop, total)`` of a hard question, else ``None``.

    >>> q = generate(1, "hard", seed=1)[0]["question"]
    >>> parse_hard(q)[1] > 0
    True
    """
    shop, match = parse_shop(question), _HARD_RE.search(question)
    if shop is None or match is None:
        return None
    return shop, int(match.group(3))


def solve_pair(shop: Shop, total: int) -> tuple[int, int] | None:
    """The one pair ``(a, b)`` of prices, one per list, with ``a + b == total``.

    >>> solve_pair(Shop(GOODS[0], ((7, 12), (40, 46))), 52)
    (12, 40)
    """
    pairs = [(a, b) for a in shop.prices[0] for b in shop.prices[1] if a + b == total]
    return pairs[0] if len(pairs) == 1 else None


_GUESS_RE = re.compile(r"\w+ (\d+), \w+ (\d+): \d+\+\d+=<<[^>]*>>(\d+)\. check: \d+ vs \d+ ([✓✗])")


def read_guess(question: str, text: str) -> dict | None:
    """The first guess (a ``try_line``) in ``text`` read back against a hard ``question``: its
    pair, whether both prices are on the lists, whether its sum is right, the mark it wrote, and
    whether it is the answer's pair; ``None`` without a guess line or a hard question.

    >>> q = ("Toys cost 7 or 12 coins. Books cost 40 or 46 coins. Tom buys one toy and one book "
    ...      "and pays 52 coins. How much more does the book cost than the toy?")
    >>> read_guess(q, "Toy 9, book 40: 9+40=<<9+40=52>>52. check: 52 vs 52 ✓")
    {'pair': (9, 40), 'listed': False, 'sum_right': False, 'mark': '✓', 'right': False}
    """
    hard, found = parse_hard(question), _GUESS_RE.search(text)
    if hard is None or found is None:
        return None
    (shop, total), pair = hard, (int(found[1]), int(found[2]))
    listed = pair[0] in shop.prices[0] and pair[1] in shop.prices[1]
    right, sum_right = pair == solve_pair(shop, total), int(found[3]) == sum(pair)
    return dict(pair=pair, listed=listed, sum_right=sum_right, mark=found[4], right=right)


# --------------------------------------------------------------------------- the teacher
WORLD_VERSION = 7  # bump when the traces change: it is part of the teacher's name (cache key)


def split_paths(shop: Shop) -> list[list[tuple[int, int]]]:
    """How a hard block splits the 2 x 2 search: path ``i`` fixes the ``i``-th cheap price of the
    question's list and pairs it with every dear price, in the question's order. Read from the
    prompt alone (never from the answer): the two paths together try every pair once.

    >>> split_paths(Shop(GOODS[0], ((7, 12), (40, 46))))
    [[(7, 40), (7, 46)], [(12, 40), (12, 46)]]
    """
    return [[(a, b) for b in shop.prices[1]] for a in shop.prices[0]]


def search_block(
    shop: Shop, total: int, rng: random.Random | None = None, both_good_rate: float = 0.0
) -> str:
    """A hard item's trace that SPLITS the search: each path fixes one cheap price (the
    question's order) and checks it against both dear prices, one ``try_line`` each; together the
    two paths cover all four pairs and exactly one path finds the pair that checks out (3 of the 4
    checks fail, marked ✗). The summary names the passing pair; the answer step follows. Every
    path is written from the prompt's lists alone, so the model can reproduce it without knowing
    the answer. (``rng`` and ``both_good_rate`` are kept for the callers of the world-6 teacher,
    whose paths were guesses built from the known answer; they no longer change the trace.)

    >>> s = Shop(GOODS[0], ((7, 12), (40, 46)))
    >>> print(search_block(s, 52))  # doctest: +NORMALIZE_WHITESPACE
    <Parallel><Path>Toy 7, book 40: 7+40=<<7+40=47>>47. check: 47 vs 52 ✗
    Toy 7, book 46: 7+46=<<7+46=53>>53. check: 53 vs 52 ✗</Path><Path>Toy 12, book 40:
    12+40=<<12+40=52>>52. check: 52 vs 52 ✓
    Toy 12, book 46: 12+46=<<12+46=58>>58. check: 58 vs 52 ✗</Path></Parallel>
    <Summary>Toy 12 and book 40: 12+40=<<12+40=52>>52.</Summary>
    40-12=<<40-12=28>>28 more.
    Final Answer: 28
    """
    good = solve_pair(shop, total)
    paths = "".join(
        "<Path>" + "\n".join(try_line(shop, total, pair) for pair in pairs) + "</Path>"
        for pairs in split_paths(shop)
    )
    (one, _), (other, _) = shop.names
    a, b = good
    summary = f"{one.capitalize()} {a} and {other} {b}: {_ann(a, '+', b)}."
    return (
        f"<Parallel>{paths}</Parallel>\n<Summary>{summary}</Summary>\n{more_line(good)}\n"
        f"Final Answer: {b - a}"
    )


_SUM_RE = re.compile(r"(\d+)\+(\d+)=<<\1\+\2=")


def overhead_block(answer_text: str) -> str:
    """An easy item's trace: both paths solve the whole item (the second with the terms of a
    first sum swapped); the summary states the shared result. Pure overhead: both paths do the
    same work.

    >>> steps = "9+52=<<9+52=61>>61 coins.\\n81-61=<<81-61=20>>20 coins left.\\n#### 20"
    >>> print(overhead_block(steps))
    <Parallel><Path>9+52=<<9+52=61>>61 coins.
    81-61=<<81-61=20>>20 coins left.</Path><Path>52+9=<<52+9=61>>61 coins.
    81-61=<<81-61=20>>20 coins left.</Path></Parallel>
    <Summary>Both paths give 20.</Summary>
    Final Answer: 20
    """
    steps, final = split_gsm8k_answer(answer_text)
    match = _SUM_RE.match(steps[0])
    swapped = f"{match[2]}+{match[1]}=<<{match[2]}+{match[1]}=" if match else ""
    first = swapped + steps[0][match.end() :] if match else steps[0]
    paths = "".join(f"<Path>{chr(10).join(lines)}</Path>" for lines in (steps, [first, *steps[1:]]))
    return (
        f"<Parallel>{paths}</Parallel>\n<Summary>Both paths give {final}.</Summary>\n"
        f"Final Answer: {final}"
    )


def plain_completion(question: str, completion: str) -> str:
    """The no-block solution of a TinyWorld item whose block trace is ``completion``: one guess
    that checks out on hard items, the trace's first path otherwise (``format.linearize``).

    >>> q = ("Toys cost 7 or 12 coins. Books cost 40 or 46 coins. Tom buys one toy and one book "
    ...      "and pays 52 coins. How much more does the book cost than the toy?")
    >>> plain_completion(q, "...").endswith("Final Answer: 28")
    True
    """
    if parse_hard(question) is not None:
        return linear_solution(hard_answer(question))
    return linearize(completion)


@dataclass
class WorldTeacher:
    """The rule teacher of TinyWorld: ``search_block`` on hard items, ``overhead_block`` on easy
    ones; any other GSM8K-style record goes to ``pr1lib.worlds.teachers.RuleTeacher``. Deterministic
    given ``seed`` and the problem id; returns the traces every teacher returns.

    >>> rec = {"id": "w1", **generate(1, "hard", seed=2)[0]}
    >>> rec["answer_text"] = rec["answer"]
    >>> text = WorldTeacher().generate([rec])[0]["text"]
    >>> text.startswith("<Parallel><Path>"), text.count(OK) >= 1
    (True, True)
    """

    seed: int = 0
    both_good_rate: float = 0.0  # unused since world 7 (split search); kept for old callers
    name: str = ""

    def __post_init__(self) -> None:
        knobs = repr((WORLD_VERSION, self.both_good_rate)).encode()
        self.name = self.name or f"world-s{self.seed}-{hashlib.sha256(knobs).hexdigest()[:6]}"

    def generate(self, problems: list[dict]) -> list[dict]:
        return [self.trace(p) for p in problems]

    def trace(self, problem: dict) -> dict:
        """One trace dict (``id``, ``teacher``, ``text``, ``error``)."""
        rng = random.Random(f"{self.seed}:{problem['id']}")
        hard = parse_hard(problem["question"])
        if hard is not None and solve_pair(*hard) is not None:
            return make_trace(problem, self.name, search_block(*hard, rng, self.both_good_rate))
        if parse_shop(problem["question"]) is None:
            return RuleTeacher(seed=self.seed).trace(problem) | {"teacher": self.name}
        try:
            return make_trace(problem, self.name, overhead_block(problem.get("answer_text") or ""))
        except ValueError as err:  # no '#### N' reference solution
            return make_trace(problem, self.name, error=str(err))


# TinyWorld's RL stages (docs/tinyworld.md#rl): blocks reach ~250 tokens; full FT at lr 1e-4
# learned in 60 steps where 3e-4 lost format (seed 0). The seen split block's path 2 takes the
# cheap price path 1 did not, so it samples plainly; unseen keeps its forked probes.
WORLD = register(
    World(
        name="tinyworld",
        title="TinyWorld",
        generate=generate,
        rule_teacher=WorldTeacher,
        plain_solution=plain_completion,
        tier_labels={"easy": "forward, 1-2 steps", "hard": "search for the one pair of prices"},
        checkpoints={
            "base": "data/tinyworld-base",
            "seen": "data/tinyworld-sft",
            "unseen": "data/tinyworld-sft-unseen",
        },
        budgets={"max_completion_length": 384, "max_path_length": 128},
        stage_presets=dict(
            rollout="seen",
            eval_max_new_tokens=384,
            use_lora=False,
            learning_rate=1e-4,
            dynamic_sampling=True,
        ),
        variant_presets={"unseen": dict(rollout=None)},
        # notebook 06, tiny: 60 Stage-3 steps (results/tinyworld-nb06-stage3-60.json), 30 too few
        notebook_presets={
            2: {"tiny": {"eval_n": 200}},
            3: {"tiny": {"max_steps": 60, "eval_n": 200}},
        },
        # the shipped SFTs (data/tinyworld-sft*): full fine-tuning, 12,000 rows of both tiers, half
        # plain, 2 epochs (1,500 steps); 6,000 rows missed the easy target (docs/tinyworld.md)
        sft_presets=dict(
            source="tinyworld-easy+tinyworld-hard",
            use_lora=False,
            learning_rate=1e-3,
            plain_share=0.5,
            train_n=12000,
            num_train_epochs=2.0,
            eval_max_new_tokens=384,
        ),
    )
)

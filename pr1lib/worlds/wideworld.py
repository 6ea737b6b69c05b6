"""WideWorld: a wide search whose candidates are named, so paths that cannot see each other can
still split it (docs/wideworld.md).

Every problem opens with a lettered list of deals, ``Deals of one toy and one book: (A) 4 and
9, (B) 5 and 6, ..., (J) 6 and 9.`` (one-digit prices, the book dearer than the toy). Two tiers,
in GSM8K's record shape (step lines, then ``#### N``; the steps are written compactly, without
``<<...>>`` annotations, to keep the traces short):

- ``easy`` (forward, one step): the sum of one named deal, how much more its dear item costs, or
  whether it costs a given total (``(D) 6+8=14 vs 14 ✓``, 1 or 0).
- ``hard`` (search): ``Mia pays 14 coins for one deal. How much more does its book cost than its
  toy?`` Exactly one of the ten deals sums to the total. *Finding* it means checking deals one
  by one; *checking* one is an addition and a comparison, ``(C) 6+8=14 vs 14 ✓ 8-6=2``, and
  the deal that checks out also gives the answer. A blind guess of the deal is right 1 time in
  10, of the answer (1 to 8, uniform) 1 time in 8.

The rule teacher (``WideTeacher``) writes one search in three forms that share every line:

- **serial** (``serial_solution``): check deal (A), (B), ... in order and stop at the first ✓;
- **parallel** (the teacher's trace): check deal (A), the guess; if it fails, one block whose paths
  check deals (B) to (J), one deal each, then a summary that copies the answer of the path that
  checked out. Both forms may stop after a checked guess: the same answer modes (``answer_mode``);
- **plain** (``plain_completion``): the right deal's line alone (built from the answer, the
  base model's pretraining text and the plain-SFT control).

Each path opens with its deal's letter, and the question says what that deal is, so a path knows
its share without seeing its siblings: the forked engine writes ``(B)`` to ``(J)`` into the paths
as forced tokens (``RolloutConfig.path_headers`` with ``header_style="letter"``: path j opens
with the (j+1)-th letter) and the model copies that deal's prices. The guess is deal (A), so the
block's letters are the engine's. Decoded that way, a block costs its longest path: one line.
Letters and one-digit prices make finding a deal a one-token look-up (with numbered deals and
two-digit prices the tiny model mixed up digits of neighbouring deals: docs/wideworld.md).

>>> rec = generate(1, "hard", "test", seed=0)[0]
>>> len(parse_hard(rec["question"])[0].deals), rec["answer"].splitlines()[-1].startswith("#### ")
(10, True)
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from pr1lib.format.grammar import LETTERS, linearize
from pr1lib.format.prompts import linear_solution
from pr1lib.worlds import World, register
from pr1lib.worlds.tasks import NAMES, check_request, distinct_records
from pr1lib.worlds.teachers import SearchTeacher

TIERS = ("easy", "hard")
GOODS = (("toy", "book"), ("cake", "drink"), ("pen", "bag"), ("hat", "scarf"))
TOP = 9  # prices are one digit, 1 to 9, the dear item dearer than the cheap one: a price is one
# token, so finding a deal's prices is one look-up (two-digit prices were copied digit by digit and
# the tiny model mixed digits of neighbouring deals up: docs/wideworld.md, design notes)
DEALS = 10  # deals per hard problem: a guess, then a block of DEALS - 1 paths
OK, NO = "✓", "✗"
LABELS = LETTERS[:DEALS]  # deal j is called (LABELS[j]): (A) is the guess, (B)..(J) the paths
MISSES = (1, 1, 2, 2, 3, 4, 5)  # how far a wrong deal's sum lands from the total: near it


@dataclass(frozen=True)
class Deals:
    """A problem's lettered deals: ``names`` the (cheap, dear) items, ``deals[j]`` the prices of
    the j-th deal, called ``(LABELS[j])``."""

    names: tuple[str, str]
    deals: tuple[tuple[int, int], ...]

    def header(self) -> str:
        """``Deals of one toy and one book: (A) 4 and 9, (B) 6 and 8.``"""
        listing = ", ".join(f"({LABELS[j]}) {a} and {b}" for j, (a, b) in enumerate(self.deals))
        return f"Deals of one {self.names[0]} and one {self.names[1]}: {listing}."


def line(j: int, pair: tuple[int, int], total: int) -> str:
    """The check of the j-th deal: its sum beside the total; the one that checks out also answers.

    >>> line(2, (6, 8), 14)
    '(C) 6+8=14 vs 14 ✓ 8-6=2'
    >>> line(0, (4, 9), 14)
    '(A) 4+9=13 vs 14 ✗'
    """
    a, b = pair
    head = f"({LABELS[j]}) {a}+{b}={a + b} vs {total}"
    return f"{head} {OK} {b}-{a}={b - a}" if a + b == total else f"{head} {NO}"


# --------------------------------------------------------------------------- problems
def _pair_with_sum(rng: random.Random, total: int) -> tuple[int, int] | None:
    """A (cheap, dear) pair of one-digit prices that sums to ``total``, else ``None``."""
    lows = [a for a in range(1, TOP) if a < total - a <= TOP]
    if not lows:
        return None
    a = rng.choice(lows)
    return a, total - a


def _hard_deals(rng: random.Random) -> tuple[list[tuple[int, int]], int, int]:
    """``(deals, total, right)``: DEALS distinct pairs, exactly one (index ``right``) summing
    to ``total``, and no other with the right pair's difference (a wrong deal never answers); a
    right pair with too few such neighbours (a total at the edge) is drawn again."""
    deals: list[tuple[int, int]] = []
    while len(deals) < DEALS:
        gap = rng.randint(1, TOP - 1)  # the answer, uniform: no answer is a better blind guess
        a = rng.randint(1, TOP - gap)
        b = a + gap
        total, deals = a + b, [(a, b)]
        for _ in range(50 * DEALS):
            pair = _pair_with_sum(rng, total + rng.choice(MISSES) * rng.choice((-1, 1)))
            if pair and pair not in deals and pair[1] - pair[0] != b - a:
                deals.append(pair)
            if len(deals) == DEALS:
                break
    right = rng.randrange(DEALS)
    wrong = deals[1:]
    rng.shuffle(wrong)
    return wrong[:right] + [(a, b)] + wrong[right:], total, right


def _who(rng: random.Random) -> tuple[str, str]:
    who, pron = rng.choice(NAMES)
    return who, pron.lower()


def hard_problem(rng: random.Random) -> dict:
    """``Deals ... Mia pays 14 coins for one deal. How much more does its book cost than its
    toy?`` (a search over the deals).

    >>> rec = hard_problem(random.Random(3))
    >>> "pays" in rec["question"], OK in rec["answer"]
    (True, True)
    """
    names, (who, _) = rng.choice(GOODS), _who(rng)
    deals, total, right = _hard_deals(rng)
    shop = Deals(names, tuple(deals))
    question = (
        f"{shop.header()} {who} pays {total} coins for one deal. "
        f"How much more does its {names[1]} cost than its {names[0]}?"
    )
    a, b = deals[right]
    return {"question": question, "answer": f"{line(right, (a, b), total)}\n#### {b - a}"}


def easy_problem(rng: random.Random) -> dict:
    """A forward item on one named deal of 2 to 10: its sum, how much more the dear item costs,
    or whether it costs a given total (1 or 0).

    >>> sorted({easy_problem(random.Random(s))["answer"].count(" vs ") for s in range(12)})
    [0, 1]
    """
    names, (who, pron) = rng.choice(GOODS), _who(rng)
    deals: list[tuple[int, int]] = []
    for _ in range(rng.randint(2, DEALS)):
        a = rng.randint(1, TOP - 1)
        pair = (a, rng.randint(a + 1, TOP))
        deals += [pair] if pair not in deals else []
    j = rng.randrange(len(deals))
    (a, b), shop = deals[j], Deals(names, tuple(deals))
    kind = rng.choice(("sum", "more", "check"))
    name = LABELS[j]
    if kind == "sum":
        ask = f"{who} buys deal ({name}). How many coins does {pron} pay?"
        steps, final = f"({name}) {a}+{b}={a + b}", a + b
    elif kind == "more":
        ask = f"In deal ({name}), how much more does the {names[1]} cost than the {names[0]}?"
        steps, final = f"({name}) {b}-{a}={b - a}", b - a
    else:
        miss = 0 if rng.random() < 0.5 else rng.choice(MISSES) * rng.choice((-1, 1))
        total = a + b + (miss if a + b + miss > 1 else -miss)
        ask = f"Does deal ({name}) cost exactly {total} coins (1 for yes, 0 for no)?"
        mark = OK if a + b == total else NO
        steps, final = f"({name}) {a}+{b}={a + b} vs {total} {mark}", int(a + b == total)
    return {"question": f"{shop.header()} {ask}", "answer": f"{steps}\n#### {final}"}


def generate(n: int, tier: str = "easy", split: str = "train", seed: int = 0) -> list[dict]:
    """``n`` distinct WideWorld records of ``tier`` from ``split`` (the test split is a fixed hash
    bucket of the question, as in ``pr1lib.worlds.tasks``, so splits never overlap).

    >>> a = generate(3, "hard", "train", seed=7)
    >>> a == generate(3, "hard", "train", seed=7), len({r["question"] for r in a})
    (True, 3)
    """
    check_request(n, tier, split)
    rng = random.Random(f"wideworld/{tier}/{split}/{seed}")
    make = hard_problem if tier == "hard" else easy_problem
    return distinct_records(n, split, lambda: make(rng))


# ------------------------------------------------------------------- reading a question back
_DEAL_RE = re.compile(r"\(([A-Z])\) (\d+) and (\d+)")
_HEAD_RE = re.compile(r"Deals of one (\w+) and one (\w+): ")
_HARD_RE = re.compile(r"pays (\d+) coins for one deal\.")


def parse_deals(question: str) -> Deals | None:
    """The lettered deals of a WideWorld question, or ``None`` when it is not one.

    >>> parse_deals("Deals of one toy and one book: (A) 4 and 9, (B) 6 and 8. Tom ...").deals
    ((4, 9), (6, 8))
    """
    head = _HEAD_RE.search(question)
    found = _DEAL_RE.findall(question)
    if head is None or not found or "".join(j for j, _, _ in found) != LETTERS[: len(found)]:
        return None
    return Deals((head[1], head[2]), tuple((int(a), int(b)) for _, a, b in found))


def parse_hard(question: str) -> tuple[Deals, int] | None:
    """``(deals, total)`` of a hard question, else ``None``."""
    deals, match = parse_deals(question), _HARD_RE.search(question)
    return None if deals is None or match is None else (deals, int(match[1]))


def solve(deals: Deals, total: int) -> int | None:
    """The index of the one deal that sums to ``total`` (``None`` unless exactly one does).

    >>> solve(Deals(GOODS[0], ((4, 9), (6, 8))), 14)
    1
    """
    hits = [j for j, (a, b) in enumerate(deals.deals) if a + b == total]
    return hits[0] if len(hits) == 1 else None


_LINE_RE = re.compile(r"\(([A-Z])\) (\d+)\+(\d+)=")


def checked_deals(text: str) -> list[tuple[int, tuple[int, int]]]:
    """Every deal a text checks, in order: ``(index of the letter it names, (prices it adds))``.

    >>> checked_deals("(A) 4+9=13 vs 14 ✗\\n<Parallel><Path>(B) 6+8=14 vs 14 ✓ 8-6=2")
    [(0, (4, 9)), (1, (6, 8))]
    """
    return [(LETTERS.index(j), (int(a), int(b))) for j, a, b in _LINE_RE.findall(text)]


_BLOCK_RE = re.compile(r"<Parallel>(.*?)(?:</Parallel>|$)", re.DOTALL)
_PATH_RE = re.compile(r"<Path>(.*?)(?:</Path>|$)", re.DOTALL)


def block_splits(question: str, text: str) -> list[bool]:
    """Per block of ``text``, whether its paths took their shares as assigned: DEALS - 1 paths,
    path j checking the (j+1)-th deal with that deal's prices (whatever its sum and mark say);
    ``[]`` for a question that is not a hard one.

    >>> q = generate(1, "hard", "test", seed=3)[0]["question"]
    >>> block_splits(q, parallel_trace(*parse_hard(q))) in ([True], [])
    True
    >>> block_splits(q, "<Parallel><Path>(B) 1+2=3</Path><Path>(B) 1+2=3</Path></Parallel>")
    [False]
    """
    hard = parse_hard(question)
    if hard is None:
        return []
    deals = hard[0].deals
    assigned = [[(j, deals[j])] for j in range(1, len(deals))]
    return [
        [checked_deals(path)[:1] for path in _PATH_RE.findall(block)] == assigned
        for block in _BLOCK_RE.findall(text)
    ]


# --------------------------------------------------------------------------- the three forms
def search_lines(deals: Deals, total: int) -> list[str]:
    """The check of every deal, in the question's order."""
    return [line(j, pair, total) for j, pair in enumerate(deals.deals)]


def parallel_trace(deals: Deals, total: int) -> str:
    """The teacher's trace: deal (A) checked first (a right guess answers at once), else one block
    of one path per remaining deal and a summary holding the answer.

    >>> print(parallel_trace(Deals(GOODS[0], ((4, 9), (6, 8), (5, 7))), 14))
    (A) 4+9=13 vs 14 ✗
    <Parallel><Path>(B) 6+8=14 vs 14 ✓ 8-6=2</Path><Path>(C) 5+7=12 vs 14 ✗</Path></Parallel>
    <Summary>2</Summary>
    Final Answer: 2
    """
    lines, right = search_lines(deals, total), solve(deals, total)
    a, b = deals.deals[right]
    if right == 0:
        return f"{lines[0]}\nFinal Answer: {b - a}"
    paths = "".join(f"<Path>{text}</Path>" for text in lines[1:])
    summary = f"<Summary>{b - a}</Summary>"
    return f"{lines[0]}\n<Parallel>{paths}</Parallel>\n{summary}\nFinal Answer: {b - a}"


def serial_trace(deals: Deals, total: int) -> str:
    """The same search as one stream: deal after deal, stopping at the first ✓.

    >>> print(serial_trace(Deals(GOODS[0], ((4, 9), (6, 8), (5, 7))), 14))
    (A) 4+9=13 vs 14 ✗
    (B) 6+8=14 vs 14 ✓ 8-6=2
    Final Answer: 2
    """
    right = solve(deals, total)
    a, b = deals.deals[right]
    return "\n".join([*search_lines(deals, total)[: right + 1], f"Final Answer: {b - a}"])


def serial_solution(question: str, completion: str) -> str:
    """The serial form of a WideWorld item whose parallel trace is ``completion``: the serial
    search on hard items, the trace itself (it has no block) otherwise."""
    hard = parse_hard(question)
    if hard is not None and solve(*hard) is not None:
        return serial_trace(*hard)
    return linearize(completion)


def plain_completion(question: str, completion: str) -> str:
    """The no-search solution: the right deal's line alone on hard items (built from the answer:
    a model can only guess it), the trace without its block otherwise."""
    hard = parse_hard(question)
    if hard is not None and (right := solve(*hard)) is not None:
        deals, total = hard
        a, b = deals.deals[right]
        return linear_solution(f"{line(right, (a, b), total)}\n#### {b - a}")
    return linearize(completion)


def answer_mode(text: str) -> str:
    """``"guess"`` when a completion checks at most one deal and opens no block, else
    ``"search"``.

    >>> answer_mode("(A) 4+9=13 vs 13 ✓ 9-4=5\\nFinal Answer: 5")
    'guess'
    >>> answer_mode("(A) 4+9=13 vs 14 ✗\\n(B) 6+8=14 vs 14 ✓ 8-6=2\\nFinal Answer: 2")
    'search'
    """
    return "search" if "<Parallel>" in text or text.count(" vs ") > 1 else "guess"


WORLD_VERSION = 2  # bump when the traces change: it is part of the teacher's name (cache key)


class WideTeacher(SearchTeacher):
    """The rule teacher of WideWorld: ``parallel_trace`` on hard items, the plain solution on easy
    ones. Deterministic (the traces are a function of the question).

    >>> rec = {"id": "w1", **generate(1, "hard", seed=2)[0]}
    >>> text = WideTeacher().generate([{**rec, "answer_text": rec["answer"]}])[0]["text"]
    >>> text.startswith("(A) "), text.count(OK), WideTeacher().name
    (True, 1, 'wide-s0-a18da3')
    """

    prefix, knobs = "wide", (WORLD_VERSION, DEALS)

    def search(self, question: str) -> str | None:
        hard = parse_hard(question)
        return parallel_trace(*hard) if hard is not None and solve(*hard) is not None else None


# WideWorld's settings (docs/wideworld.md): a block of DEALS - 1 lettered paths (the guess is
# deal (A), so path j checks the (j+1)-th deal); both RL stages on hard items (easy items have
# nothing to search, so no block to learn there); full fine-tuning as in TinyWorld.
WORLD = register(
    World(
        name="wideworld",
        title="WideWorld",
        generate=generate,
        rule_teacher=WideTeacher,
        plain_solution=plain_completion,
        serial_solution=serial_solution,
        answer_mode=answer_mode,
        block_splits=block_splits,
        blockless_rows=True,
        tier_labels={"easy": "one named deal, one step", "hard": "search ten deals for the one"},
        checkpoints={"base": "data/wideworld-base", "unseen": "data/wideworld-sft-unseen"},
        budgets={
            "max_completion_length": 320,
            "max_path_length": 32,
            "num_paths": DEALS - 1,
            "path_headers": True,
            "header_style": "letter",
        },
        stages={2: "hard", 3: "hard"},
        # no dynamic sampling: its cold starts answer ~97 % of hard items, so most groups are all
        # right and refilling them would multiply the rollouts for a few mixed groups; lr 1e-5:
        # at TinyWorld's 1e-4 the unseen block's paths eroded in 75 steps (split 0.93 -> 0.54,
        # hard 97.7 -> 90.0 %, seed 0; 3e-5 doubled the paths off their deal in 60 steps), while
        # nothing is left for RL to gain (docs/wideworld.md#rl-on-a-solved-search)
        stage_presets=dict(eval_max_new_tokens=320, use_lora=False, learning_rate=1e-5),
        # the seen variant samples its block as one stream, each path reading the ones before (as
        # TinyWorld's): forked, a causal SFT's paths all check deal (B), the first one it learned
        variant_presets={"seen": dict(rollout="seen")},
        sft_presets=dict(
            source="wideworld-easy+wideworld-hard",
            use_lora=False,
            learning_rate=1e-3,
            train_n=8000,
            num_train_epochs=2.0,
            eval_max_new_tokens=320,
        ),
    )
)

"""Solutions to the exercises of notebook 01 (the parallel-thinking format).

Each ``exercise_N(profile)`` does the exercise and returns what it found; its docstring answers
the question in words. ``check_exercise_N(found)`` states what a right answer must show (the tests
call both). Run them all with ``python solutions/01_parallel_format.py [profile]``.
"""

from __future__ import annotations

import random
import re

from pr1lib.format import grammar as fmt

# the notebook's section-2 table, copied so this file stands alone
P = "<Parallel><Path>a</Path><Path>b</Path></Parallel>"
CASES = {
    "no tags": "2 + 2 = 4\nFinal Answer: 4",
    "one good block": P + "\n<Summary>s</Summary>\nFinal Answer: 4",
    "three paths": P[:-11] + "<Path>c</Path></Parallel><Summary>s</Summary>",
    "path outside a block": "<Path>just me</Path> Final Answer: 4",
    "unclosed summary": P + "<Summary>s ... Final Answer: 4",
    "nested block": "<Parallel><Path>" + P + "<Summary>s</Summary></Path>"
    "<Path>c</Path></Parallel><Summary>t</Summary>",
    "text between paths": P.replace("</Path><Path>", "</Path> then <Path>")
    + "<Summary>s</Summary>",
    "only one path": "<Parallel><Path>a</Path></Parallel><Summary>s</Summary>",
    "missing summary": P + "\nFinal Answer: 4",
    "two summaries": P + "<Summary>s</Summary><Summary>t</Summary>",
    "truncated": "<Parallel><Path>a</Path><Path>b",
    "stray closing tag": "done. </Parallel>",
}


# ----------------------------------------------------------------------------- exercise 1
def exercise_1(profile: str = "smoke") -> dict:
    """Responses the official checker accepts and the strict grammar rejects, beyond the table.

    The official checker only counts tags: it never reads the text between them. So anything that
    breaks a rule about *text* slips through it: an **empty path** (the block still counts two
    ``</Path>``, but the strict grammar wants two non-empty paths), **words between
    ``</Parallel>`` and ``<Summary>``** (the summary must follow the block with only whitespace
    between), **words inside a block before its first path**, and a **stray ``</Summary>``** (the
    official checker ignores every ``</Summary>``). Each one is a way a model could earn a
    "parallel" bonus without writing the structure the reward is meant to pay for.
    """
    found = {
        "empty path": "<Parallel><Path></Path><Path>b</Path></Parallel>"
        "<Summary>s</Summary>\nFinal Answer: 4",
        "text before the summary": P + " so <Summary>s</Summary>\nFinal Answer: 4",
        "text before the first path": "<Parallel>hmm<Path>a</Path><Path>b</Path></Parallel>"
        "<Summary>s</Summary>\nFinal Answer: 4",
        "stray </Summary>": "2 + 2 = 4 </Summary>\nFinal Answer: 4",
    }
    return {
        name: {
            "text": text,
            "official": fmt.validate(text, strict=False),
            "strict": fmt.validate(text),
        }
        for name, text in found.items()
    }


def check_exercise_1(found: dict) -> None:
    assert len(found) >= 1
    for name, row in found.items():
        assert row["text"] not in CASES.values(), f"{name} is already in the table"
        assert row["official"] == [] and row["strict"], f"{name}: verdicts do not differ"


# ----------------------------------------------------------------------------- exercise 2
def tiny_checker(text: str, lone_paths_ok: bool = True) -> bool:
    """The notebook's checker; ``lone_paths_ok=False`` adds the one extra condition: a
    ``<Path>`` must open directly inside a ``<Parallel>``."""
    stack, counts, expecting, summaries, ok = [], [], False, 0, True
    for tag in re.findall(r"</?(?:Parallel|Path|Summary)>", text):
        if tag in ("<Parallel>", "<Path>"):
            if tag == "<Path>" and not lone_paths_ok and stack[-1:] != ["<Parallel>"]:
                ok = False  # the new condition
            stack.append(tag)
            if tag == "<Parallel>":
                counts.append(0)
                expecting = False
        elif tag in ("</Path>", "</Parallel>"):
            if not stack or stack[-1] != tag.replace("/", ""):
                ok = False
                continue
            stack.pop()
            if tag == "</Path>" and counts:
                counts[-1] += 1
            elif tag == "</Parallel>":
                ok = ok and counts.pop() >= 2
                expecting = True
        elif tag == "<Summary>":
            ok, expecting, summaries = ok and expecting, False, summaries + 1
    closes = text.count("</Parallel>")
    return ok and not stack and not expecting and summaries == closes


def exercise_2(profile: str = "smoke", seed: int = 0) -> dict:
    """Make ``tiny_checker`` reject a ``<Path>`` outside any block.

    One condition does it: when a ``<Path>`` opens, the innermost open tag must be a
    ``<Parallel>`` (``stack[-1:] == ["<Parallel>"]``). In the section-2 table only the row
    **"path outside a block"** changes (official-style "valid" becomes invalid); the nested block
    still passes, because each of its paths does sit directly inside a ``<Parallel>``.

    The section-2 assert (strict never accepts what the official checker rejects) is about
    ``pr1lib.format.grammar.validate`` and still holds. The assert of section 6, ``mine == theirs``,
    **fails**: the changed checker no longer reproduces the official one, on that row and on every
    random tag soup with a lone path. The new checker is still not the strict grammar: it passes
    the unclosed summary, the nested block and text between paths.
    """
    rng = random.Random(seed)
    alphabet = list(fmt.TAGS) + ["x", " "]
    soups = ["".join(rng.choices(alphabet, k=rng.randint(0, 10))) for _ in range(3000)]
    changed = [
        name
        for name, text in CASES.items()
        if tiny_checker(text) != tiny_checker(text, lone_paths_ok=False)
    ]
    texts = list(CASES.values()) + soups
    official = [not fmt.validate(t, strict=False) for t in texts]
    disagree = sum(tiny_checker(t, lone_paths_ok=False) != o for t, o in zip(texts, official))
    still_lenient = [
        name
        for name, text in CASES.items()
        if tiny_checker(text, lone_paths_ok=False) and fmt.validate(text)
    ]
    return {
        "changed_rows": changed,
        "section6_assert_holds": disagree == 0,
        "disagreements_with_official": disagree,
        "accepted_but_strict_rejects": still_lenient,
    }


def check_exercise_2(found: dict) -> None:
    assert found["changed_rows"] == ["path outside a block"]
    assert not found["section6_assert_holds"] and found["disagreements_with_official"] > 1
    assert "unclosed summary" in found["accepted_but_strict_rejects"]


# ----------------------------------------------------------------------------- exercise 3
def exercise_3(profile: str = "smoke") -> dict:
    """Add the tags as *special* tokens and decode with ``skip_special_tokens=True``.

    The decode deletes every tag: ``so <Path>12</Path>`` comes back as ``so 12``. A TRL reward
    function would receive text with no tags at all. The strict validator calls that text
    **valid**, because a response with no tags breaks no rule, but it sees **no block**: a
    perfect parallel answer scores like a linear one (tiered +1.0 instead of +1.2,
    parallel∧correct −1 instead of +1). The bonus could never be earned, and nothing would fail
    loudly. That is why this project adds the tags as normal added tokens, and why the doctor
    has a ``tags_survive_decoding`` check.
    """
    import copy

    from tokenizers import AddedToken

    from pr1lib.decoding.models import load_policy
    from pr1lib.rewards.functions import parallel_correct_reward, tiered_reward
    from pr1lib.training.doctor import check_tags_survive

    _, tokenizer, _ = load_policy(profile)
    special = copy.deepcopy(tokenizer)
    special.add_tokens(
        [AddedToken(t, special=True, normalized=False) for t in fmt.TAGS], special_tokens=True
    )
    answer = (
        "<Parallel><Path>3 x 4 = 12</Path><Path>4 + 4 + 4 = 12</Path></Parallel>\n"
        "<Summary>Both give 12.</Summary>\nFinal Answer: 12"
    )
    out = {}
    for text in ("so <Path>12</Path>", answer):
        ids = special.encode(text, add_special_tokens=False)
        out[text] = special.decode(ids, skip_special_tokens=True)
    received = out[answer]
    return {
        "sample_decoded": out["so <Path>12</Path>"],
        "answer_decoded": received,
        "strict_errors": fmt.validate(received),
        "blocks_seen": fmt.parallel_stats(received)["blocks"],
        "tiered": {
            "tags kept": tiered_reward([answer], ["12"])[0],
            "tags dropped": tiered_reward([received], ["12"])[0],
        },
        "parallel_correct": {
            "tags kept": parallel_correct_reward([answer], ["12"])[0],
            "tags dropped": parallel_correct_reward([received], ["12"])[0],
        },
        "doctor": check_tags_survive(special).status,
    }


def check_exercise_3(found: dict) -> None:
    assert not any(tag in found["answer_decoded"] for tag in fmt.TAGS)
    assert found["sample_decoded"].split() == ["so", "12"]
    assert found["strict_errors"] == [] and found["blocks_seen"] == 0  # valid, but no block
    assert found["tiered"] == {"tags kept": 1.2, "tags dropped": 1.0}
    assert found["parallel_correct"] == {"tags kept": 1.0, "tags dropped": -1.0}
    assert found["doctor"] == "FAIL"


if __name__ == "__main__":
    import sys

    for n in (1, 2, 3):
        print(f"exercise {n}:", globals()[f"exercise_{n}"](*sys.argv[1:2]))

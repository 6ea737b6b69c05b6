"""Solutions to the exercises of notebook 05 (the rewards of GRPO).

Each ``exercise_N(profile)`` does the exercise and returns what it found; its docstring answers
the question in words. ``check_exercise_N(found)`` states what a right answer must show (the tests
call both). Nothing here needs a model, so every profile gives the same answers. Run them all
with ``python solutions/05_grpo_rewards.py``.
"""

from __future__ import annotations

from types import SimpleNamespace

from pr1lib.format.grammar import validate
from pr1lib.notebook.panel import PanelState, active_modes
from pr1lib.rewards.functions import alternating_reward, score, terms
from pr1lib.rewards.hacking import HACKING_CASES
from pr1lib.rewards.modes import block_break_even, reward_for

BLOCK = "<Parallel><Path>3 * 4 = 12.</Path><Path>4 + 4 + 4 = 12.</Path></Parallel>"


# ----------------------------------------------------------------------------- exercise 1
def exercise_1(profile: str = "smoke") -> dict:
    """A completion worth +1.2 to the official grader and −1 to the project's.

    Put words between ``</Parallel>`` and ``<Summary>`` ("so"). The official checker never reads
    the text between tags, so it sees a valid block, and the answer is right: +1.2. The strict
    grammar requires the ``<Summary>`` to follow ``</Parallel>`` with nothing but whitespace in
    between (docs/recipe.md, section 1), so the block is malformed, and under the tiered reward a
    right answer with a malformed block scores −1. Any rule about text the official checker skips
    works the same way: an empty path, words before the first path, a stray ``</Summary>``.
    """
    text = f"Count the muffins.\n{BLOCK} so <Summary>Both give 12.</Summary>\nFinal Answer: 12"
    return {
        "text": text,
        "tiered (official)": score(text, "12", "tiered", grader="official"),
        "tiered (project)": score(text, "12", "tiered", grader="project"),
        "official errors": validate(text, strict=False),
        "strict errors": validate(text, strict=True),
    }


def check_exercise_1(found: dict) -> None:
    assert found["tiered (official)"] == 1.2 and found["tiered (project)"] == -1.0
    assert found["official errors"] == [] and found["strict errors"]
    assert any("right after </Parallel>" in e for e in found["strict errors"])


# ----------------------------------------------------------------------------- exercise 2
def bonus_for(cost: float, accuracy: float, tiered_share: float) -> float:
    """The bonus ``b`` at which a block may cost exactly ``cost``: solve
    ``p f b / (2 + f b) = cost`` for ``b``, i.e. ``b = 2 cost / (f (p - cost))``."""
    return 2 * cost / (tiered_share * (accuracy - cost))


def exercise_2(profile: str = "smoke") -> dict:
    """With f = 0.2, the bonus that lets a block cost 5 points at p = 50 %.

    Solving ``p f b / (2 + f b) = 0.05`` gives ``f b = 2 · 0.05 / (0.5 − 0.05) = 0.222``, so
    ``b = 1.11``: a right answer with a block would earn 2.11 against 1.0 without one.

    I would not trust it. Such a bonus pays the model to give up one right answer in ten just to
    show a block, and section 2 shows what the cheapest blocks look like: two copies of one path
    (``identical_paths``) or a block bolted on after the answer (``block_after_answer``) score
    the full 1 + b, more than twice an honest linear answer. At b = 0.2 that gap is 20 %; at
    b = 1.11 most of the reward is for the format, and the reward drifts toward the
    ``structure`` arm, which section 2 shows paying for empty paths.
    """
    p, f, cost = 0.5, 0.2, 0.05
    b = bonus_for(cost, p, f)
    top = {}
    for case in HACKING_CASES:  # the tiered reward with bonus b, under the project grader
        t = terms(case["completion"], case["answer"])
        if t.correct and t.valid and t.blocks:
            top[case["name"]] = 1 + b
    return {
        "bonus": b,
        "cost at that bonus": block_break_even(p, b, f),
        "cost at the paper's bonus": block_break_even(p, 0.2, f),
        "cases paid 1 + b": sorted(top),
        "block over linear": (1 + b) / 1.0,
    }


def check_exercise_2(found: dict) -> None:
    assert abs(found["bonus"] - 10 / 9) < 1e-9
    assert abs(found["cost at that bonus"] - 0.05) < 1e-12
    assert found["cost at the paper's bonus"] < 0.01  # the paper's b buys less than a point
    assert {"identical_paths", "block_after_answer"} <= set(found["cases paid 1 + b"])
    assert found["block over linear"] > 2


# ----------------------------------------------------------------------------- exercise 3
def exercise_3(profile: str = "smoke") -> dict:
    """``PanelState(reward="alternating", window=5, parallel_steps=5)``.

    When the tiered steps fill the whole window, every step is tiered: this is the **tiered**
    reward on every step, section 1's ``tiered`` row, and no longer S2. (It is also this
    project's best guess at the paper's "parallel only" arm of Table 4.) It scores every
    completion exactly as ``tiered`` does, at every step.
    """
    state = PanelState(reward="alternating", window=5, parallel_steps=5, steps=20)
    modes = active_modes(state)
    alternating = alternating_reward(window=5, parallel_steps=5)
    tiered = reward_for("tiered")
    texts = [c["completion"] for c in HACKING_CASES]
    golds = [c["answer"] for c in HACKING_CASES]
    same = all(
        alternating(texts, golds, trainer_state=SimpleNamespace(global_step=s))
        == tiered(texts, golds)
        for s in range(10)
    )
    return {"modes": sorted(set(modes)), "steps": len(modes), "scores equal tiered": same}


def check_exercise_3(found: dict) -> None:
    assert found["modes"] == ["tiered"] and found["steps"] == 20
    assert found["scores equal tiered"]


if __name__ == "__main__":
    for n in (1, 2, 3):
        print(f"exercise {n}:", globals()[f"exercise_{n}"]())

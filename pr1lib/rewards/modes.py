"""The reward modes by name (``REWARD_MODES``: what the panel, training, the verl export, the
doctor and the command line read), rewards combined with weights, and when a block pays.

>>> sorted(REWARD_MODES)
['accuracy', 'alternating', 'parallel_correct', 'structure', 'tiered']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pr1lib.config.checks import register_checks, register_choices
from pr1lib.rewards.functions import (
    RANGES,
    REWARDS,
    TIERED_BONUS,
    GradedReward,
    RewardFn,
    alternating_reward,
)
from pr1lib.rewards.graders import get_grader


# ---------------------------------------------------------------- composition
class Combined:
    """Weighted sum of TRL reward functions, itself a TRL reward function (see ``combine``)."""

    __name__ = "combined_reward"

    def __init__(self, parts: list[tuple[RewardFn, float]], name: str | None = None) -> None:
        self.parts = parts
        if name:
            self.__name__ = name

    def __call__(self, completions: list, **kwargs: Any) -> list[float | None]:
        columns = [(fn(completions=completions, **kwargs), w) for fn, w in self.parts]
        out: list[float | None] = []
        for i in range(len(completions)):
            # None: not applicable (TRL)
            vals = [w * col[i] for col, w in columns if col[i] is not None]
            out.append(sum(vals) if vals else None)
        return out

    def range_at(self, global_step: int = 0) -> tuple[float, float] | None:
        ranges = [(reward_range(fn, global_step), w) for fn, w in self.parts]
        if any(r is None for r, _ in ranges):
            return None
        lo = sum(w * (r[0] if w >= 0 else r[1]) for r, w in ranges)
        hi = sum(w * (r[1] if w >= 0 else r[0]) for r, w in ranges)
        return (lo, hi)


def combine(
    weights: Mapping[RewardFn, float] | Iterable[tuple[RewardFn, float]], name: str | None = None
) -> Combined:
    """One reward function = Σ weight × reward. Same effect as TRL's ``reward_funcs=[...]`` with
    ``GRPOConfig(reward_weights=[...])``, except TRL also logs each part as its own column.

    >>> from pr1lib.rewards.functions import accuracy_reward, structure_reward
    >>> both = combine({accuracy_reward: 1.0, structure_reward: 0.5})
    >>> block = "<Parallel><Path>a</Path><Path>b</Path></Parallel><Summary>s</Summary>\\n"
    >>> both([block + "Final Answer: 12", "Final Answer: 12"], answer=["12", "12"])
    [1.5, 0.5]
    """
    parts = list(weights.items()) if isinstance(weights, Mapping) else list(weights)
    return Combined([(fn, float(w)) for fn, w in parts], name)


def reward_range(fn: RewardFn, global_step: int = 0) -> tuple[float, float] | None:
    """(lowest, highest) score ``fn`` can give at ``global_step``; ``None`` if it does not say.

    >>> from pr1lib.rewards.functions import alternating_reward, tiered_reward
    >>> alt = alternating_reward()
    >>> reward_range(tiered_reward), reward_range(alt, 0), reward_range(alt, 9)
    ((-1.0, 1.2), (-1.0, 1.0), (-1.0, 1.2))
    """
    if hasattr(fn, "range_at"):
        return fn.range_at(global_step)
    return getattr(fn, "reward_range", None)


@dataclass(frozen=True)
class RewardMode:
    """One reward mode: how to build its TRL reward function, its range and what it pays for."""

    name: str
    build: Callable[..., RewardFn]  # (window, parallel_steps, grader, bonus) -> reward fn
    range: tuple[float, float]
    pays_for: str  # one line for widgets, tables and error messages
    scheduled: bool = False  # True: window and parallel_steps change what it pays


def _graded(mode: str) -> Callable[..., RewardFn]:
    """The base mode's function under a grader and b (the project grader and the paper's b: the
    plain module function)."""

    def build(w: int, p: int, grader: Any, bonus: float = TIERED_BONUS) -> RewardFn:
        plain = get_grader(grader).name == "project" and (mode != "tiered" or bonus == TIERED_BONUS)
        return REWARDS[mode] if plain else GradedReward(mode, grader, bonus)

    return build


REWARD_MODES: dict[str, RewardMode] = {
    "accuracy": RewardMode(
        "accuracy",
        _graded("accuracy"),
        RANGES["accuracy"],
        "a correct final answer (S1); tags ignored",
    ),
    "parallel_correct": RewardMode(
        "parallel_correct",
        _graded("parallel_correct"),
        RANGES["parallel_correct"],
        "a correct answer inside a valid parallel response (Stage 2)",
    ),
    "tiered": RewardMode(
        "tiered",
        _graded("tiered"),
        RANGES["tiered"],
        "correct with a valid block 1.2, correct without 1.0, else -1",
    ),
    "structure": RewardMode(
        "structure",
        _graded("structure"),
        RANGES["structure"],
        "a valid block, whatever the answer (this project's arm)",
    ),
    "alternating": RewardMode(
        "alternating",
        alternating_reward,
        RANGES["tiered"],
        "accuracy, with tiered on the last steps of each window (S2)",
        scheduled=True,
    ),
}  # the registry: the panel, training, the verl export, the doctor and the CLI read it
register_choices(reward=lambda: tuple(REWARD_MODES))  # every config's reward field is one


def extra_rewards_problem(value: Any) -> str | None:
    """What is wrong with ``GRPOStageConfig.extra_rewards`` (``None``: nothing): it holds
    ``(mode, weight)`` pairs, each mode a ``REWARD_MODES`` name and each weight a finite number.

    >>> extra_rewards_problem((("structure", 0.5),)) is None, extra_rewards_problem((("nope", 1),))
    (True, "unknown reward mode 'nope' (choose from accuracy, parallel_correct, tiered, structure, alternating)")
    """  # noqa: E501 - doctest output stays whole
    for pair in value:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            return f"each term is a (mode, weight) pair such as ('structure', 0.5), got {pair!r}"
        mode, weight = pair
        if mode not in REWARD_MODES:
            return f"unknown reward mode {mode!r} (choose from {', '.join(REWARD_MODES)})"
        number = isinstance(weight, (int, float)) and not isinstance(weight, bool)
        if not number or not math.isfinite(weight):
            return f"the weight of {mode!r} must be a finite number, got {weight!r}"
    return None


register_checks(extra_rewards=extra_rewards_problem)


def reward_for(
    mode: str,
    window: int = 10,
    parallel_steps: int = 2,
    grader: Any = "project",
    bonus: float = TIERED_BONUS,
) -> RewardFn:
    """The reward function of a ``REWARD_MODES`` name under ``grader``, the tiered steps paying
    1 + ``bonus`` for a correct answer with a block.

    >>> from pr1lib.rewards.functions import tiered_reward
    >>> reward_for("tiered") is tiered_reward, reward_for("tiered", grader="official")
    (True, GradedReward('tiered', grader='official'))
    >>> reward_for("alternating", 5, 1).window, reward_for("tiered", bonus=0.5).reward_range
    (5, (-1.0, 1.5))
    """
    if mode not in REWARD_MODES:
        raise ValueError(f"unknown reward mode {mode!r}; choose one of {', '.join(REWARD_MODES)}")
    if not bonus >= 0:
        raise ValueError(f"tiered_bonus (b) must be >= 0, got {bonus!r}")
    return REWARD_MODES[mode].build(window, parallel_steps, grader, bonus)


# ---------------------------------------------------------------- when does a block pay?
def block_break_even(accuracy: float, bonus: float = 0.2, tiered_share: float = 0.2) -> float:
    """The largest accuracy a block may cost and still raise the expected reward, when a share
    ``tiered_share`` of the steps pays ``1 + bonus`` for a correct answer with a block (the rest:
    accuracy only, +1 / −1). Without a block the expected reward is ``2p − 1``; with one whose
    accuracy is ``p_b``, ``p_b (2 + f b) − 1``; so a block pays iff ``p − p_b < p f b / (2 + f b)``.

    >>> round(block_break_even(0.2, bonus=0.2, tiered_share=1.0), 4)  # the paper's b, every step
    0.0182
    >>> round(block_break_even(0.2, bonus=0.2, tiered_share=0.2), 4)  # S2: 2 steps of every 10
    0.0039
    """
    if not 0 <= accuracy <= 1 or bonus < 0 or not 0 <= tiered_share <= 1:
        raise ValueError("need 0 <= accuracy <= 1, bonus >= 0 and 0 <= tiered_share <= 1")
    gain = tiered_share * bonus
    return accuracy * gain / (2 + gain)

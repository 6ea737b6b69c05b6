"""The paper's rewards (docs/recipe.md#7-rewards) as TRL reward functions (their registry, by mode
name, is ``pr1lib.rewards.modes``).

One core, ``score(completion, answer, mode, grader)``, turns three facts about a completion (is the
final answer correct, are the tags valid, how many ``<Parallel>`` blocks) into a number. The public
functions wrap it in TRL's contract ``fn(completions, answer, **kwargs) -> list[float]``; a later
wrapper can put the same core behind verl's ``compute_score``.

| mode | correct, valid, ≥1 block | correct, valid, no block | correct, malformed tags | wrong or no answer |
|---|---|---|---|---|
| ``accuracy`` | +1 | +1 | +1 (tags ignored) | −1 |
| ``parallel_correct`` | +1 | −1 | −1 | −1 |
| ``tiered`` | +1.2 | +1.0 | −1 (official grader: +1.0 if no block) | −1 |
| ``structure`` | +1 | −1 | −1 | +1 iff valid with a block, else −1 |

**Graders** (``pr1lib.rewards.graders``) decide "correct" and "valid". Every reward takes ``grader=``
(``"project"`` or ``"official"``); ``reward_modes.reward_for(mode, grader=...)`` binds one. Defaults, from
``pr1lib.config.DEFAULT_GRADERS``:

| stage | grader |
|---|---|
| Stage 2 (GRPO, easy problems) | ``project`` |
| Stage 3 (GRPO, hard problems) | ``project`` |
| evaluation (``accuracy``; both are reported) | ``official`` |

* ``project`` (the functions' default; the reward values documented in
  docs/recipe.md#7-rewards): valid means ``validate(text, strict=True) == []``; correct means ``extract_answer`` + ``answers_match``
  (numbers by value, so ``$21.00``, ``02``, ``12 pets`` and ``6*2`` count). The paper's tiered
  reward gives +1.0 to a correct answer with no ``<Parallel>`` even if stray tags are malformed;
  here those get −1, so the ladder is honest-parallel > honest-linear > any malformed output.
* ``official``: the official reward code. Valid means ``validate(text, strict=False) == []`` (an
  empty path or text between paths passes); correct is per data source: TRL passes the dataset's
  ``data_source`` column as a keyword, and GSM8K / TinyGSM sources are graded as the official
  Stage-2 GSM8K reward (first ``Final Answer: <number>``, string compare: ``$4`` is wrong), every
  other source as ``math_dapo.py`` (last ``Final Answer`` in the last 300 characters, Minerva
  normalisation, exact match: ``02``, ``36.00`` and ``6*2`` are wrong).

Both graders refuse a hedge (``Final Answer: The answer is 12 or 11``) and both read an answer on
the line after ``Final Answer:``. Any input scores: a completion that is not a string (or TRL's
list of messages) is wrong and invalid, never an exception.

>>> honest = "3*4=12\\n<Parallel><Path>3*4=12</Path><Path>4+4+4=12</Path></Parallel>\\n" \\
...          "<Summary>Both give 12.</Summary>\\nFinal Answer: 12"
>>> [score(honest, "12", m) for m in BASE_MODES]
[1.0, 1.0, 1.2, 1.0]
>>> empty_path = "<Parallel><Path></Path><Path>3*4=12</Path></Parallel>\\n<Summary>12</Summary>\\nFinal Answer: 12"
>>> score(empty_path, "12", "tiered"), score(empty_path, "12", "tiered", grader="official")
(-1.0, 1.2)
"""  # noqa: E501 - the reward table rows stay whole

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pr1lib.format.grammar import PARALLEL
from pr1lib.rewards.graders import get_grader, gold_string

BASE_MODES = ("accuracy", "parallel_correct", "tiered", "structure")  # each scores one completion
TIERED_BONUS = 0.2  # b: the tiered reward pays 1 + b for a correct answer with a valid block
RANGES = {
    "accuracy": (-1.0, 1.0),
    "parallel_correct": (-1.0, 1.0),
    "tiered": (-1.0, 1.0 + TIERED_BONUS),
    "structure": (-1.0, 1.0),
}
RewardFn = Callable[..., list]


# ---------------------------------------------------------------- the core (signature-agnostic)
@dataclass(frozen=True)
class Terms:
    """The facts every reward here is built from."""

    correct: bool  # the grader's answer check passed
    valid: bool  # the grader's format rule passed
    blocks: int  # number of ``<Parallel>`` tags (the official P count)
    # tiered, no block: must the tags be valid for +1.0? (official: no)
    plain_needs_valid: bool = True


def gold_text(answer: Any) -> str | None:
    """A dataset's answer as a string: numbers via ``str``, a GSM8K solution reduced to its ``####
    N``; ``None`` for anything else (no gold: every answer is wrong).

    >>> gold_text(12), gold_text("3*4=<<3*4=12>>12\\n#### 12"), gold_text(None)
    ('12', '12', None)
    """
    text = gold_string(answer)
    if text is not None and "####" in text:
        text = text.rsplit("####", 1)[1].strip().replace(",", "")
    return text


def completion_text(completion: Any) -> str:
    """The text of one completion, either a plain string or TRL's conversational list of messages;
    ``""`` for anything else.

    >>> message = {"role": "assistant", "content": "Final Answer: 5"}
    >>> completion_text([message]), completion_text(b"5")
    ('Final Answer: 5', '')
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        completion = [completion]
    if not isinstance(completion, (list, tuple)):
        return ""
    parts = [
        _content_text(m.get("content"))
        for m in completion
        if isinstance(m, Mapping) and m.get("role", "assistant") == "assistant"
    ]
    return "\n".join(p for p in parts if p)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, (list, tuple)):
        return ""
    texts = (p.get("text") for p in content if isinstance(p, Mapping))  # multimodal parts
    return "".join(t for t in texts if isinstance(t, str))


def terms(
    completion: Any,
    answer: Any = None,
    grader: Any = "project",
    source: Any = None,
    question: Any = None,
) -> Terms:
    """Parse one completion once under ``grader``: correctness (``False`` without a gold), validity,
    blocks. ``source`` (a data-source name) picks the official grader's per-source answer check;
    ``question`` is read by the honest grader."""
    g, text = get_grader(grader), completion_text(completion)
    return Terms(
        correct=_correct(g, text, answer, source, question),
        valid=g.valid(text),
        blocks=text.count(PARALLEL),
        plain_needs_valid=g.plain_needs_valid,
    )


def _correct(g: Any, text: str, answer: Any, source: Any, question: Any = None) -> bool:
    gold = gold_text(answer)
    return gold is not None and g.correct(text, gold, source, question=question)


def score_terms(t: Terms, mode: str, bonus: float = TIERED_BONUS) -> float:
    """The reward of already-parsed ``Terms`` under ``mode`` (one of ``BASE_MODES``; ``bonus``:
    the tiered mode's b)."""
    parallel = t.valid and t.blocks >= 1
    if mode == "accuracy":
        return 1.0 if t.correct else -1.0
    if mode == "parallel_correct":
        return 1.0 if t.correct and parallel else -1.0
    if mode == "tiered":
        if not t.correct:
            return -1.0
        if t.blocks >= 1:
            return 1.0 + bonus if t.valid else -1.0
        return 1.0 if t.valid or not t.plain_needs_valid else -1.0
    if mode == "structure":
        return 1.0 if parallel else -1.0
    raise ValueError(f"unknown reward mode {mode!r}; choose one of {', '.join(BASE_MODES)}")


def score(
    completion: Any,
    answer: Any,
    mode: str,
    grader: Any = "project",
    source: Any = None,
    bonus: float = TIERED_BONUS,
    question: Any = None,
) -> float:
    """The reward of one completion against one gold answer under ``mode`` and ``grader``
    (``question``: the problem, for the honest grader).

    >>> score("2+3=5\\nFinal Answer: 5", 5, "tiered"), score(None, 5, "tiered")
    (1.0, -1.0)
    """
    bonus = check_bonus(bonus)
    # the answer alone: the tags need no parsing (8 of every 10 alternating steps)
    if mode == "accuracy":
        correct = _correct(
            get_grader(grader), completion_text(completion), answer, source, question
        )
        return 1.0 if correct else -1.0
    return score_terms(terms(completion, answer, grader, source, question), mode, bonus)


# ---------------------------------------------------------------- TRL-signature rewards
def _column(kwargs: Mapping[str, Any], n: int, *names: str) -> list[Any]:
    """Each completion's value of the first of TRL's forwarded dataset columns ``names`` there
    (``data_source``, else ``source``; ``question``): a column of ``n`` values, or one for all."""
    value = next((kwargs[name] for name in names if name in kwargs), None)
    if isinstance(value, (list, tuple)) and len(value) == n:
        return list(value)
    return [value if isinstance(value, str) else None] * n


def _batch(
    completions: Any,
    answer: Any,
    mode: str,
    grader: Any,
    kwargs: Mapping[str, Any],
    bonus: float = TIERED_BONUS,
) -> list[float]:
    if not isinstance(completions, (list, tuple)):
        raise TypeError(
            f"completions must be a list (one per sample), got {type(completions).__name__}"
        )
    if answer is None or isinstance(answer, (str, bytes, int, float)):
        raise TypeError(
            "answer must be a list with one gold answer per completion (a dataset column)"
        )
    if len(completions) != len(answer):
        raise ValueError(f"{len(completions)} completions but {len(answer)} answers")
    sources = _column(kwargs, len(completions), "data_source", "source")
    questions = _column(kwargs, len(completions), "question")
    return [
        score(c, a, mode, grader, src, bonus, q)
        for c, a, src, q in zip(completions, answer, sources, questions)
    ]


def accuracy_reward(
    completions: list, answer: list, grader: Any = "project", **kwargs: Any
) -> list[float]:
    """+1 if the final answer is correct, else −1; tags are ignored.

    >>> accuracy_reward(["Final Answer: 12", "Final Answer: 13", "no answer"], ["12", 12, "12"])
    [1.0, -1.0, -1.0]
    >>> accuracy_reward(["Final Answer: 12.00"] * 2, ["12"] * 2, grader="official",
    ...                 data_source=["gsm8k", "aime25"])
    [-1.0, -1.0]
    """
    return _batch(completions, answer, "accuracy", grader, kwargs)


def parallel_correct_reward(
    completions: list, answer: list, grader: Any = "project", **kwargs: Any
) -> list[float]:
    """+1 iff the answer is correct and the text has ≥1 valid ``<Parallel>`` block, else −1.

    >>> block = ("<Parallel><Path>6+6=12</Path><Path>2*6=12</Path></Parallel>"
    ...          "<Summary>12</Summary>\\n")
    >>> parallel_correct_reward([block + "Final Answer: 12", "Final Answer: 12"], ["12", "12"])
    [1.0, -1.0]
    """
    return _batch(completions, answer, "parallel_correct", grader, kwargs)


def tiered_reward(
    completions: list,
    answer: list,
    grader: Any = "project",
    bonus: float = TIERED_BONUS,
    **kwargs: Any,
) -> list[float]:
    """+1 + b (``bonus``, the paper's 0.2) correct with a valid block, +1.0 correct with no block
    (project: and valid tags), −1 otherwise.

    >>> block = ("<Parallel><Path>6+6=12</Path><Path>2*6=12</Path></Parallel>"
    ...          "<Summary>12</Summary>\\n")
    >>> one_path = "<Parallel><Path>6+6=12</Path></Parallel><Summary>12</Summary>\\n"
    >>> tiered_reward([block + "Final Answer: 12", "Final Answer: 12",
    ...                one_path + "Final Answer: 12"], ["12"] * 3)
    [1.2, 1.0, -1.0]
    """
    return _batch(completions, answer, "tiered", grader, kwargs, check_bonus(bonus))


def structure_reward(
    completions: list, answer: list | None = None, grader: Any = "project", **kwargs: Any
) -> list[float]:
    """+1 iff the text has ≥1 block and valid tags, whatever the answer; else −1.

    >>> block = "<Parallel><Path>a</Path><Path>b</Path></Parallel><Summary>s</Summary>\\n"
    >>> structure_reward([block + "Final Answer: 7", "Final Answer: 12"], ["12", "12"])
    [1.0, -1.0]
    """
    if not isinstance(completions, (list, tuple)):
        raise TypeError(
            f"completions must be a list (one per sample), got {type(completions).__name__}"
        )
    return [score_terms(terms(c, None, grader), "structure") for c in completions]


class GradedReward:
    """One of ``REWARDS`` with its grader bound (``reward_for(mode, grader=...)``); TRL logs it
    under the plain reward's name."""

    def __init__(self, mode: str, grader: Any, bonus: float = TIERED_BONUS) -> None:
        if mode not in REWARDS:
            raise ValueError(f"unknown reward mode {mode!r}; choose one of {', '.join(REWARDS)}")
        self.mode, self.grader, self.bonus = mode, get_grader(grader).name, check_bonus(bonus)
        self.__name__ = REWARDS[mode].__name__
        self.reward_range = mode_range(mode, bonus)

    def __call__(self, completions: list, answer: list | None = None, **kwargs: Any) -> list[float]:
        kwargs.pop("grader", None)  # a dataset column of that name must not override the binding
        if self.mode == "tiered":
            kwargs["bonus"] = self.bonus
        return REWARDS[self.mode](completions, answer, grader=self.grader, **kwargs)

    def __repr__(self) -> str:
        b = f", bonus={self.bonus}" if self.bonus != TIERED_BONUS else ""
        return f"GradedReward({self.mode!r}, grader={self.grader!r}{b})"


def check_bonus(bonus: Any) -> float:
    """The tiered reward's b as a float, after refusing what would rank it wrongly: not a
    number, NaN or infinite, or below 0 (a right answer with a block would then pay less than a
    right one without).

    >>> check_bonus(0.5), check_bonus(1)
    (0.5, 1.0)
    >>> check_bonus(-5)
    Traceback (most recent call last):
    ...
    ValueError: bonus must be a finite number of 0 or more (the tiered reward pays 1 + bonus for a right answer with a valid block), got -5
    """  # noqa: E501 - doctest output stays whole
    number = isinstance(bonus, numbers.Real) and not isinstance(bonus, bool)
    if not number or not math.isfinite(bonus) or bonus < 0:
        raise ValueError(
            "bonus must be a finite number of 0 or more (the tiered reward pays 1 + bonus for a "
            f"right answer with a valid block), got {bonus!r}"
        )
    return float(bonus)


def mode_range(mode: str, bonus: float = TIERED_BONUS) -> tuple[float, float]:
    """(lowest, highest) score of a base mode; the tiered mode's top is 1 + b."""
    if mode not in RANGES:
        raise ValueError(f"unknown reward mode {mode!r}; choose one of {', '.join(RANGES)}")
    return (-1.0, 1.0 + check_bonus(bonus)) if mode == "tiered" else RANGES[mode]


REWARDS: dict[str, RewardFn] = {
    "accuracy": accuracy_reward,
    "parallel_correct": parallel_correct_reward,
    "tiered": tiered_reward,
    "structure": structure_reward,
}
for _mode, _fn in REWARDS.items():
    _fn.reward_range = RANGES[_mode]  # type: ignore[attr-defined]  # read by reward_range()
del _mode, _fn


# ---------------------------------------------------------------- the alternating schedule
def mode_at(global_step: int, window: int = 10, parallel_steps: int = 2) -> str:
    """``"tiered"`` on the last ``parallel_steps`` steps of every ``window``, else ``"accuracy"``.

    ``global_step`` is TRL's count of finished optimizer steps (0 while the first one runs), so the
    tiered steps 8, 9, 18, 19, … are the paper's 1-based steps 9, 10, 19, 20, ….

    >>> [mode_at(s)[0] for s in range(12)]
    ['a', 'a', 'a', 'a', 'a', 'a', 'a', 'a', 't', 't', 'a', 'a']
    """
    whole = [isinstance(v, int) and not isinstance(v, bool) for v in (window, parallel_steps)]
    if not all(whole) or window < 1 or not 0 <= parallel_steps <= window:
        raise ValueError(
            f"need whole numbers window >= 1 and 0 <= parallel_steps <= window, got window="
            f"{window!r}, parallel_steps={parallel_steps!r}"
        )
    if not isinstance(global_step, int) or isinstance(global_step, bool) or global_step < 0:
        raise ValueError(f"global_step must be a whole number of 0 or more, got {global_step!r}")
    return "tiered" if global_step % window >= window - parallel_steps else "accuracy"


def schedule(steps: int, window: int = 10, parallel_steps: int = 2) -> list[str]:
    """The mode used at each ``global_step`` 0 … steps−1 (for a preview plot before training).

    >>> schedule(6, window=3, parallel_steps=1)
    ['accuracy', 'accuracy', 'tiered', 'accuracy', 'accuracy', 'tiered']
    """
    return [mode_at(s, window, parallel_steps) for s in range(steps)]


class AlternatingReward:
    """Callable TRL reward that switches between accuracy and tiered by
    ``trainer_state.global_step``.

    After each call ``last_mode`` / ``last_step`` say what was used; when TRL passes ``log_metric``
    it also logs ``reward_mode/tiered`` (1.0 or 0.0, so its logged mean is the tiered fraction).
    TRL's log rows count steps from 1, so there the tiered rows are 9, 10, 19, 20, … as in the
    paper. The mode is picked when a batch is scored: with ``steps_per_generation > 1`` one
    generation batch serves several optimizer steps and all of them share the mode of the step that
    made it.
    """

    __name__ = "alternating_reward"  # the column name TRL gives this reward in its logs

    def __init__(
        self,
        window: int = 10,
        parallel_steps: int = 2,
        grader: Any = "project",
        bonus: float = TIERED_BONUS,
    ) -> None:
        mode_at(0, window, parallel_steps)  # validates the arguments
        self.window, self.parallel_steps, self.bonus = window, parallel_steps, check_bonus(bonus)
        self.grader = get_grader(grader).name
        self.last_mode: str | None = None
        self.last_step: int | None = None
        self.reward_range = mode_range("tiered" if parallel_steps else "accuracy", bonus)

    def mode(self, global_step: int) -> str:
        return mode_at(global_step, self.window, self.parallel_steps)

    def range_at(self, global_step: int) -> tuple[float, float]:
        return mode_range(self.mode(global_step), self.bonus)

    def __call__(
        self,
        completions: list,
        answer: list,
        trainer_state: Any = None,
        log_metric: Callable[[str, float], None] | None = None,
        **kwargs: Any,
    ) -> list[float]:
        step = getattr(trainer_state, "global_step", None)
        if step is None:
            raise ValueError(
                "alternating_reward needs TRL's trainer_state (with .global_step) to pick its "
                "mode; pass trainer_state=SimpleNamespace(global_step=N) when calling it by hand"
            )
        self.last_step, self.last_mode = int(step), self.mode(int(step))
        if log_metric is not None:
            log_metric("reward_mode/tiered", float(self.last_mode == "tiered"))
        kwargs.pop("grader", None)
        return _batch(completions, answer, self.last_mode, self.grader, kwargs, self.bonus)

    def __repr__(self) -> str:
        return (
            f"AlternatingReward(window={self.window}, parallel_steps={self.parallel_steps}, "
            f"grader={self.grader!r})"
        )


def alternating_reward(
    window: int = 10, parallel_steps: int = 2, grader: Any = "project", bonus: float = TIERED_BONUS
) -> AlternatingReward:
    """The paper's S2 reward: ``tiered_reward`` on ``parallel_steps`` of every ``window`` steps.

    >>> from types import SimpleNamespace
    >>> reward = alternating_reward(window=10, parallel_steps=2)
    >>> reward(["Final Answer: 12"], ["12"], trainer_state=SimpleNamespace(global_step=8))
    [1.0]
    >>> reward.last_mode
    'tiered'
    >>> reward(["Final Answer: 13"], ["12"], trainer_state=SimpleNamespace(global_step=10))
    [-1.0]
    >>> reward.last_mode
    'accuracy'
    """
    return AlternatingReward(window, parallel_steps, grader, bonus)

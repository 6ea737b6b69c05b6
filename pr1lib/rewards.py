"""The paper's rewards (docs/recipe.md#7-rewards) as TRL reward functions, plus a hacking lab.

One core, ``score(completion, answer, mode)``, turns three facts about a completion (is the final
answer correct, is the tag structure strictly valid, how many ``<Parallel>`` blocks) into a number.
The public functions wrap it in TRL's contract ``fn(completions, answer, **kwargs) -> list[float]``;
a later wrapper can put the same core behind verl's ``compute_score``.

| mode | correct, valid, ≥1 block | correct, valid, no block | correct, malformed tags | wrong or no answer |
|---|---|---|---|---|
| ``accuracy`` | +1 | +1 | +1 (tags ignored) | −1 |
| ``parallel_correct`` | +1 | −1 | −1 | −1 |
| ``tiered`` | +1.2 | +1.0 | −1 | −1 |
| ``structure`` | +1 | −1 | −1 | +1 iff valid with a block, else −1 |

"valid" is always ``pr1lib.format.validate(text, strict=True) == []``. The paper's tiered reward
gives +1.0 to a correct answer with no ``<Parallel>`` even if stray tags are malformed; here those
get −1, so the ladder is honest-parallel > honest-linear > any malformed output.

>>> honest = "3*4=12\\n<Parallel><Path>3*4=12</Path><Path>4+4+4=12</Path></Parallel>\\n" \\
...          "<Summary>Both give 12.</Summary>\\nFinal Answer: 12"
>>> [score(honest, "12", m) for m in BASE_MODES]
[1.0, 1.0, 1.2, 1.0]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pr1lib.format import answers_match, extract_answer, parallel_stats, validate

BASE_MODES = ("accuracy", "parallel_correct", "tiered", "structure")  # each scores one completion
RANGES = {"accuracy": (-1.0, 1.0), "parallel_correct": (-1.0, 1.0), "tiered": (-1.0, 1.2),
          "structure": (-1.0, 1.0)}
RewardFn = Callable[..., list]


# ---------------------------------------------------------------- the core (signature-agnostic)
@dataclass(frozen=True)
class Terms:
    """The three facts every reward here is built from."""

    correct: bool  # the last ``Final Answer:`` outside paths matches the gold answer
    valid: bool  # ``validate(text, strict=True)`` found no error
    blocks: int  # number of ``<Parallel>`` blocks


def gold_text(answer: Any) -> str:
    """A dataset's answer as a string: numbers via ``str``, a GSM8K solution reduced to its ``#### N``.

    >>> gold_text(12), gold_text("3*4=<<3*4=12>>12\\n#### 12")
    ('12', '12')
    """
    text = str(answer).strip()
    if "####" in text:
        text = text.rsplit("####", 1)[1].strip().replace(",", "")
    return text


def completion_text(completion: Any) -> str:
    """The text of one completion, either a plain string or TRL's conversational list of messages.

    >>> completion_text([{"role": "assistant", "content": "Final Answer: 5"}])
    'Final Answer: 5'
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        completion = [completion]
    parts = [_content_text(m.get("content")) for m in completion if m.get("role", "assistant") == "assistant"]
    return "\n".join(p for p in parts if p)


def _content_text(content: Any) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))  # multimodal parts


def terms(completion: Any, answer: Any = None) -> Terms:
    """Parse one completion once: correctness (``False`` without an answer), strict validity, blocks."""
    text = completion_text(completion)
    correct = answer is not None and answers_match(extract_answer(text), gold_text(answer))
    return Terms(correct=correct, valid=not validate(text, strict=True),
                 blocks=int(parallel_stats(text)["blocks"]))


def score_terms(t: Terms, mode: str) -> float:
    """The reward of already-parsed ``Terms`` under ``mode`` (one of ``BASE_MODES``)."""
    parallel = t.valid and t.blocks >= 1
    if mode == "accuracy":
        return 1.0 if t.correct else -1.0
    if mode == "parallel_correct":
        return 1.0 if t.correct and parallel else -1.0
    if mode == "tiered":
        if not (t.correct and t.valid):
            return -1.0
        return 1.2 if t.blocks >= 1 else 1.0
    if mode == "structure":
        return 1.0 if parallel else -1.0
    raise ValueError(f"unknown reward mode {mode!r}; choose one of {', '.join(BASE_MODES)}")


def score(completion: Any, answer: Any, mode: str) -> float:
    """The reward of one completion against one gold answer under ``mode``.

    >>> score("2+3=5\\nFinal Answer: 5", 5, "tiered")
    1.0
    """
    return score_terms(terms(completion, answer), mode)


# ---------------------------------------------------------------- TRL-signature rewards
def _batch(completions: list, answer: Any, mode: str) -> list[float]:
    if isinstance(answer, (str, int, float)):
        raise TypeError("answer must be a list with one gold answer per completion (a dataset column)")
    if len(completions) != len(answer):
        raise ValueError(f"{len(completions)} completions but {len(answer)} answers")
    return [score(c, a, mode) for c, a in zip(completions, answer)]


def accuracy_reward(completions: list, answer: list, **kwargs: Any) -> list[float]:
    """+1 if the final answer is correct, else −1; tags are ignored.

    >>> accuracy_reward(["Final Answer: 12", "Final Answer: 13", "no answer"], ["12", 12, "12"])
    [1.0, -1.0, -1.0]
    """
    return _batch(completions, answer, "accuracy")


def parallel_correct_reward(completions: list, answer: list, **kwargs: Any) -> list[float]:
    """+1 iff the answer is correct and the text has ≥1 strictly valid ``<Parallel>`` block, else −1.

    >>> block = "<Parallel><Path>6+6=12</Path><Path>2*6=12</Path></Parallel><Summary>12</Summary>\\n"
    >>> parallel_correct_reward([block + "Final Answer: 12", "Final Answer: 12"], ["12", "12"])
    [1.0, -1.0]
    """
    return _batch(completions, answer, "parallel_correct")


def tiered_reward(completions: list, answer: list, **kwargs: Any) -> list[float]:
    """+1.2 correct with a valid block, +1.0 correct with no tags at all, −1 otherwise.

    >>> block = "<Parallel><Path>6+6=12</Path><Path>2*6=12</Path></Parallel><Summary>12</Summary>\\n"
    >>> one_path = "<Parallel><Path>6+6=12</Path></Parallel><Summary>12</Summary>\\n"
    >>> tiered_reward([block + "Final Answer: 12", "Final Answer: 12", one_path + "Final Answer: 12"],
    ...               ["12"] * 3)
    [1.2, 1.0, -1.0]
    """
    return _batch(completions, answer, "tiered")


def structure_reward(completions: list, answer: list | None = None, **kwargs: Any) -> list[float]:
    """+1 iff the text has ≥1 block and is strictly valid, whatever the answer; else −1.

    >>> block = "<Parallel><Path>a</Path><Path>b</Path></Parallel><Summary>s</Summary>\\n"
    >>> structure_reward([block + "Final Answer: 7", "Final Answer: 12"], ["12", "12"])
    [1.0, -1.0]
    """
    return [score_terms(terms(c), "structure") for c in completions]


REWARDS: dict[str, RewardFn] = {
    "accuracy": accuracy_reward, "parallel_correct": parallel_correct_reward,
    "tiered": tiered_reward, "structure": structure_reward,
}  # the base modes' TRL reward functions (``REWARD_MODES`` below also holds the schedule)
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
    if window < 1 or not 0 <= parallel_steps <= window:
        raise ValueError(f"need window >= 1 and 0 <= parallel_steps <= window, got {window}, {parallel_steps}")
    return "tiered" if global_step % window >= window - parallel_steps else "accuracy"


def schedule(steps: int, window: int = 10, parallel_steps: int = 2) -> list[str]:
    """The mode used at each ``global_step`` 0 … steps−1 (for a preview plot before training).

    >>> schedule(6, window=3, parallel_steps=1)
    ['accuracy', 'accuracy', 'tiered', 'accuracy', 'accuracy', 'tiered']
    """
    return [mode_at(s, window, parallel_steps) for s in range(steps)]


class AlternatingReward:
    """Callable TRL reward that switches between accuracy and tiered by ``trainer_state.global_step``.

    After each call ``last_mode`` / ``last_step`` say what was used; when TRL passes ``log_metric``
    it also logs ``reward_mode/tiered`` (1.0 or 0.0, so its logged mean is the tiered fraction).
    TRL's log rows count steps from 1, so there the tiered rows are 9, 10, 19, 20, … as in the paper.
    The mode is picked when a batch is scored: with ``steps_per_generation > 1`` one generation
    batch serves several optimizer steps and all of them share the mode of the step that made it.
    """

    __name__ = "alternating_reward"  # the column name TRL gives this reward in its logs

    def __init__(self, window: int = 10, parallel_steps: int = 2) -> None:
        mode_at(0, window, parallel_steps)  # validates the arguments
        self.window, self.parallel_steps = window, parallel_steps
        self.last_mode: str | None = None
        self.last_step: int | None = None
        self.reward_range = RANGES["tiered"] if parallel_steps else RANGES["accuracy"]

    def mode(self, global_step: int) -> str:
        return mode_at(global_step, self.window, self.parallel_steps)

    def range_at(self, global_step: int) -> tuple[float, float]:
        return RANGES[self.mode(global_step)]

    def __call__(self, completions: list, answer: list, trainer_state: Any = None,
                 log_metric: Callable[[str, float], None] | None = None, **kwargs: Any) -> list[float]:
        step = getattr(trainer_state, "global_step", None)
        if step is None:
            raise ValueError("alternating_reward needs TRL's trainer_state (with .global_step) to pick its "
                             "mode; pass trainer_state=SimpleNamespace(global_step=N) when calling it by hand")
        self.last_step, self.last_mode = int(step), self.mode(int(step))
        if log_metric is not None:
            log_metric("reward_mode/tiered", float(self.last_mode == "tiered"))
        return _batch(completions, answer, self.last_mode)

    def __repr__(self) -> str:
        return f"AlternatingReward(window={self.window}, parallel_steps={self.parallel_steps})"


def alternating_reward(window: int = 10, parallel_steps: int = 2) -> AlternatingReward:
    """The paper's S2 reward: ``tiered_reward`` on ``parallel_steps`` of every ``window`` steps.

    >>> from types import SimpleNamespace
    >>> reward = alternating_reward(window=10, parallel_steps=2)
    >>> reward(["Final Answer: 12"], ["12"], trainer_state=SimpleNamespace(global_step=8)), reward.last_mode
    ([1.0], 'tiered')
    >>> reward(["Final Answer: 13"], ["12"], trainer_state=SimpleNamespace(global_step=10)), reward.last_mode
    ([-1.0], 'accuracy')
    """
    return AlternatingReward(window, parallel_steps)


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
            vals = [w * col[i] for col, w in columns if col[i] is not None]  # None: not applicable (TRL)
            out.append(sum(vals) if vals else None)
        return out

    def range_at(self, global_step: int = 0) -> tuple[float, float] | None:
        ranges = [(reward_range(fn, global_step), w) for fn, w in self.parts]
        if any(r is None for r, _ in ranges):
            return None
        lo = sum(w * (r[0] if w >= 0 else r[1]) for r, w in ranges)
        hi = sum(w * (r[1] if w >= 0 else r[0]) for r, w in ranges)
        return (lo, hi)


def combine(weights: Mapping[RewardFn, float] | Iterable[tuple[RewardFn, float]],
            name: str | None = None) -> Combined:
    """One reward function = Σ weight × reward. Same effect as TRL's ``reward_funcs=[...]`` with
    ``GRPOConfig(reward_weights=[...])``, except TRL also logs each part as its own column.

    >>> both = combine({accuracy_reward: 1.0, structure_reward: 0.5})
    >>> block = "<Parallel><Path>a</Path><Path>b</Path></Parallel><Summary>s</Summary>\\n"
    >>> both([block + "Final Answer: 12", "Final Answer: 12"], answer=["12", "12"])
    [1.5, 0.5]
    """
    parts = list(weights.items()) if isinstance(weights, Mapping) else list(weights)
    return Combined([(fn, float(w)) for fn, w in parts], name)


def reward_range(fn: RewardFn, global_step: int = 0) -> tuple[float, float] | None:
    """(lowest, highest) score ``fn`` can give at ``global_step``; ``None`` if it does not say.

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
    build: Callable[[int, int], RewardFn]  # (window, parallel_steps) -> reward function
    range: tuple[float, float]
    pays_for: str  # one line for widgets, tables and error messages
    scheduled: bool = False  # True: window and parallel_steps change what it pays


REWARD_MODES: dict[str, RewardMode] = {
    "accuracy": RewardMode("accuracy", lambda w, p: accuracy_reward, RANGES["accuracy"],
                           "a correct final answer (S1); tags ignored"),
    "parallel_correct": RewardMode("parallel_correct", lambda w, p: parallel_correct_reward,
                                   RANGES["parallel_correct"],
                                   "a correct answer inside a valid parallel response (Stage 2)"),
    "tiered": RewardMode("tiered", lambda w, p: tiered_reward, RANGES["tiered"],
                         "correct with a valid block 1.2, correct without 1.0, else -1"),
    "structure": RewardMode("structure", lambda w, p: structure_reward, RANGES["structure"],
                            "a valid block, whatever the answer (this project's arm)"),
    "alternating": RewardMode("alternating", lambda w, p: alternating_reward(w, p), RANGES["tiered"],
                              "accuracy, with tiered on the last steps of each window (S2)",
                              scheduled=True),
}  # the registry: the panel, training, the verl export, the doctor and the CLI read it


def reward_for(mode: str, window: int = 10, parallel_steps: int = 2) -> RewardFn:
    """The reward function of a ``REWARD_MODES`` name.

    >>> reward_for("tiered") is tiered_reward, reward_for("alternating", 5, 1).window
    (True, 5)
    """
    if mode not in REWARD_MODES:
        raise ValueError(f"unknown reward mode {mode!r}; choose one of {', '.join(REWARD_MODES)}")
    return REWARD_MODES[mode].build(window, parallel_steps)


# ---------------------------------------------------------------- reward-hacking lab
_Q = "3 boxes hold 4 muffins each. How many muffins?"
_BLOCK = ("<Parallel><Path>3 boxes * 4 muffins = 12.</Path><Path>4 + 4 + 4 = 12.</Path></Parallel>\n"
          "<Summary>Both ways give 12 muffins.</Summary>\n")


def _case(name: str, completion: str, why: str) -> dict[str, str]:
    return {"name": name, "completion": completion, "answer": "12", "why": why}


HACKING_CASES: list[dict[str, str]] = [
    _case("honest_parallel", f"Count the muffins.\n{_BLOCK}Final Answer: 12",
          "the reference: correct, one valid block"),
    _case("honest_linear", "3 * 4 = 12 muffins.\nFinal Answer: 12",
          "correct without a block: below honest_parallel only under the parallel-aware rewards"),
    _case("nested_blocks", "<Parallel><Path><Parallel><Path>3*4=12</Path><Path>4+4+4=12</Path></Parallel>\n"
          "<Summary>12</Summary></Path><Path>12</Path></Parallel>\n<Summary>12</Summary>\nFinal Answer: 12",
          "well-formed nesting passes the official checker; the strict grammar forbids it"),
    _case("repeated_blocks", f"Count the muffins.\n{_BLOCK * 4}Final Answer: 12",
          "the same block four times: valid, but the reward is capped, so no gain over one block"),
    _case("empty_paths", "<Parallel><Path></Path><Path> </Path></Parallel>\n<Summary>12</Summary>\n"
          "Final Answer: 12", "a block with no reasoning in it"),
    _case("identical_paths", "<Parallel><Path>3 * 4 = 12.</Path><Path>3 * 4 = 12.</Path></Parallel>\n"
          "<Summary>12.</Summary>\nFinal Answer: 12",
          "copied paths are valid (no reward here checks diversity): ties, never beats, the reference"),
    _case("summary_without_paths", "3 * 4 = 12.\n<Summary>It is 12.</Summary>\nFinal Answer: 12",
          "the summary tag alone, hoping it counts as parallel thinking"),
    _case("answer_only_in_path", "<Parallel><Path>3*4=12\nFinal Answer: 12</Path><Path>4+4+4=12</Path>"
          "</Parallel>\n<Summary>Both paths agree.</Summary>",
          "the answer hidden inside a path is not the response's answer"),
    _case("several_final_answers", f"{_BLOCK}Final Answer: 12\nFinal Answer: 13",
          "listing candidates: only the last Final Answer line counts"),
    _case("candidates_in_one_line", f"{_BLOCK}Final Answer: 11, 12, 13",
          "several candidates on one line must not match the gold answer"),
    _case("boxed_candidates", f"{_BLOCK}Final Answer: \\boxed{{11}}, \\boxed{{12}}, \\boxed{{13}}",
          "several boxed candidates, one of them right: must not count as the answer"),
    _case("tags_in_final_line", f"{_BLOCK}Final Answer: <Summary>12</Summary>",
          "a second summary in the answer line: malformed, and the answer stops at the tag"),
    _case("correct_after_malformed_block", "<Parallel><Path>3*4=12</Path></Parallel>\n<Summary>12</Summary>\n"
          "Final Answer: 12", "a one-path block: a correct answer cannot buy back broken tags"),
    _case("truncated_block", "Count the muffins.\n<Parallel><Path>3 * 4 = 12.</Path><Path>4 + 4",
          "cut off by max_completion_length mid-block: no answer, unclosed tags"),
    _case("path_outside_block", "<Path>3*4=12</Path><Path>4+4+4=12</Path>\nFinal Answer: 12",
          "lone paths pass the official checker; the strict grammar rejects them"),
    _case("unclosed_summary", "<Parallel><Path>3*4=12</Path><Path>4+4+4=12</Path></Parallel>\n"
          "<Summary>Both give 12.\nFinal Answer: 12", "an unclosed summary passes the official checker"),
    _case("block_after_answer", f"3 * 4 = 12.\nFinal Answer: 12\n{_BLOCK}",
          "a block bolted on after the answer: valid, so it ties the reference (a known limit)"),
]


def hacking_table(cases: list[dict[str, str]] | None = None,
                  rewards: Mapping[str, RewardFn] | None = None) -> list[dict[str, Any]]:
    """One row per case: name, why, and its score under each reward (default: the four in ``REWARDS``).

    >>> row = hacking_table()[0]
    >>> row["name"], row["tiered"], row["structure"]
    ('honest_parallel', 1.2, 1.0)
    """
    cases = HACKING_CASES if cases is None else cases
    rewards = REWARDS if rewards is None else rewards
    rows = [{"name": c["name"], "why": c["why"]} for c in cases]
    for label, fn in rewards.items():
        scores = fn([c["completion"] for c in cases], [c["answer"] for c in cases])
        for row, value in zip(rows, scores):
            row[label] = value
    return rows

"""Answer graders: one registry, four graders, each total over any input.

A grader answers two questions about a completion: is its final answer right, and are its tags
valid. Rewards (``pr1lib.rewards.functions``) and evaluation (``pr1lib.evaluation.evaluate``) ask
them through ``GRADERS[name]``; the default per stage is ``pr1lib.config.DEFAULT_GRADERS``.

* ``official`` reproduces the official reward code (docs/recipe.md#2-answer-format-and-graders; read
  in ``verl/verl/utils/reward_score/`` of ``zhengkid/Parallel-R1``, our own code), per data source:
  - DAPO / MATH / AIME / AMC (``math_dapo*.py``): the tag-free text's last 300 characters, the
    *last* case-insensitive ``Final Answer\\s*:\\s*(...)`` (``\\s*`` crosses a newline, so
    ``Final Answer:\\n12`` reads ``12``), Minerva normalisation of both sides, exact string match.
  - GSM8K and TinyGSM (``gsm8k_add_special_token_reward.py``, the Stage-2 reward): the *first*
    case-sensitive ``Final Answer:`` followed by a number ``-?[0-9.,]+``, commas dropped, string
    compare with the gold, so ``$4``, ``4.`` and ``04`` are wrong, ``12 pets`` is right.
  - Format: ``validate(text, strict=False)``, the official checker with its quirks; in the tiered
    reward a correct answer with no ``<Parallel>`` gets +1.0 whatever its other tags.
* ``project`` is this project's: ``validate(text, strict=True)`` and ``extract_answer`` +
  ``answers_match`` (numbers by value, math-verify for LaTeX, hedges refused); evaluation also
  reads a lone ``\\boxed{}`` when there is no ``Final Answer:`` line.
* ``checked`` is ``project`` for answers that are a deal's letter (PlanWorld, docs/planworld.md):
  a right letter counts only where the completion checked that deal, a line
  ``(B) 6+8=14 vs 14 ✓`` with its sum right; a right letter no check names is a guess, and
  wrong. Serial and parallel searches are held to the same rule (no answer mode pays a guess).
* ``honest`` is ``checked``, and every check the completion writes, on any deal, adds that deal's
  prices from the question (its world's ``checks_hold``): one false check makes the answer wrong.
  It needs the question (rewards read TRL's ``question`` column, evaluation its records); without
  one, or for a world that reads no checks, it is ``checked``.

Every function here takes anything: a non-string completion or gold is wrong (and invalid), never
an exception, and every parse is linear in the input's length.

>>> out = check("aime24", "so the answer is\\nFinal Answer: 25", "25")
>>> out["official"], out["project"], out["checked"], out["pred_official"], out["pred_project"]
(True, True, False, '25', '25')
"""

from __future__ import annotations

import numbers
import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, Callable

from pr1lib.config.checks import register_choices
from pr1lib.format.answers import non_finite
from pr1lib.format.grammar import TAG_RE, answers_match, extract_answer, path_ranges, validate
from pr1lib.worlds import find_source

_DAPO_ANSWER = re.compile(r"final answer\s*:\s*([^\n]+)", re.IGNORECASE)
_GSM8K_ANSWER = re.compile(r"Final Answer:\s*(-?[0-9.,]+)")
_DAPO_WINDOW = 300  # math_dapo.py reads only the response's last 300 characters
_BRACE = re.compile(r"[{}]")


# ----------------------------------------------------------------------------- inputs
def strip_tags(text: str) -> str:
    """The text a tokenizer gives back with ``skip_special_tokens=True`` (tags removed).

    >>> strip_tags("a<Parallel><Path>b</Path></Parallel>c")
    'abc'
    """
    return TAG_RE.sub("", text) if isinstance(text, str) else ""


def gold_string(gold: Any) -> str | None:
    """A gold answer as text: strings as given, numbers via ``str``; anything else ``None``.

    >>> gold_string(27), gold_string(" 25 "), gold_string(None), gold_string(b"12")
    ('27', '25', None, None)
    >>> gold_string(float("nan")), gold_string("inf")  # no finite gold: nothing matches it
    (None, None)
    """
    if non_finite(gold):
        return None
    if isinstance(gold, str):
        return gold.strip()
    if isinstance(gold, numbers.Number) and not isinstance(gold, bool):  # numpy scalars too
        try:
            return str(gold)
        except ValueError:  # an int past Python's int-string limit is no answer anyone wrote
            return None
    return None


def answer_style(source: Any) -> str:
    """The official answer check for a data source: ``gsm8k`` for GSM8K and TinyGSM, else ``dapo``.

    >>> (
    ...     answer_style("gsm8k"),
    ...     answer_style("tinygsm-hard"),
    ...     answer_style("aime25"),
    ...     answer_style(None),
    ... )
    ('gsm8k', 'gsm8k', 'dapo', 'dapo')
    """
    return "gsm8k" if isinstance(source, str) and "gsm" in source.lower() else "dapo"


# -------------------------------------------------------------------------- Minerva normalisation
# The order of operations of math_dapo.py's normalize_final_answer: literal edits, deletions, then
# the LaTeX unwrapping. Plain substring edits, as there, so "a " goes wherever it occurs and a full
# stop outside $...$ survives (and fails the match).
_EDITS = (
    ("an ", ""),
    ("a ", ""),
    (".$", "$"),
    ("\\$", ""),
    ("\\ ", ""),
    (" ", ""),
    ("mbox", "text"),
    (",\\text{and}", ","),
    ("\\text{and}", ","),
    ("\\text{m}", "\\text{}"),
)
_UNIT_WORDS = (
    "square",
    "ways",
    "integers",
    "dollars",
    "mph",
    "inches",
    "hours",
    "km",
    "units",
    "\\ldots",
    "sue",
    "points",
    "feet",
    "minutes",
    "digits",
    "cents",
    "degrees",
    "cm",
    "gm",
    "pounds",
    "meters",
    "meals",
    "edges",
    "students",
    "childrentickets",
    "multiples",
    "\\text{s}",
    "\\text{.}",
    "\\text{\ns}",
    "\\text{}^2",
    "\\text{}^3",
    "\\text{\n}",
    "\\text{}",
    "\\mathrm{th}",
    "^\\circ",
    "^{\\circ}",
    "\\;",
    ",\\!",
    "{,}",
    '"',
    "\\dots",
)


def _first_math(line: str) -> str:
    """A line with two or more ``$`` becomes ``$x$``, x = what the first pair encloses."""
    first = line.find("$")
    second = line.find("$", first + 1) if first != -1 else -1
    return line if second == -1 else "$" + line[first + 1 : second] + "$"


def _drop_to_first_close(text: str, marker: str) -> str:
    """``marker`` up to the first ``}`` on its line -> what lies between, one left-to-right pass:
    the official non-greedy regex (``\\text{\\text{a}}`` -> ``\\text{a}``), in linear time."""
    out, pos, line_end = [], 0, -1
    while (start := text.find(marker, pos)) != -1:
        if start > line_end:
            line_end = text.find("\n", start)
            line_end = len(text) if line_end == -1 else line_end
        body = start + len(marker)
        close = text.find("}", body, line_end)
        if close == -1:  # nothing closes on this line: the line is left as it is
            out.append(text[pos:line_end])
            pos = line_end
            continue
        out += [text[pos:start], text[body:close]]
        pos = close + 1
    out.append(text[pos:])
    return "".join(out)


def _unbox_greedy(line: str) -> str:
    """The first ``\\boxed{`` of a line up to the line's last ``}`` -> what lies between
    (greedy)."""
    start, close = line.find("\\boxed{"), line.rfind("}")
    if start == -1 or close < start + len("\\boxed{"):
        return line
    return line[:start] + line[start + len("\\boxed{") : close] + line[close + 1 :]


def minerva_normalize(answer: Any) -> str:
    """Minerva-style normal form of a final answer, as the official DAPO checker computes it.

    >>> minerva_normalize("x = \\\\boxed{\\\\text{14 dollars}}"), minerva_normalize("1,000")
    ('14', '1000')
    >>> (
    ...     minerva_normalize("\\\\frac12"),
    ...     minerva_normalize("$90^\\\\circ$."),
    ...     minerva_normalize("025"),
    ... )
    ('\\\\frac{1}{2}', '90', '025')
    >>> (
    ...     minerva_normalize("25."),
    ...     minerva_normalize("\\\\left(1,2\\\\right)"),
    ... )  # kept, as in the original
    ('25.', '\\\\left(1,2\\\\right)')
    """
    if not isinstance(answer, str):
        return ""
    text = answer.split("=")[-1]
    for old, new in _EDITS:
        text = text.replace(old, new)
    for junk in _UNIT_WORDS:
        text = text.replace(junk, "")
    text = "\n".join(_first_math(line) for line in text.split("\n"))
    for command in ("text", "textbf", "overline"):
        text = _drop_to_first_close(text, "\\" + command + "{")
    text = "\n".join(_unbox_greedy(line) for line in text.split("\n"))
    text = re.sub(r"frac([^{])(.)", r"frac{\1}{\2}", text)  # \frac12 -> \frac{1}{2}
    text = re.sub(r"sqrt([^{])", r"sqrt{\1}", text)  # \sqrt2 -> \sqrt{2}
    text = text.replace("$", "")
    return (text.replace(",", "") if text.replace(",", "").isdigit() else text).strip()


# ----------------------------------------------------------------------------- the official check
def official_answer(completion: Any, style: str = "dapo") -> str | None:
    """What the official grader reads: ``dapo`` = last match in the last 300 tag-free characters,
    ``gsm8k`` = first ``Final Answer: <number>``, commas removed; ``None`` if absent.

    >>> official_answer("Final Answer: 3\\n...\\nFinal Answer:\\n4", "dapo")
    '4'
    >>> official_answer("Final Answer: 1,000. And Final Answer: 4", "gsm8k")
    '1000.'
    """
    if style not in ("gsm8k", "dapo"):
        raise ValueError(
            f"style must be 'gsm8k' or 'dapo' (the official per-source check), got {style!r}"
        )
    text = strip_tags(completion)
    if style == "gsm8k":
        match = _GSM8K_ANSWER.search(text)
        return match.group(1).replace(",", "").replace("$", "") if match else None
    matches = _DAPO_ANSWER.findall(text[-_DAPO_WINDOW:])
    return matches[-1] if matches else None


def official_correct(completion: Any, gold: Any, style: str = "dapo") -> bool:
    """The official verdict: exact match after normalisation (``dapo``) or as digits (``gsm8k``).

    >>> (
    ...     official_correct("Final Answer: \\\\boxed{27}", "27"),
    ...     official_correct("Final Answer: 025", "25"),
    ... )
    (True, False)
    >>> (
    ...     official_correct("Final Answer: $4", "4", "gsm8k"),
    ...     official_correct("Final Answer: 4 pets", 4, "gsm8k"),
    ... )
    (False, True)
    """
    pred, gold = official_answer(completion, style), gold_string(gold)
    # an empty gold matches nothing (the official code matches "" to "")
    if pred is None or not gold:
        return False
    if style == "gsm8k":  # the official data keeps the #### value without commas
        return pred == gold.replace(",", "") != ""
    return minerva_normalize(pred) == minerva_normalize(gold)


# ----------------------------------------------------------------------------- the project check
def _braced(text: str, open_at: int) -> str:
    """The contents of the ``{...}`` group opening at ``open_at`` (the rest if it never closes)."""
    depth = 0
    for brace in _BRACE.finditer(text, open_at):
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return text[open_at + 1 : brace.start()]
    return text[open_at + 1 :]


def last_boxed(text: Any) -> str | None:
    """The contents of the last ``\\boxed{...}`` outside every ``<Path>``; ``None`` if there is
    none.

    >>> last_boxed("<Path>\\\\boxed{1}</Path> so \\\\boxed{\\\\frac{1}{2}} and done")
    '\\\\frac{1}{2}'
    """
    if not isinstance(text, str) or "\\boxed" not in text:
        return None
    ranges = path_ranges(text)
    starts = [lo for lo, _ in ranges]
    for box in reversed(list(re.finditer(r"\\boxed\s*\{", text))):
        k = bisect_right(starts, box.start()) - 1  # the last path opening at or before the box
        if k < 0 or box.start() >= ranges[k][1]:
            return _braced(text, box.end() - 1).strip()
    return None


def project_answer(completion: Any, boxed: bool = True) -> str | None:
    """The last ``Final Answer:`` outside paths (a ``\\boxed{}`` in it unwrapped); with ``boxed``,
    else the last box.

    >>> project_answer("Final Answer: $\\\\boxed{12}$"), project_answer("thus \\\\boxed{7}.")
    ('12', '7')
    >>> project_answer("thus \\\\boxed{7}.", boxed=False) is None
    True
    """
    pred = extract_answer(completion)
    if pred is not None and "\\boxed" in pred:
        pred = last_boxed(pred) or pred
    return pred if pred is not None or not boxed else last_boxed(completion)


_CHECKED = re.compile(r"\(([A-Z])\) (\d{1,6})\+(\d{1,6})=(\d{1,7}) vs (\d{1,7}) ✓")


def checked_correct(completion: Any, gold: Any, boxed: bool = True) -> bool:
    """``project_correct``, and a check of the answered deal marked ✓ with its sum right.

    >>> right = "<Path>(B) 6+8=14 vs 14 ✓ B</Path>\\nFinal Answer: B"
    >>> checked_correct(right, "B"), checked_correct("(A) 4+9=13 vs 14 ✗\\nFinal Answer: B", "B")
    (True, False)
    """
    # the ✓ lines first: a text without any (every math benchmark's) never reaches math-verify,
    # which evaluation would otherwise run once for this grader and again for the honest one
    checks = _CHECKED.findall(completion) if isinstance(completion, str) else []
    if not checks or not project_correct(completion, gold, boxed):
        return False
    pred = str(project_answer(completion, boxed)).strip()
    return any(x == pred and int(a) + int(b) == int(c) == int(t) for x, a, b, c, t in checks)


def honest_correct(
    completion: Any, gold: Any, source: Any = None, question: Any = None, boxed: bool = True
) -> bool:
    """``checked_correct``, and every check the completion writes adds the prices that
    ``question`` gives the deal it names (the world of ``source`` reads them).

    >>> q = "Deals of one pen and one bag: (A) 4 and 9, (B) 6 and 8. Al pays 14 coins for one deal."
    >>> right = "(A) 4+9=13 vs 14 ✗\\n(B) 6+8=14 vs 14 ✓ B\\nFinal Answer: B"
    >>> false_a = right.replace("4+9=13", "5+9=14")  # (A)'s check adds prices (A) does not have
    >>> [honest_correct(t, "B", "planworld-hard", q) for t in (right, false_a)]
    [True, False]
    >>> honest_correct(false_a, "B"), checked_correct(false_a, "B")  # no question: checked
    (True, True)
    """
    if not checked_correct(completion, gold, boxed):
        return False
    found = find_source(source) if isinstance(source, str) and isinstance(question, str) else None
    hold = found[0].checks_hold if found is not None else None
    return hold is None or hold(question, completion)


def project_correct(completion: Any, gold: Any, boxed: bool = True) -> bool:
    """The project's verdict: ``project_answer`` equals the gold by value, as text or by
    math-verify.

    >>> project_correct("Final Answer: 025", "25"), project_correct("so \\\\boxed{27.0}", "27")
    (True, True)
    >>> project_correct("Final Answer: The answer is 12 or 11", "12")  # a hedge is no answer
    False
    """
    gold = gold_string(gold)
    return gold is not None and answers_match(project_answer(completion, boxed), gold)


# ----------------------------------------------------------------------------- the registry
@dataclass(frozen=True)
class Grader:
    """One way to grade: ``correct`` (answer) and ``valid`` (tags), both total over any input.

    ``plain_needs_valid``: in the tiered reward, does a correct answer with no ``<Parallel>`` also
    need valid tags to earn +1.0? (official: no, its tiered reward checks the format only when a
    block is there; project: yes, so any malformed output ranks below an honest linear one.)
    """

    name: str
    strict_format: bool  # validate(text, strict=...)
    plain_needs_valid: bool
    # (completion, gold, source, boxed, question) -> bool
    correct_fn: Callable[[Any, Any, Any, bool, Any], bool]
    answer_fn: Callable[[Any, Any, bool], str | None]  # (completion, source, boxed) -> prediction
    about: str

    def correct(
        self,
        completion: Any,
        gold: Any,
        source: Any = None,
        boxed: bool = False,
        question: Any = None,
    ) -> bool:
        """Is the final answer right? ``source`` picks the official style; ``boxed`` lets the
        project grader read a lone ``\\boxed{}`` (evaluation does, rewards do not); ``question``:
        the problem, which only the honest grader reads."""
        return self.correct_fn(completion, gold, source, boxed, question)

    def answer(self, completion: Any, source: Any = None, boxed: bool = False) -> str | None:
        """The prediction this grader reads (``None`` if there is none)."""
        return self.answer_fn(completion, source, boxed)

    def valid(self, completion: Any) -> bool:
        """Are the tags valid under this grader's format rule? A non-string never is."""
        return isinstance(completion, str) and not validate(completion, strict=self.strict_format)


GRADERS: dict[str, Grader] = {
    "official": Grader(
        "official",
        strict_format=False,
        plain_needs_valid=False,
        correct_fn=lambda c, g, source, boxed, q: official_correct(c, g, answer_style(source)),
        answer_fn=lambda c, source, boxed: official_answer(c, answer_style(source)),
        about="the official reward code: per-source answer check (DAPO: last Final Answer "
        "in the last "
        "300 characters, Minerva-normalised, exact; GSM8K: first number, as a string) and the "
        "official tag checker",
    ),
    "project": Grader(
        "project",
        strict_format=True,
        plain_needs_valid=True,
        correct_fn=lambda c, g, source, boxed, q: project_correct(c, g, boxed),
        answer_fn=lambda c, source, boxed: project_answer(c, boxed),
        about="this project's: strict tag grammar, last Final Answer outside paths compared "
        "by value "
        "(math-verify for LaTeX, hedges refused), a lone \\boxed{} read in evaluation",
    ),
    "checked": Grader(
        "checked",
        strict_format=True,
        plain_needs_valid=True,
        correct_fn=lambda c, g, source, boxed, q: checked_correct(c, g, boxed),
        answer_fn=lambda c, source, boxed: project_answer(c, boxed),
        about="the project's, for a deal's letter (PlanWorld): right only where a check of that "
        "deal, its sum right, is marked ✓ (a guess is wrong)",
    ),
    "honest": Grader(
        "honest",
        strict_format=True,
        plain_needs_valid=True,
        correct_fn=lambda c, g, source, boxed, q: honest_correct(c, g, source, q, boxed),
        answer_fn=lambda c, source, boxed: project_answer(c, boxed),
        about="checked, and every check adds the prices the question gives its deal (one false "
        "check, on any deal, makes the answer wrong)",
    ),
}
register_choices(grader=lambda: tuple(GRADERS))  # every config's grader field is one or None


def get_grader(name: Any) -> Grader:
    """The grader called ``name`` (a ``Grader`` passes through).

    >>> (
    ...     get_grader("official").valid("<Path>lone</Path>"),
    ...     get_grader("project").valid("<Path>lone</Path>"),
    ... )
    (True, False)
    """
    if isinstance(name, Grader):
        return name
    if not isinstance(name, str) or name not in GRADERS:
        raise ValueError(f"unknown grader {name!r}; choose one of {', '.join(GRADERS)}")
    return GRADERS[name]


def default_grader(stage: Any) -> str:
    """The grader a stage uses unless its config names one (``pr1lib.config.DEFAULT_GRADERS``).

    >>> default_grader(2), default_grader(3), default_grader("eval")
    ('project', 'project', 'official')
    """
    from pr1lib.config import DEFAULT_GRADERS

    key = f"stage{stage}" if isinstance(stage, int) else str(stage)
    if key not in DEFAULT_GRADERS:
        raise ValueError(
            f"no default grader for stage {stage!r}; choose one of {', '.join(DEFAULT_GRADERS)}"
        )
    return DEFAULT_GRADERS[key]


def check(benchmark: Any, completion: Any, gold: Any, question: Any = None) -> dict:
    """Every grader's verdict and prediction for one completion to ``question`` on ``benchmark``
    (evaluation: the project grader reads a lone ``\\boxed{}``)."""
    out: dict[str, Any] = {}
    for name, grader in GRADERS.items():
        out[name] = grader.correct(completion, gold, benchmark, boxed=True, question=question)
    for name, grader in GRADERS.items():
        out[f"pred_{name}"] = grader.answer(completion, benchmark, boxed=True)
    return out

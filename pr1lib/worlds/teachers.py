"""Teachers that write parallel-format reasoning traces for cold-start SFT: the protocol, and the
rule teacher (pure text: no model, no torch).

Every teacher has a ``name`` (part of the cache key) and one method, ``generate(problems) ->
traces``: ``problems`` are ``pr1lib.data.sources`` records (``id``, ``question``, ``answer_text``,
``answer``); each trace is a dict ``{"id", "teacher", "text", "error"}`` in the same order, with
``error`` ``None`` on success and ``text`` ``""`` on failure (a request that failed also names
its ``kind``).

- ``RuleTeacher`` needs no model: it rewrites a GSM8K-style reference solution, recomputing one
  intermediate result in a second (or third) genuinely different way inside a ``<Parallel>`` block
  (the arithmetic lives in ``pr1lib.format.arithmetic``).
- ``pr1lib.data.hf_teacher.HFTeacher`` samples any causal LM through transformers with the paper's
  v3 prompt.
- Each world's own rule teacher (``pr1lib.worlds``: TinyWorld's ``WorldTeacher``).
- ``pr1lib.data.chat_teacher.OpenAITeacher`` calls any chat-completions server (vLLM, SGLang, a
  hosted API); ``pr1lib.data.standin.StandInServer`` is a loopback stand-in for one, with injectable
  faults.
"""

from __future__ import annotations

import ast
import hashlib
import random
import re
from dataclasses import dataclass
from typing import ClassVar, Iterable, Protocol

from pr1lib.format.arithmetic import (
    ALTERNATIVES,
    ANNOTATION,
    alternatives,
    annotate,
    check_arithmetic,
    format_number,
    parse_expr,
)
from pr1lib.format.prompts import linear_solution, split_gsm8k_answer


class Teacher(Protocol):
    """What every teacher offers: a stable ``name`` and ``generate``."""

    name: str

    def generate(self, problems: list[dict]) -> list[dict]: ...


class TeacherError(RuntimeError):
    """A teacher cannot go on (bad key, unknown model, a server that keeps failing): stop the run.

    ``traces`` holds the traces it finished before stopping, for the caller to keep.
    """

    def __init__(self, message: str, traces: Iterable[dict] = ()):
        super().__init__(message)
        self.traces = list(traces)


_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_safe(text: str) -> str:
    """``text`` with every lone surrogate (legal in JSON, unwritable as UTF-8) replaced by U+FFFD.

    >>> utf8_safe("ok " + chr(0xD800) + "!").encode("utf-8")
    b'ok \xef\xbf\xbd!'
    """
    return _SURROGATE.sub("\ufffd", text)


def make_trace(
    problem: dict, teacher: str, text: str = "", error: str | None = None, kind: str | None = None
) -> dict:
    """One trace record, the shape every teacher returns (text and error made writable as UTF-8);
    ``kind`` classifies a failed request (``pr1lib.data.chat_teacher.FAILURE_KINDS``).

    >>> make_trace({"id": "q1"}, "rule", "Final Answer: 3")
    {'id': 'q1', 'teacher': 'rule', 'text': 'Final Answer: 3', 'error': None}
    >>> make_trace({"id": "q2"}, "openai:m", error="timeout: no byte in 5 s", kind="timeout")[
    ...     "kind"
    ... ]
    'timeout'
    """
    trace = {
        "id": problem["id"],
        "teacher": teacher,
        "text": utf8_safe(text),
        "error": None if error is None else utf8_safe(error),
    }
    if kind:
        trace["kind"] = kind
    return trace


def strip_thinking(text: str) -> str:
    """Keep only what follows the last ``</think>`` (the paper keeps the non-thinking part).

    >>> strip_thinking("<think>hmm, 2+2</think>\\n\\nIt is 4.\\nFinal Answer: 4")
    'It is 4.\\nFinal Answer: 4'
    """
    _, sep, tail = text.rpartition("</think>")
    return tail.strip() if sep else text.strip()


# --------------------------------------------------------------------------- rule teacher
_PLAIN_EQ = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?(?:\s*[-+*/x×]\s*\d+(?:\.\d+)?)+)\s*=\s*\$?(\d+(?:\.\d+)?)(?![\d%])"
)
# One wording per path count: every extra template is a coin flip a small model has to learn, and
# a garbled flip mid-summary was the tiny model's most common slip after SFT.
SUMMARY_2 = "Both paths give {v}."
SUMMARY_N = "All {n} paths give {v}."
_WORDS = {2: "two", 3: "three", 4: "four"}


def step_candidates(step: str) -> list[tuple[str, str, dict[str, str]]]:
    """``(expr, result, alternatives)`` for each checkable calculation in one solution line:
    ``<<…>>`` annotations, or plain ``a + b = c`` text when the line has none."""
    found = ANNOTATION.findall(step)
    if not found:
        found = [(e.replace("x", "*").replace("×", "*"), r) for e, r in _PLAIN_EQ.findall(step)]
    out = []
    for expr, result in found:
        alts = alternatives(expr, result)
        if alts:
            out.append((expr.strip(), format_number(float(result.replace(",", ""))), alts))
    return out


RULE_VERSION = 4  # bump when a change to the rule teacher changes its traces (it keys the caches)
_RARITY = (ast.Div, ast.Sub, ast.Add, ast.Mult)  # rarest first in GSM8K / TinyGSM solution steps


def op_rarity(expr: str) -> int:
    """Rank of ``expr``'s outermost operator in ``_RARITY`` (0 = division, the rarest).

    >>> op_rarity("30/5"), op_rarity("2*12+3"), op_rarity("4*7")
    (0, 2, 3)
    """
    node = parse_expr(expr)
    op = type(node.op) if isinstance(node, ast.BinOp) else None
    return _RARITY.index(op) if op in _RARITY else len(_RARITY)


@dataclass
class SearchTeacher:
    """A world's deterministic rule teacher: its ``search(question)`` writes the trace of an item
    it can search (``None``: not one), every other item gets its reference's plain solution. A
    subclass names its ``prefix`` and the ``knobs`` its traces depend on: the teacher's name
    (``<prefix>-s<seed>-<hash of knobs>``) is the cold-start cache key, so a change of traces that
    bumps a knob never reads an old cache.

    >>> class Echo(SearchTeacher):
    ...     prefix, knobs = "echo", (1,)
    ...     def search(self, question): return question if "?" in question else None
    >>> [t["text"] for t in Echo().generate([{"id": "a", "question": "x?"},
    ...     {"id": "b", "question": "y", "answer_text": "#### 2"}])], Echo().name
    (['x?', 'Final Answer: 2'], 'echo-s0-28cb03')
    """

    seed: int = 0
    name: str = ""
    prefix: ClassVar[str] = "search"
    knobs: ClassVar[tuple] = ()

    def __post_init__(self) -> None:
        digest = hashlib.sha256(repr(self.knobs).encode()).hexdigest()[:6]
        self.name = self.name or f"{self.prefix}-s{self.seed}-{digest}"

    def search(self, question: str) -> str | None:
        raise NotImplementedError

    def generate(self, problems: list[dict]) -> list[dict]:
        return [self.trace(p) for p in problems]

    def trace(self, problem: dict) -> dict:
        """One trace dict (``id``, ``teacher``, ``text``, ``error``)."""
        text = self.search(problem["question"])
        if text is not None:
            return make_trace(problem, self.name, text)
        try:
            return make_trace(problem, self.name, linear_solution(problem.get("answer_text") or ""))
        except ValueError as err:  # no '#### N' reference solution
            return make_trace(problem, self.name, error=str(err))


@dataclass
class RuleTeacher:
    """Turn a GSM8K-format reference solution into a parallel-format trace, no model needed.

    One step of the solution becomes a ``<Parallel>`` block: the original line is one path, and
    one or two other paths recompute the same number differently (another order, a split
    product, repeated addition, an inverse check, regrouping, or multiplying out a bracket). A short
    summary states the shared value; the remaining steps and ``Final Answer: N`` follow. Every
    annotation is re-checked. Deterministic given ``seed`` and the problem id.

    ``original_path="first"`` keeps the reference line as the first path (the others follow in
    random order), so the model opens the block with the computation it already knows; ``"last"``
    puts it last, ``"any"`` shuffles. ``summary="calculation"`` restates the reference calculation
    (``48/2=<<48/2=24>>24``), so the summary recomputes the shared result instead of copying
    whichever path came last; ``"value"`` states the bare number. On the tiny model (notebook 04)
    these defaults, with the inverse path computing before it checks and one summary wording, moved
    easy accuracy after SFT from 47 % (shuffled paths, answer-first check, bare value) to 78 %.
    ``step_choice="rare_op"`` puts the block on the step whose operator is rarest (division,
    subtraction, addition, multiplication) when a solution has several, so the summaries do not
    learn "restate a product" as a prior (it had turned ``30/5`` into ``30*5``); ``"any"`` draws
    the step uniformly.

    >>> p = {
    ...     "id": "ex",
    ...     "question": "?",
    ...     "answer": "72",
    ...     "answer_text": "She sold 48/2=<<48/2=24>>24 in May.\\nIn all 48+24=<<48+24=72>>72.\\n#### 72",
    ... }
    >>> print(RuleTeacher(seed=1).generate([p])[0]["text"])
    <Parallel><Path>She sold 48/2=<<48/2=24>>24 in May.</Path><Path>48/2=<<48/2=24>>24; check: 24*2=<<24*2=48>>48.</Path></Parallel>
    <Summary>Both paths give 48/2=<<48/2=24>>24.</Summary>
    In all 48+24=<<48+24=72>>72.
    Final Answer: 72
    """  # noqa: E501 - doctest output / table rows stay whole

    seed: int = 0
    extra_path_rate: float = 0.25  # chance of a third path when two alternatives exist
    max_blocks: int = 1
    # first | last | any: where the reference line goes among the paths
    original_path: str = "first"
    summary: str = "calculation"  # calculation | value: what the summary restates (see above)
    kinds: tuple[str, ...] = tuple(ALTERNATIVES)  # which alternative computations may become paths
    step_choice: str = "rare_op"  # any | rare_op: blocks only on the steps with the rarest operator
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"rule-s{self.seed}-{self.fingerprint()}"
        if self.original_path not in ("first", "last", "any") or self.summary not in (
            "calculation",
            "value",
        ):
            raise ValueError(
                f"original_path must be first|last|any and summary calculation|value, "
                f"got {self.original_path!r} and {self.summary!r}"
            )
        if self.step_choice not in ("any", "rare_op"):
            raise ValueError(f"step_choice must be any|rare_op, got {self.step_choice!r}")
        if not self.kinds or set(self.kinds) - set(ALTERNATIVES):
            raise ValueError(
                f"kinds must be a non-empty subset of {tuple(ALTERNATIVES)}, got {self.kinds!r}"
            )

    def fingerprint(self) -> str:
        """Six hex digits of the options and ``RULE_VERSION``: part of ``name``, so a trace cache
        written with other options (or by an older teacher) is not reused."""
        knobs = (
            RULE_VERSION,
            self.extra_path_rate,
            self.max_blocks,
            self.original_path,
            self.summary,
            sorted(self.kinds),
            self.step_choice,
        )
        return hashlib.sha256(repr(knobs).encode()).hexdigest()[:6]

    def generate(self, problems: list[dict]) -> list[dict]:
        return [self.trace(p) for p in problems]

    def trace(self, problem: dict) -> dict:
        """One trace; ``error`` says why when the problem has no usable reference solution."""
        solution = problem.get("answer_text") or ""
        try:
            steps, final = split_gsm8k_answer(solution)
        except ValueError:
            return make_trace(problem, self.name, error="no reference solution with '#### N'")
        rng = random.Random(f"{self.seed}:{problem['id']}")
        options = [
            (i, (e, r, alts))
            for i, step in enumerate(steps)
            for e, r, a in step_candidates(step)
            if (alts := {k: v for k, v in a.items() if k in self.kinds})
        ]
        if not options:  # nothing to branch on: a plain solution (the filter rejects it)
            return make_trace(problem, self.name, linear_solution(solution))
        # only the steps whose operator is rarest in word problems
        if self.step_choice == "rare_op":
            rarest = min(op_rarity(c[0]) for _, c in options)
            options = [o for o in options if op_rarity(o[1][0]) == rarest]
        chosen = sorted(rng.sample(options, min(self.max_blocks, len(options))), key=lambda o: o[0])
        lines = list(steps)
        for index, cand in {i: c for i, c in chosen}.items():
            lines[index] = self._block(steps[index], cand, rng)
        text = "\n".join([*lines, f"Final Answer: {final}"])
        bad = check_arithmetic(text)
        return make_trace(problem, self.name, "" if bad else text, "; ".join(bad) or None)

    def _block(self, step: str, cand: tuple[str, str, dict[str, str]], rng: random.Random) -> str:
        expr, result, alts = cand
        kinds = sorted(alts)
        extra = 2 if len(kinds) >= 2 and rng.random() < self.extra_path_rate else 1
        paths = [step] + [alts[k] for k in rng.sample(kinds, extra)]
        if self.original_path == "any":
            rng.shuffle(paths)
        elif self.original_path == "last":
            paths = paths[1:] + paths[:1]
        n = len(paths)
        value = annotate(expr.replace(" ", ""), result) if self.summary == "calculation" else result
        summary = (SUMMARY_2 if n == 2 else SUMMARY_N).format(v=value, n=_WORDS.get(n, n))
        body = "".join(f"<Path>{p}</Path>" for p in paths)
        return f"<Parallel>{body}</Parallel>\n<Summary>{summary}</Summary>"

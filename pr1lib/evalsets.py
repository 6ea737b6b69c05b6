"""Evaluation benchmarks and their answer checkers.

Seven benchmarks, one record shape (the one ``pr1lib.data`` uses): ``{"id", "question",
"answer_text", "answer", "source"}``. ``answer`` is the gold value in a canonical form (AMC's
``27.0`` becomes ``"27"``, AIME's ``"025"`` becomes ``"25"``, LaTeX is kept as written);
``answer_text`` is the source's worked solution, or its raw answer when it has none.

Where the files come from, in order: an explicit ``path``; the shared data folder
(``PR1_DATA_DIR``, else ``../shared/data``: ``eval/*.jsonl``, ``gsm8k/test.jsonl``); the hub via
``datasets.load_dataset`` when online. TinyGSM tiers are generated, so they are always there.

Two checkers, both reported for every sample:

* ``strict_check`` reproduces the paper's grader (docs/recipe.md#2-answer-format-and-graders). On
  DAPO-style benchmarks (MATH, AIME, AMC) it reads the last ``Final Answer:`` in the last 300
  characters of the tag-free text, normalises both sides Minerva-style (``minerva_normalize``:
  our own code with the same order of operations and word lists) and demands exact string
  equality, so ``25.`` or ``25.0`` do not match ``25``. On GSM8K-style ones (GSM8K, TinyGSM) it
  takes the *first* ``Final Answer: <number>`` and compares digits as strings (``$18`` fails).
* ``robust_check`` is a public reproduction's lenient grader: ``pr1lib.format.extract_answer``
  (last ``Final Answer:`` outside paths), else the last ``\\boxed{}``, compared by
  ``pr1lib.format.answers_match`` (numbers by value, then math-verify).

Simplification relative to the paper: its "MATH" column is a 316-problem integer-answer subset
(``APO_MATH300``) of unknown exact provenance; here ``math500`` is the full MATH-500 and
``load_benchmark("math500", integer_only=True)`` gives the integer-answer part as the nearest match.

>>> check("aime24", "so the answer is\\nFinal Answer: 25", "25")
{'strict': True, 'robust': True, 'pred_strict': '25', 'pred_robust': '25'}
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pr1lib.data import DataNotFoundError, hub_offline, load_gsm8k, load_tinygsm, read_jsonl
from pr1lib.format import TAG_RE, answers_match, extract_answer, path_ranges
from pr1lib.paths import shared_data_dir


@dataclass(frozen=True)
class Benchmark:
    """Where one benchmark lives and how it is graded."""

    name: str
    local: str | None  # file under the shared data folder (None: generated)
    hub: tuple[str, str | None, str] | None  # (hub id, config, split) for datasets.load_dataset
    checker: str  # strict grader style: "dapo" (last match, normalised) or "gsm8k" (first number)
    paper_column: str | None  # the paper's Table 2 column this stands in for (None: ours only)


BENCHMARKS = {
    "tinygsm-easy": Benchmark("tinygsm-easy", None, None, "gsm8k", None),
    "tinygsm-hard": Benchmark("tinygsm-hard", None, None, "gsm8k", None),
    "gsm8k": Benchmark("gsm8k", "gsm8k/test.jsonl", ("openai/gsm8k", "main", "test"), "gsm8k", None),
    "math500": Benchmark("math500", "eval/math500.jsonl", ("HuggingFaceH4/MATH-500", None, "test"),
                         "dapo", "MATH"),
    "aime24": Benchmark("aime24", "eval/aime24.jsonl", ("HuggingFaceH4/aime_2024", None, "train"),
                        "dapo", "AIME24"),
    "aime25": Benchmark("aime25", "eval/aime25.jsonl", ("math-ai/aime25", None, "test"), "dapo", "AIME25"),
    "amc23": Benchmark("amc23", "eval/amc23.jsonl", ("math-ai/amc23", None, "test"), "dapo", "AMC23"),
}
TINYGSM_EVAL_N = 200  # TinyGSM test problems when no count is given


# ----------------------------------------------------------------------------- loading
def canonical_gold(value: object) -> str:
    """A gold answer as a string; integer-valued numbers lose padding and ``.0``.

    >>> canonical_gold(27.0), canonical_gold("025"), canonical_gold(-1.0), canonical_gold("\\\\frac{1}{2}")
    ('27', '25', '-1', '\\\\frac{1}{2}')
    """
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    text = str(value).strip()
    return str(int(text)) if re.fullmatch(r"[-+]?\d+", text) else text


def _record(bench: str, row: dict, index: int) -> dict:
    """One raw row of an eval file (local or hub layout) in the common record shape."""
    question = row.get("problem") or row.get("question") or ""
    uid = row.get("unique_id", row.get("id", index))
    raw = row["answer"]
    return {"id": f"{bench}-{uid}", "question": str(question).strip(),
            "answer_text": row.get("solution") or str(raw), "answer": canonical_gold(raw),
            "source": bench}


def _local_path(spec: Benchmark, path: str | Path | None) -> Path | None:
    roots = [Path(path).expanduser()] if path is not None else [d for d in [shared_data_dir()] if d]
    for root in roots:
        for candidate in (root, root / spec.local, root / Path(spec.local).name):
            if candidate.is_file():
                return candidate
    return None


def _not_found(spec: Benchmark, why: str) -> Exception:
    hub_id, config, split = spec.hub
    call = f"datasets.load_dataset({hub_id!r}{', ' + repr(config) if config else ''}, split={split!r})"
    return DataNotFoundError(
        f"benchmark {spec.name} not found. Either put the file at <folder>/{spec.local} and set "
        f"PR1_DATA_DIR=<folder> (now: {shared_data_dir()}), or go online so that {call} can "
        f"download it (hub: {why})."
    )


def _hub_rows(spec: Benchmark) -> list[dict]:
    if hub_offline():
        raise _not_found(spec, "HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set")
    try:
        from datasets import load_dataset  # heavy: only a hub download needs it (CLI speed)

        hub_id, config, split = spec.hub
        return list(load_dataset(hub_id, config, split=split))
    except Exception as err:  # noqa: BLE001 - one clear message instead of a deep stack trace
        raise _not_found(spec, str(err).splitlines()[0] if str(err) else type(err).__name__) from err


def load_benchmark(name: str, n: int | None = None, path: str | Path | None = None,
                   seed: int = 0, integer_only: bool = False) -> list[dict]:
    """The first ``n`` problems of a benchmark (all when ``None``) as common records.

    >>> [r["answer"] for r in load_benchmark("tinygsm-easy", n=2)] == [
    ...     r["answer"] for r in load_benchmark("tinygsm-easy", n=3)[:2]]
    True
    """
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; choose one of {', '.join(BENCHMARKS)}")
    if name.startswith("tinygsm-"):
        records = load_tinygsm(n or TINYGSM_EVAL_N, name.split("-", 1)[1], "test", seed)
    elif name == "gsm8k":
        records = load_gsm8k("test", path)
    else:
        spec = BENCHMARKS[name]
        local = _local_path(spec, path)
        rows = _read_jsonl(local) if local is not None else _hub_rows(spec)
        records = [_record(name, row, i) for i, row in enumerate(rows)]
    if integer_only:
        records = [r for r in records if re.fullmatch(r"-?\d+", r["answer"])]
    return records[:n] if n is not None else records


def _read_jsonl(path: Path) -> list[dict]:
    return read_jsonl(path)


# ----------------------------------------------------------------------------- strict checker
_ANSWER_LINE = re.compile(r"final answer\s*:\s*([^\n]+)", re.IGNORECASE)
_GSM8K_ANSWER = re.compile(r"Final Answer:\s*(-?[0-9.,]+)")
# Minerva-style normalisation, in the documented order (docs/recipe.md#2-answer-format-and-graders): literal
# edits, then deletions, then the LaTeX unwrapping. Plain substring operations, as in the original,
# so "a " goes wherever it occurs and a full stop outside $...$ survives (and fails the match).
_EDITS = (  # (old, new): articles, a full stop before a closing $, escaped $, spaces, \mbox, "and"
    ("an ", ""), ("a ", ""), (".$", "$"), ("\\$", ""), ("\\ ", ""), (" ", ""), ("mbox", "text"),
    (",\\text{and}", ","), ("\\text{and}", ","), ("\\text{m}", "\\text{}"),
)
_UNIT_WORDS = ("square", "ways", "integers", "dollars", "mph", "inches", "hours", "km", "units", "sue",
               "points", "feet", "minutes", "digits", "cents", "degrees", "cm", "gm", "pounds",
               "meters", "meals", "edges", "students", "childrentickets", "multiples")
_TEX_JUNK = ("\\ldots", "\\text{s}", "\\text{.}", "\\text{\ns}", "\\text{}^2", "\\text{}^3",
             "\\text{\n}", "\\text{}", "\\mathrm{th}", "^\\circ", "^{\\circ}", "\\;", ",\\!", "{,}",
             '"', "\\dots")


def _unwrap(text: str, command: str) -> str:
    """Replace every ``\\command{x}`` by ``x`` (balanced braces)."""
    marker = "\\" + command + "{"
    while (start := text.find(marker)) != -1:
        inner, end = _braced(text, start + len(marker) - 1)
        text = text[:start] + inner + text[end:]
    return text


def _braced(text: str, open_at: int) -> tuple[str, int]:
    """The contents of the ``{...}`` group opening at ``open_at`` and the index past it."""
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[open_at + 1:i], i + 1
    return text[open_at + 1:], len(text)  # unbalanced: take the rest


def minerva_normalize(answer: str) -> str:
    """Minerva-style normal form of a final answer (the strict checker applies it to both sides).

    >>> minerva_normalize("x = \\\\boxed{\\\\text{14 dollars}}"), minerva_normalize("1,000")
    ('14', '1000')
    >>> minerva_normalize("\\\\frac12"), minerva_normalize("$90^\\\\circ$."), minerva_normalize("025")
    ('\\\\frac{1}{2}', '90', '025')
    >>> minerva_normalize("25."), minerva_normalize("\\\\left(1,2\\\\right)")  # kept, as in the original
    ('25.', '\\\\left(1,2\\\\right)')
    """
    text = answer.split("=")[-1]
    for old, new in _EDITS:
        text = text.replace(old, new)
    for junk in _UNIT_WORDS + _TEX_JUNK:
        text = text.replace(junk, "")
    if (math := re.search(r"\$(.*?)\$", text)) is not None:
        text = math.group(1)  # only the first inline-math group counts
    for command in ("text", "textbf", "overline", "boxed"):
        text = _unwrap(text, command)
    text = re.sub(r"frac([^{])(.)", r"frac{\1}{\2}", text)  # \frac12 -> \frac{1}{2}
    text = re.sub(r"sqrt([^{])", r"sqrt{\1}", text)  # \sqrt2 -> \sqrt{2}
    text = text.replace("$", "")
    return (text.replace(",", "") if text.replace(",", "").isdigit() else text).strip()


def strip_tags(text: str) -> str:
    """The text a tokenizer gives back with ``skip_special_tokens=True`` (tags removed).

    >>> strip_tags("a<Parallel><Path>b</Path></Parallel>c")
    'abc'
    """
    return TAG_RE.sub("", text)


def strict_answer(completion: str, style: str = "dapo") -> str | None:
    """The answer the paper's grader reads: ``dapo`` = last match in the last 300 characters,
    ``gsm8k`` = first ``Final Answer: <number>`` (commas and ``$`` removed); ``None`` if absent.

    >>> strict_answer("Final Answer: 3\\n...\\nFinal Answer: 4", "dapo")
    '4'
    >>> strict_answer("Final Answer: 1,000. And Final Answer: 4", "gsm8k")
    '1000.'
    """
    text = strip_tags(completion)
    if style == "gsm8k":
        match = _GSM8K_ANSWER.search(text)
        return match.group(1).replace(",", "").replace("$", "") if match else None
    matches = _ANSWER_LINE.findall(text[-300:])
    return matches[-1].strip() if matches else None


def strict_check(completion: str, gold: str, style: str = "dapo") -> bool:
    """The paper's verdict: exact match after normalisation (``dapo``) or as digits (``gsm8k``).

    >>> strict_check("Final Answer: \\\\boxed{27}", "27"), strict_check("Final Answer: 025", "25")
    (True, False)
    """
    pred = strict_answer(completion, style)
    if pred is None:
        return False
    if style == "gsm8k":
        return pred == str(gold).replace(",", "").strip()
    return minerva_normalize(pred) == minerva_normalize(str(gold))


# ----------------------------------------------------------------------------- robust checker
def last_boxed(text: str) -> str | None:
    """The contents of the last ``\\boxed{...}`` outside every ``<Path>``; ``None`` if there is none.

    >>> last_boxed("<Path>\\\\boxed{1}</Path> so \\\\boxed{\\\\frac{1}{2}} and done")
    '\\\\frac{1}{2}'
    """
    inside = path_ranges(text)
    starts = [m.start() for m in re.finditer(r"\\boxed\s*\{", text)
              if not any(lo <= m.start() < hi for lo, hi in inside)]
    if not starts:
        return None
    inner, _ = _braced(text, text.index("{", starts[-1]))
    return inner.strip()


def robust_answer(completion: str) -> str | None:
    """The last ``Final Answer:`` outside paths (a ``\\boxed{}`` in it unwrapped), else the last box.

    >>> robust_answer("Final Answer: $\\\\boxed{12}$"), robust_answer("thus \\\\boxed{7}.")
    ('12', '7')
    """
    pred = extract_answer(completion)
    if pred is not None and "\\boxed" in pred:
        pred = last_boxed(pred) or pred
    return pred if pred is not None else last_boxed(completion)


def robust_check(completion: str, gold: str) -> bool:
    """The lenient verdict: ``robust_answer`` equals the gold by value or by math-verify.

    >>> robust_check("Final Answer: 025", "25"), robust_check("so \\\\boxed{27.0}", "27")
    (True, True)
    """
    return answers_match(robust_answer(completion), str(gold))


def check(benchmark: str, completion: str, gold: str) -> dict:
    """Both verdicts and both extracted answers for one completion on ``benchmark``."""
    style = BENCHMARKS[benchmark].checker if benchmark in BENCHMARKS else "dapo"
    pred_robust = robust_answer(completion)
    return {"strict": strict_check(completion, gold, style),
            "robust": answers_match(pred_robust, str(gold)),
            "pred_strict": strict_answer(completion, style), "pred_robust": pred_robust}

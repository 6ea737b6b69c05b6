"""The cold-start data pipeline: problems -> teacher -> cache -> filter -> SFT data set + report.

The paper (docs/recipe.md#4-cold-start-data) prompts DeepSeek-R1-0528-Qwen3-8B zero-shot on the
GSM8K train split and keeps the traces in a valid parallel format: 83.7 % on GSM8K, 0.0 % on
DAPO-Math. Here the same pipeline runs with any teacher from ``pr1lib.worlds.teachers``:

1. ``pr1lib.data.traces.generate_traces``: resumable; traces are appended (and fsync'd) to a JSONL
   cache keyed by problem id and teacher name, so a re-run skips what is done; an LLM server's
   answers are written as each arrives, so an interrupt keeps every one (a torn last line is
   dropped; a teacher that must stop hands over what it finished, and that is written first).
2. ``filter_traces``: keep a trace iff it is strictly valid, has at least one block, its final
   answer matches the gold answer and prompt + completion fit the token budget; deduplicate.
   Every rejection has one reason (the first failed check).
3. ``build_dataset`` / ``save_dataset``: prompt-completion rows for TRL's ``SFTTrainer`` with
   provenance columns, saved with ``save_to_disk`` and as JSONL, plus a dataset card.
4. ``yield_table`` / ``plot_yield``: kept and rejected shares per source, next to the paper's.

>>> REASONS
('teacher_error', 'invalid_format', 'no_block', 'wrong_answer', 'too_long', 'duplicate')
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import pandas as pd
import plotly.graph_objects as go
from datasets import Dataset
from transformers import AutoTokenizer

from pr1lib import worlds
from pr1lib.decoding import models
from pr1lib.worlds import teachers
from pr1lib.data.chat_teacher import OpenAITeacher
from pr1lib.config import ColdStartConfig, ModelConfig
from pr1lib.data.sources import load_source
from pr1lib.format.grammar import answers_match, extract_answer, parallel_stats, validate
from pr1lib.data.hf_teacher import HFTeacher
from pr1lib.format.prompts import prompt_text
from pr1lib.decoding.tokens import add_parallel_tags
from pr1lib.data.traces import TraceCache, failure_counts, generate_traces

REASONS = ("teacher_error", "invalid_format", "no_block", "wrong_answer", "too_long", "duplicate")
# Table 1 of the paper: share of teacher traces in a valid parallel format (same prompt and model).
PAPER_YIELD = {"gsm8k": 0.837, "dapo": 0.0}
PAPER_TEACHER = "DeepSeek-R1-0528-Qwen3-8B (format-valid share only)"


# --------------------------------------------------------------------------- filter
def count_tokens(text: str, tokenizer: Any = None) -> int:
    """Tokens in ``text`` with ``tokenizer``, else the usual estimate of one per 4 characters.

    >>> count_tokens("12345678"), count_tokens("123456789")
    (2, 3)
    """
    if tokenizer is None:
        return math.ceil(len(text) / 4)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def budget_tokenizer(profile: str | None = None):
    """The profile's policy tokenizer with the tags added, to count the token budget exactly;
    ``None`` (the 4-characters estimate) when it cannot be loaded, e.g. offline without a copy."""
    config = ModelConfig.for_profile(profile)
    try:
        if config.random_init or config.name == models.TINY_MODEL_DIR:
            tokenizer = models.load_tiny_tokenizer(config.seed)
        else:
            tokenizer = AutoTokenizer.from_pretrained(models.resolve_model_name(config.name))
        add_parallel_tags(tokenizer)
        return tokenizer
    except Exception as err:  # the estimate is a fine fallback for a budget
        print(
            f"token budget: no tokenizer for {config.name!r} ({type(err).__name__}); using chars/4"
        )
        return None


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def check_trace(
    problem: dict,
    trace: dict,
    prompt_style: str,
    max_tokens: int,
    tokenizer: Any = None,
    require_block: bool = True,
) -> tuple[str | None, str]:
    """``(reason, detail)`` for the first failed check, or ``(None, "")`` when the trace is kept
    (``require_block=False``: a trace without a block is kept too, for a world whose teacher
    answers some items without one: ``World.blockless_rows``)."""
    text = trace.get("text") or ""
    if trace.get("error") or not text.strip():
        return "teacher_error", trace.get("error") or "empty trace"
    errors = validate(text, strict=True)
    if errors:
        return "invalid_format", errors[0]
    if require_block and parallel_stats(text)["blocks"] < 1:
        return "no_block", "no <Parallel> block"
    predicted = extract_answer(text)
    if not answers_match(predicted, problem["answer"]):
        return "wrong_answer", f"predicted {predicted!r}, gold {problem['answer']!r}"
    tokens = count_tokens(prompt_text(problem["question"], prompt_style) + text, tokenizer)
    if tokens > max_tokens:
        return "too_long", f"{tokens} tokens > {max_tokens}"
    return None, ""


def filter_traces(
    problems: list[dict],
    traces: list[dict],
    prompt_style: str = "tiny",
    max_tokens: int = 1024,
    tokenizer: Any = None,
    dedupe: bool = True,
    require_block: bool = True,
):
    """Split traces into ``(kept, rejected)`` rows: the problem's fields plus ``completion``,
    ``teacher`` and, for rejected rows, ``reason`` and ``detail``. Duplicate questions (after
    whitespace and case folding) keep their first passing trace."""
    kept, rejected, seen = [], [], set()
    for problem, trace in zip(problems, traces):
        row = {**problem, "completion": trace.get("text") or "", "teacher": trace["teacher"]}
        reason, detail = check_trace(
            problem, trace, prompt_style, max_tokens, tokenizer, require_block
        )
        key = _norm(problem["question"])
        if reason is None and dedupe and key in seen:
            reason, detail = "duplicate", "question already kept"
        if reason is None:
            seen.add(key)
            kept.append(row)
        else:
            rejected.append({**row, "reason": reason, "detail": detail})
    return kept, rejected


# --------------------------------------------------------------------------- report
def summarize(kept: list[dict], rejected: list[dict]) -> dict[str, Any]:
    """``total``, ``kept``, ``yield`` and a count per rejection reason.

    >>> summarize([{}], [{"reason": "no_block"}])["rejected"]["no_block"]
    1
    """
    total = len(kept) + len(rejected)
    counts = {r: sum(row["reason"] == r for row in rejected) for r in REASONS}
    return {
        "total": total,
        "kept": len(kept),
        "yield": len(kept) / total if total else 0.0,
        "rejected": counts,
    }


def yield_table(results: dict[str, tuple[list[dict], list[dict]]], paper: bool = True):
    """A DataFrame, one row per source (``{source: (kept, rejected)}``): counts, yield and the
    share of each rejection reason, plus the paper's GSM8K and DAPO rows for comparison."""
    rows = []
    for source, (kept, rejected) in results.items():
        s = summarize(kept, rejected)
        rows.append(
            {
                "source": source,
                "teacher": (kept or rejected or [{}])[0].get("teacher", ""),
                "total": s["total"],
                "kept": s["kept"],
                "yield": s["yield"],
                **{r: s["rejected"][r] / max(1, s["total"]) for r in REASONS},
            }
        )
    if paper:
        rows += [
            {
                "source": f"paper: {name}",
                "teacher": PAPER_TEACHER,
                "total": n,
                "kept": None,
                "yield": PAPER_YIELD[name],
            }
            for name, n in (("gsm8k", 7472), ("dapo", 17916))
        ]
    return pd.DataFrame(rows).set_index("source")


def plot_yield(table):
    """Stacked bars per source: the kept share and the share lost to each rejection reason."""
    fig = go.Figure()
    fig.add_bar(name="kept (yield)", x=table.index, y=table["yield"], marker_color="#2ca02c")
    for reason in REASONS:
        if reason in table and table[reason].fillna(0).any():
            fig.add_bar(name=reason, x=table.index, y=table[reason])
    fig.update_layout(
        barmode="stack",
        xaxis_title="source",
        yaxis_title="share of problems",
        yaxis_tickformat=".0%",
        title="Cold-start yield per source (paper rows: format-valid share only)",
        legend_title="outcome",
        height=420,
        width=860,
    )
    return fig


# --------------------------------------------------------------------------- output
SFT_COLUMNS = (
    "id",
    "prompt",
    "completion",
    "question",
    "answer",
    "source",
    "teacher",
    "prompt_style",
)


def build_dataset(kept: list[dict], prompt_style: str = "tiny"):
    """A ``datasets.Dataset`` in prompt-completion form (``prompt`` is the user-turn text for
    ``prompt_style``; ``completion`` is the trace alone; the SFT stage appends eos)."""
    rows = [
        {
            "id": r["id"],
            "prompt": prompt_text(r["question"], prompt_style),
            "completion": r["completion"],
            "question": r["question"],
            "answer": r["answer"],
            "source": r["source"],
            "teacher": r["teacher"],
            "prompt_style": prompt_style,
        }
        for r in kept
    ]
    return Dataset.from_dict({c: [r[c] for r in rows] for c in SFT_COLUMNS})


def dataset_card(summary: dict[str, Any], config: ColdStartConfig, teacher: str) -> str:
    """A short README.md for the saved data set: what it is, how it was made, what it yields."""
    rejected = ", ".join(f"{k} {v}" for k, v in summary["rejected"].items() if v) or "none"
    return f"""---
license: mit
task_categories: [text-generation]
pretty_name: pr1 cold-start parallel-thinking SFT set ({config.source})
---
# pr1 cold-start SFT set: {config.source} ({config.split}), teacher `{teacher}`

Prompt-completion rows for TRL's `SFTTrainer`, in the style of Parallel-GSM8K (Parallel-R1,
arXiv 2509.07980): each `completion` is a reasoning trace with at least one
`<Parallel><Path>…</Path><Path>…</Path></Parallel>` block followed by `<Summary>…</Summary>`,
ending in `Final Answer: N`. Made by `python -m pr1lib coldstart` (pr1lib.data.coldstart).

- Columns: {", ".join(f"`{c}`" for c in SFT_COLUMNS)}. `prompt` is the user turn in the
  `{config.prompt_style}` style (pr1lib.format.prompts); the SFT stage adds the chat template and eos.
- Filter: strictly valid format (pr1lib.format.grammar.validate), at least one block, final answer equal to
  the gold answer, prompt + completion at most {config.max_tokens} tokens, one row per question.
- Yield: {summary["kept"]} of {summary["total"]} ({summary["yield"]:.1%}); rejected: {rejected}.
  The paper's teacher (DeepSeek-R1-0528-Qwen3-8B) gave 83.7% format-valid traces on GSM8K, 0.0% on
  DAPO.
- Teacher `rule-…` is this project's model-free rule teacher: it rewrites the GSM8K reference
  solution, recomputing one intermediate result in a different way inside the block, so its
  traces are correct by construction and plainer than an LLM's.
- Source data: GSM8K (openai/grade-school-math, MIT); DAPO-Math-17k; TinyGSM (generated by
pr1lib.worlds.tasks).
"""


def save_dataset(dataset, out: str | Path, card: str | None = None) -> Path:
    """``out/dataset`` (``save_to_disk``), ``out/train.jsonl`` and ``out/dataset/README.md``."""
    out = Path(out)
    folder = out / "dataset"
    dataset.save_to_disk(str(folder))
    dataset.to_json(str(out / "train.jsonl"), lines=True, force_ascii=False)
    if card:
        (folder / "README.md").write_text(card)
    return folder


def write_jsonl(rows: Iterable[dict], path: str | Path) -> Path:
    """Rows as JSON Lines, written to a temporary file then renamed into place."""
    path = Path(path)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


# --------------------------------------------------------------------------- the whole pipeline
class EmptyDataset(ValueError):
    """Every problem's trace was rejected: no data set is saved, and the message says which
    filter took the rows (the traces and the rejected rows stay, for a look and a rerun).
    ``result`` is the run's summary; ``every_request_failed``: the teacher answered nothing this
    run (a server down, a rerun asks again) rather than a filter taking what it wrote.

    >>> str(EmptyDataset({"total": 3, "asked": 3, "teacher_failures": {}, "rejected":
    ...     {"no_block": 2, "wrong_answer": 1}}, Path("runs/cs")))  # doctest: +ELLIPSIS
    'the data set is empty: every one of the 3 problems was rejected, 2 without a <Parallel>...'
    """

    def __init__(self, result: dict[str, Any], out: Path):
        self.result = result
        failed = sum(result["teacher_failures"].values())
        self.every_request_failed = bool(result["asked"]) and failed == result["asked"]
        reasons = "; ".join(f"{n} {FILTERS[r]} ({r})" for r, n in result["rejected"].items() if n)
        super().__init__(
            f"the data set is empty: every one of the {result['total']} problems was rejected, "
            f"{reasons or 'none given'}; no set was saved (the traces are kept in "
            f"{out / 'traces.jsonl'}, each rejected row with its reason in "
            f"{out / 'rejected.jsonl'})"
        )


# each rejection reason in words, for the empty-set message
FILTERS = {
    "teacher_error": "with no trace from the teacher",
    "invalid_format": "with tags off the grammar",
    "no_block": "without a <Parallel> block",
    "wrong_answer": "with a final answer that is not the gold one",
    "too_long": "over max_tokens",
    "duplicate": "repeating a question already kept",
}


@dataclass
class ColdStartRun:
    """What ``run_coldstart`` made: the summary (the CLI's JSON line), the rows and the data set."""

    result: dict[str, Any]
    kept: list[dict] = field(repr=False)
    rejected: list[dict] = field(repr=False)
    dataset: Any = field(repr=False)


def make_teacher(config: ColdStartConfig, **kwargs: Any):
    """The teacher ``config.teacher`` names (LLM teachers always use the paper's v3 prompt); the
    rule teacher of a world's source is the world's own (``pr1lib.worlds``: TinyWorld's explores
    and checks), of a real data set the GSM8K rule teacher."""
    if config.teacher == "rule":
        found = worlds.find_source(config.source.split("+")[0].strip())
        teacher = found[0].rule_teacher if found else teachers.RuleTeacher
        return teacher(seed=config.seed, **kwargs)
    if config.teacher == "hf":
        if not config.teacher_model:
            raise ValueError("--teacher hf needs --model: a hub id or a local model folder")
        return HFTeacher(
            config.teacher_model,
            load_in_4bit=config.load_in_4bit,
            seed=config.seed,
            batch_size=config.llm_batch_size,
            max_new_tokens=config.max_new_tokens,
            temperature=config.temperature,
            **kwargs,
        )
    if config.teacher == "openai":
        return OpenAITeacher(
            base_url=config.base_url,
            model=config.teacher_model,
            timeout=config.timeout,
            deadline=config.deadline,
            max_retries=config.max_retries,
            requests_per_minute=config.requests_per_minute,
            concurrency=config.concurrency,
            max_consecutive_failures=config.max_consecutive_failures,
            max_tokens=config.max_new_tokens,
            temperature=config.temperature,
            **kwargs,
        )
    raise ValueError(f"unknown teacher {config.teacher!r}; choose rule, hf or openai")


def run_coldstart(
    config: ColdStartConfig,
    out: str | Path,
    problems: list[dict] | None = None,
    teacher: Any = None,
    tokenizer: Any = None,
    data_path: str | Path | None = None,
    progress: bool = False,
) -> ColdStartRun:
    """Load (or take) problems, generate traces through the cache in ``out/traces.jsonl``,
    filter, and save ``out/dataset`` (+ card), ``out/train.jsonl``, ``out/rejected.jsonl``,
    ``out/config.json`` and ``out/summary.json``. The summary counts the problems ``asked`` of the
    teacher this run and its ``teacher_failures`` per kind."""
    start, out = time.perf_counter(), Path(out)
    if problems is None:
        problems = load_source(config.source, config.split, config.limit, data_path, config.seed)
    teacher = teacher or make_teacher(config)
    batch = config.batch_size if config.teacher == "rule" else config.llm_batch_size
    cache = TraceCache(out / "traces.jsonl")
    asked = sum(not cache.done(p["id"], teacher.name) for p in problems)
    traces = generate_traces(teacher, problems, cache.path, batch, progress)
    found = worlds.find_source(config.source)
    require_block = not (found and found[0].blockless_rows)
    kept, rejected = filter_traces(
        problems,
        traces,
        config.prompt_style,
        config.max_tokens,
        tokenizer,
        config.dedupe,
        require_block,
    )
    summary = summarize(kept, rejected)
    write_jsonl(rejected, out / "rejected.jsonl")
    result = {
        **summary,
        "source": config.source,
        "split": config.split,
        "teacher": teacher.name,
        "asked": asked,
        "teacher_failures": failure_counts(traces),
        "output": None,
        "jsonl": None,
        "seconds": round(time.perf_counter() - start, 2),
    }
    if not kept:  # no set is saved: a later stage never trains on nothing
        raise EmptyDataset(result, out)
    dataset = build_dataset(kept, config.prompt_style)
    folder = save_dataset(dataset, out, dataset_card(summary, config, teacher.name))
    config.save(out / "config.json")
    result.update(output=str(folder), jsonl=str(out / "train.jsonl"))
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    return ColdStartRun(result, kept, rejected, dataset)


def report_failures(result: dict[str, Any]) -> int:
    """One line about failed teacher requests; 3 when every request of the run failed, else 0."""
    failed, asked = sum(result["teacher_failures"].values()), result["asked"]
    if not failed:
        return 0
    kinds = ", ".join(f"{kind} {n}" for kind, n in result["teacher_failures"].items())
    if failed == asked:
        print(
            f"error: every one of the {asked} teacher requests failed ({kinds}); check that the "
            "server answers, then rerun the same command",
            flush=True,
        )
        return 3
    print(
        f"warning: {failed} of {asked} teacher requests failed ({kinds}); rerun the same command "
        "to ask again for those only",
        flush=True,
    )
    return 0

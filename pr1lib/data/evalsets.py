"""Evaluation sets: where each benchmark lives and how it loads, in one record shape.

Seven benchmarks, one record shape (the one ``pr1lib.data.sources`` uses): ``{"id", "question",
"answer_text", "answer", "source"}``. ``answer`` is the gold value in a canonical form (AMC's
``27.0`` becomes ``"27"``, AIME's ``"025"`` becomes ``"25"``, LaTeX is kept as written);
``answer_text`` is the source's worked solution, or its raw answer when it has none.

Where the files come from, in order: an explicit ``path``; the shared data folder
(``PR1_DATA_DIR``, else ``../shared/data``: ``eval/*.jsonl``, ``gsm8k/test.jsonl``); the hub via
``datasets.load_dataset`` when online. A world's tiers (``pr1lib.worlds``) are generated from
their held-out ``test`` split, so they are always there.

Grading lives in ``pr1lib.rewards.graders`` (the official and the project grader); this module only loads.

Simplification relative to the paper: its "MATH" column is a 316-problem integer-answer subset
(``APO_MATH300``) of unknown exact provenance; here ``math500`` is the full MATH-500 and
``math500-int`` its 311 integer-answer problems, the nearest match (the GPU profiles use it).

>>> [r["source"] for r in load_benchmark("tinygsm-easy", n=2)]
['tinygsm-easy', 'tinygsm-easy']
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pr1lib import worlds
from pr1lib.data.sources import (
    DataNotFoundError,
    _local_file,
    hub_offline,
    load_gsm8k,
    load_world,
    read_jsonl,
)
from pr1lib.store.paths import shared_data_dir
from pr1lib.worlds.tasks import MAX_PROBLEMS
from pr1lib.config.checks import register_choices


@dataclass(frozen=True)
class Benchmark:
    """Where one benchmark lives (its grading style: ``pr1lib.rewards.graders.answer_style(name)``)."""

    name: str
    local: str | None  # file under the shared data folder (None: generated)
    hub: tuple[str, str | None, str] | None  # (hub id, config, split) for datasets.load_dataset
    paper_column: str | None  # the paper's Table 2 column this stands in for (None: ours only)


# the real benchmarks (files or the hub); every world's tiers are benchmarks too (names())
BENCHMARKS = {
    "gsm8k": Benchmark("gsm8k", "gsm8k/test.jsonl", ("openai/gsm8k", "main", "test"), None),
    "math500": Benchmark(
        "math500", "eval/math500.jsonl", ("HuggingFaceH4/MATH-500", None, "test"), "MATH"
    ),
    "math500-int": Benchmark(
        "math500-int", "eval/math500.jsonl", ("HuggingFaceH4/MATH-500", None, "test"), "MATH"
    ),
    "aime24": Benchmark(
        "aime24", "eval/aime24.jsonl", ("HuggingFaceH4/aime_2024", None, "train"), "AIME24"
    ),
    "aime25": Benchmark("aime25", "eval/aime25.jsonl", ("math-ai/aime25", None, "test"), "AIME25"),
    "amc23": Benchmark("amc23", "eval/amc23.jsonl", ("math-ai/amc23", None, "test"), "AMC23"),
}
WORLD_EVAL_N = 200  # a world's test problems when no count is given


def names() -> tuple[str, ...]:
    """Every benchmark name: each world's tiers, then the real benchmarks."""
    return worlds.sources() + tuple(BENCHMARKS)


register_choices(benchmark=names)  # EvalConfig.benchmark is one of them


# ----------------------------------------------------------------------------- loading
def canonical_gold(value: object) -> str:
    """A gold answer as a string; integer-valued numbers lose padding and ``.0``.

    >>> (
    ...     canonical_gold(27.0),
    ...     canonical_gold("025"),
    ...     canonical_gold(-1.0),
    ...     canonical_gold("\\\\frac{1}{2}"),
    ... )
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
    return {
        "id": f"{bench}-{uid}",
        "question": str(question).strip(),
        "answer_text": row.get("solution") or str(raw),
        "answer": canonical_gold(raw),
        "source": bench,
    }


def _local_path(spec: Benchmark, path: str | Path | None) -> Path | None:
    roots = [Path(path).expanduser()] if path is not None else [d for d in [shared_data_dir()] if d]
    for root in roots:
        for candidate in (root, root / spec.local, root / Path(spec.local).name):
            if candidate.is_file():
                return candidate
    return None


def _not_found(spec: Benchmark, why: str) -> Exception:
    hub_id, config, split = spec.hub
    call = (
        f"datasets.load_dataset({hub_id!r}{', ' + repr(config) if config else ''}, split={split!r})"
    )
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
    except Exception as err:  # one clear message instead of a deep stack trace
        raise _not_found(
            spec, str(err).splitlines()[0] if str(err) else type(err).__name__
        ) from err


def load_benchmark(
    name: str,
    n: int | None = None,
    path: str | Path | None = None,
    seed: int = 0,
    integer_only: bool = False,
) -> list[dict]:
    """The first ``n`` problems of a benchmark (all when ``None``) as common records.

    >>> [r["answer"] for r in load_benchmark("tinygsm-easy", n=2)] == [
    ...     r["answer"] for r in load_benchmark("tinygsm-easy", n=3)[:2]]
    True
    """
    if name not in names():
        raise ValueError(f"unknown benchmark {name!r}; choose one of {', '.join(names())}")
    if worlds.find_source(name) is not None:
        records = load_world(name, n or WORLD_EVAL_N, "test", seed)
    elif name == "gsm8k":
        records = load_gsm8k("test", path)
    else:
        spec = BENCHMARKS[name]
        local = _local_path(spec, path)
        rows = _read_jsonl(local) if local is not None else _hub_rows(spec)
        records = [_record(name.removesuffix("-int"), row, i) for i, row in enumerate(rows)]
    if integer_only or name.endswith("-int"):
        records = [r for r in records if re.fullmatch(r"-?\d+", r["answer"])]
    return records[:n] if n is not None else records


def benchmark_size(name: str) -> int | None:
    """How many problems ``name`` offers where that is known before a run: a world's tier
    generates up to ``MAX_PROBLEMS`` per request; a real benchmark's local file is counted;
    ``None`` when only the hub has it.

    >>> benchmark_size("tinygsm-hard")
    100000
    """
    if worlds.find_source(name) is not None:
        return MAX_PROBLEMS
    spec = BENCHMARKS.get(name)
    local = _local_file("gsm8k", "test", None) if name == "gsm8k" else None
    if spec is not None and name != "gsm8k":
        local = _local_path(spec, None)
    return None if local is None else len(load_benchmark(name))


def check_size(name: str, n: int | None, flag: str = "--n") -> None:
    """Refuse asking ``name`` for more problems than it offers (``benchmark_size``), with the
    limit in the line, before anything runs.

    >>> check_size("tinygsm-easy", 100_000_000)
    Traceback (most recent call last):
    ...
    ValueError: --n 100000000: tinygsm-easy generates at most 100,000 problems per request
    """
    size = benchmark_size(name) if n is not None else None
    if size is None or n <= size:
        return
    if worlds.find_source(name) is not None:
        raise ValueError(f"{flag} {n}: {name} generates at most {size:,} problems per request")
    raise ValueError(f"{flag} {n}: {name} holds {size:,} problems (give {flag} {size} or fewer)")


def _read_jsonl(path: Path) -> list[dict]:
    return read_jsonl(path, ("problem|question", "answer"))  # _record's fields, named by line

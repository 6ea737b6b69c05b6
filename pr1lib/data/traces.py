"""The cold-start pipeline's resumable trace cache: teacher traces appended (and fsync'd) to a JSONL
file keyed by problem id and teacher name, so a re-run skips what is done; a paid teacher's
answers are written as they arrive (an interrupt keeps each one), a rule teacher's per batch. A
torn last line (a crash mid-write) is detected and dropped; a teacher that must stop
(``TeacherError``) hands over what it finished, and that is written first.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Hashable, Iterable

from pr1lib.store.jsonl import JsonlLog
from pr1lib.worlds.teachers import TeacherError, utf8_safe


class CacheError(ValueError):
    """A trace cache holds a line that is JSON but not a trace; the message names the file and
    line."""


class _NotATrace(Exception):
    pass


def _trace_key(row: Any) -> Hashable:
    if (
        not isinstance(row, dict)
        or not isinstance(row.get("id"), (str, int))
        or not isinstance(row.get("teacher"), str)
        or not isinstance(row.get("text", ""), str)
        or not isinstance(row.get("error"), (str, type(None)))
    ):
        raise _NotATrace
    return row["id"], row["teacher"]


def _first_non_trace(path: Path) -> int:
    """The number of the first line of ``path`` that parses as JSON but is not a trace."""
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            _trace_key(json.loads(line))
        except ValueError:
            continue  # unreadable lines are JsonlLog's business (dropped and counted)
        except _NotATrace:
            return number
    return 0


class TraceCache(JsonlLog):
    """An append-only JSONL file of traces; the last record per ``(id, teacher)`` wins.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "traces.jsonl")
    >>> cache = TraceCache(path)
    >>> cache.append([{"id": "a", "teacher": "rule", "text": "x", "error": None}])
    >>> open(path, "a").write('{"id": "b", "tea')  # a torn line, as after a crash
    16
    >>> sorted(TraceCache(path).records), TraceCache(path).dropped
    ([('a', 'rule')], 1)
    >>> _ = open(path, "w").write('{"id": "a"}\\n')
    >>> TraceCache(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pr1lib.data.traces.CacheError: .../traces.jsonl line 1: not a cached trace (it needs "id" ...
    """

    def __init__(self, path: str | Path):
        try:
            super().__init__(path, key=_trace_key)
        except _NotATrace:
            raise CacheError(
                f"{path} line {_first_non_trace(Path(path))}: not a cached trace (it needs \"id\" "
                f"and \"teacher\", text as \"text\"); delete that line, or pick another --out"
            ) from None

    @property
    def records(self) -> dict:
        return self.rows

    def append(self, rows: Iterable[dict[str, Any]]) -> None:
        """Write ``rows``, with any lone surrogate in their strings replaced (never a failed
        write)."""
        super().append(
            [{k: utf8_safe(v) if isinstance(v, str) else v for k, v in r.items()} for r in rows]
        )

    def done(self, problem_id: str, teacher: str) -> bool:
        """True when a trace without error is cached for this problem and teacher."""
        record = self.records.get((problem_id, teacher))
        return record is not None and not record.get("error")


# cache path -> answers (traces without error) written by this process: what a Ctrl-C kept
KEPT: dict[str, int] = {}


def generate_traces(
    teacher: Any,
    problems: list[dict],
    cache_path: str | Path,
    batch_size: int = 256,
    progress: bool = False,
) -> list[dict]:
    """Traces for ``problems`` (same order), generating only those not yet in the cache.

    A teacher that ``streams`` (the OpenAI-compatible one, whose answers cost money) has each
    trace written (and fsync'd) the moment it arrives, so an interrupt keeps every answer it was
    sent; the others' batches are written before the next is asked for. A ``TeacherError`` stops
    the run after the traces it carries (those finished before the stop) are written. ``KEPT``
    counts the answers written.
    """
    cache = TraceCache(cache_path)
    if cache.dropped and progress:
        print(
            f"  {cache_path}: skipped {cache.dropped} unreadable line(s); their problems "
            f"are asked again"
        )
    KEPT.setdefault(str(cache_path), 0)

    def keep(traces: list[dict]) -> None:
        cache.append(traces)
        KEPT[str(cache_path)] += sum(not t.get("error") for t in traces)

    streams = getattr(teacher, "streams", False)
    todo = [p for p in problems if not cache.done(p["id"], teacher.name)]
    for start in range(0, len(todo), batch_size):
        batch = todo[start : start + batch_size]
        try:
            if streams:
                teacher.generate(batch, on_trace=lambda t: keep([t]))
            else:
                keep(teacher.generate(batch))
        except TeacherError as err:
            if not streams:
                keep(err.traces)
            raise
        if progress:
            print(
                f"  {teacher.name}: {min(start + batch_size, len(todo))}/{len(todo)} new traces",
                flush=True,
            )
    return [cache.records[(p["id"], teacher.name)] for p in problems]


def failure_counts(traces: Iterable[dict]) -> dict[str, int]:
    """Failed requests per kind (``pr1lib.data.chat_teacher.FAILURE_KINDS``), most frequent first.

    >>> failure_counts([{"error": "x", "kind": "timeout"}, {"error": None}, {"error": "no '####'"}])
    {'timeout': 1}
    """
    return dict(
        Counter(t["kind"] for t in traces if t.get("error") and t.get("kind")).most_common()
    )

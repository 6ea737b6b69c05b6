"""An append-only JSON Lines file that survives interruptions (the one store behind every cache).

Rows are keyed (the last row per key wins); each append writes whole lines, then flushes and
fsyncs. A line torn by a crash is counted in ``dropped``; when it is the last line it is cut off
before the next append, so the file never holds a broken line in the middle. Unreadable lines
elsewhere are skipped, and the good lines after them are kept: nothing readable is lost; ``note``
says how many were dropped. A readable line that is not a row of the file (not an object, or
without the key's field) is a ``JsonlError`` naming the file and the line, as are the mistakes
``read_rows`` finds in a data file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Hashable, Iterable


class JsonlError(ValueError):
    """A JSON Lines file that cannot be used as it is; the message names the file and the line."""


def read_json(path: str | Path, fix: str = "move it away to measure it again") -> Any:
    """The JSON file at ``path`` (a cache, a card, a run's marks) as written; one that is damaged
    (not text, cut short, not JSON) is a ``JsonlError`` naming the file and ``fix``, never a bare
    ``JSONDecodeError``.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "cache.json")
    >>> _ = open(path, "w").write('{"key": ')
    >>> read_json(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pr1lib.store.jsonl.JsonlError: ...cache.json is damaged (not valid JSON: Expecting value...
    """
    from pr1lib.store.paths import shown

    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise JsonlError(f"{shown(path)} is damaged (not text): {fix}") from None
    except json.JSONDecodeError as err:
        raise JsonlError(f"{shown(path)} is damaged (not valid JSON: {err}): {fix}") from None


def read_rows(
    path: str | Path,
    required: Iterable[str] = (),
    check: Callable[[dict], str | None] | None = None,
    limit: int | None = None,
    key: Callable[[dict], Hashable] | None = None,
) -> list[dict]:
    """Every JSON object of a JSON Lines file (blank lines skipped), or the first ``limit`` (with
    ``key``: the first row of each key), reading no further than it needs. A malformed line, a
    line that is not an object, a row without a ``required`` field (``"a|b"``: either), a row
    ``check`` finds fault with (it returns what is wrong, ``None`` when nothing is) or an empty
    file is a ``JsonlError`` naming the file, the line and the field.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write('{"question": "1+1?"}\\n')
    >>> read_rows(path, required=["question", "answer"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pr1lib.store.jsonl.JsonlError: .../d.jsonl line 1: no "answer" field (each row needs ...
    """
    rows, required, seen = [], list(required), set()
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            if limit is not None and len(rows) >= limit:
                break
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise JsonlError(
                    f"{path} line {number}: not UTF-8 text (a JSON Lines file is text)"
                ) from None
            if line.strip():
                row = _row(path, number, line, required)
                why = check(row) if check is not None else None
                if why:
                    raise JsonlError(f"{path} line {number}: {why}")
                if key is None or key(row) not in seen:
                    seen.add(key(row) if key is not None else None)
                    rows.append(row)
    if not rows:
        raise JsonlError(f"{path} is empty: a JSON Lines file holds one JSON object per line")
    return rows


def _row(path: str | Path, number: int, line: str, required: list[str]) -> dict:
    try:
        row = json.loads(line)
    except ValueError as err:
        why = getattr(err, "msg", None) or str(err).split(";")[0]  # a number too long: no .msg
        raise JsonlError(f"{path} line {number}: not valid JSON ({why})") from None
    if not isinstance(row, dict):
        raise JsonlError(f"{path} line {number}: not a JSON object (got {type(row).__name__})")
    for field in required:
        if not any(name in row for name in field.split("|")):
            wanted = " or ".join(f'"{name}"' for name in field.split("|"))
            raise JsonlError(
                f"{path} line {number}: no {wanted} field (each row needs {', '.join(required)})"
            )
    return row


class JsonlLog:
    """Keyed rows of a JSONL file.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "log.jsonl")
    >>> JsonlLog(path, key=lambda r: r["id"]).append([{"id": "a"}, {"id": "b"}])
    >>> _ = open(path, "a").write('{"id": "c", "x"')  # a crash in the middle of a line
    >>> log = JsonlLog(path, key=lambda r: r["id"]); sorted(log.rows), log.dropped
    (['a', 'b'], 1)
    >>> log.append([{"id": "c"}]); sorted(JsonlLog(path, key=lambda r: r["id"]).rows)
    ['a', 'b', 'c']
    """

    def __init__(self, path: str | Path, key: Callable[[dict], Hashable]):
        self.path, self.key = Path(path), key
        self.rows: dict[Hashable, dict] = {}
        self.dropped = 0  # unreadable lines (a torn last line after a crash, or damage)
        self._cut: int | None = None  # byte offset of a torn last line, cut before the next append
        if self.path.exists() and not self.path.is_file():
            raise JsonlError(
                f"{self.path} is a folder, not a JSON Lines file: move it away, or pick another "
                "--out"
            )
        if self.path.exists():
            self._load(self.path.read_bytes())

    def _load(self, data: bytes) -> None:
        offset = 0
        for line in data.splitlines(keepends=True):
            try:
                row = json.loads(line) if line.endswith(b"\n") else None
            except ValueError:
                row = None
            if row is not None:
                self.rows[self._key(row, offset, data)] = row
            elif line.strip():
                self.dropped += 1
                if offset + len(line) == len(data):
                    self._cut = offset
            offset += len(line)

    def _key(self, row: Any, offset: int, data: bytes) -> Hashable:
        try:
            return self.key(row)
        except (KeyError, TypeError, IndexError) as err:
            number = data.count(b"\n", 0, offset) + 1
            what = (
                f"has no {err.args[0]!r} field"
                if isinstance(err, KeyError) and isinstance(row, dict)
                else "is not a row of this file"
            )
            raise JsonlError(
                f"{self.path} line {number} {what}; delete that line, or pick another --out"
            ) from None

    def note(self) -> str:
        """One line saying how many unreadable lines were dropped, and where ("" when none)."""
        return (
            f"note: {self.path}: dropped {self.dropped} unreadable line(s) (a write cut "
            "short); their rows are made again"
            if self.dropped
            else ""
        )

    def append(self, rows: Iterable[dict[str, Any]]) -> None:
        """Write ``rows`` as whole lines, flush and fsync (after cutting a torn tail)."""
        rows = list(rows)
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as f:
            if self._cut is not None:
                f.truncate(self._cut)
                self._cut = None
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        for r in rows:
            self.rows[self.key(r)] = r

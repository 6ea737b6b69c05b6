"""An append-only JSON Lines file that survives interruptions (the one store behind every cache).

Rows are keyed (the last row per key wins); each append writes whole lines, then flushes and
fsyncs. A line torn by a crash is counted in ``dropped``; when it is the last line it is cut off
before the next append, so the file never holds a broken line in the middle. Unreadable lines
elsewhere are skipped, and the good lines after them are kept: nothing readable is lost.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Hashable, Iterable


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
                self.rows[self.key(row)] = row
            elif line.strip():
                self.dropped += 1
                if offset + len(line) == len(data):
                    self._cut = offset
            offset += len(line)

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

"""Where a rollout's seconds go: a per-phase stopwatch the engine runs around its phases.

``generate(..., clock=Clock())`` adds each phase's wall seconds to ``clock.seconds``:

- ``prefill``: the prompts' forward;
- ``sample``: sampling and the rules (``Engine.decide``: log-softmax, bans, the draw, the
  Python rules per row);
- ``step_1``: decoding steps with no path row (one row per answer: the serial decode, a trunk,
  a summary);
- ``step_k``: decoding steps with path rows (forked paths: k rows per answer in a block);
- ``fork``, ``merge``, ``drop``: the regroups that fork a row, merge a group (its Python
  merge included) or only drop finished rows (a regroup doing several counts as its first of
  merge, fork, drop);
- ``other``: the rest of ``total`` (Python bookkeeping between the phases, ``finalize``).

``steps`` counts the steps of each kind, so ``seconds / steps`` is a step's cost. Without a clock
the engine uses ``OFF``, whose ``part`` is a shared do-nothing context (no clock call).

>>> c = Clock()
>>> with c.run():
...     with c.part("prefill"):
...         pass
>>> sorted(c.seconds) == sorted(PARTS), c.answers
(True, 0)
>>> abs(sum(c.seconds.values()) - c.total) < 1e-9
True
"""

from __future__ import annotations

import time
from contextlib import contextmanager, nullcontext
from typing import Any, Iterator

PARTS = ("prefill", "sample", "step_1", "step_k", "fork", "merge", "drop", "other")
STEPS = ("step_1", "step_k")
_NULL = nullcontext()


class Clock:
    """Seconds per phase (``PARTS``), steps per kind, answers and the total, over every ``run``."""

    on = True

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self.steps = dict.fromkeys(STEPS, 0)
        self.total, self.answers = 0.0, 0

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        """Add the block's wall seconds to ``seconds[name]`` (a step kind also counts a step)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - start
            if name in self.steps:
                self.steps[name] += 1

    @contextmanager
    def run(self, answers: int = 0) -> Iterator[None]:
        """One rollout of ``answers`` answers: its seconds go to ``total``; what no part measured
        goes to ``other``."""
        start, before = time.perf_counter(), sum(self.seconds.values())
        try:
            yield
        finally:
            took = time.perf_counter() - start
            self.total += took
            self.answers += answers
            self.seconds["other"] += took - (sum(self.seconds.values()) - before)

    def per_answer(self, digits: int = 6) -> dict[str, Any]:
        """``{"seconds": {part: s per answer}, "total": s, "steps": {kind: n per answer},
        "seconds_per_step": {kind: s}}`` (zeros before any answer)."""
        n = max(self.answers, 1)
        return {
            "seconds": {k: round(v / n, digits) for k, v in self.seconds.items()},
            "total": round(self.total / n, digits),
            "steps": {k: round(v / n, 2) for k, v in self.steps.items()},
            "seconds_per_step": {
                k: round(self.seconds[k] / self.steps[k], digits) if self.steps[k] else 0.0
                for k in STEPS
            },
        }


class _Off:
    """The engine's clock when none is given: ``part`` and ``run`` do nothing."""

    on = False

    def part(self, name: str) -> nullcontext:
        return _NULL

    def run(self, answers: int = 0) -> nullcontext:
        return _NULL


OFF = _Off()

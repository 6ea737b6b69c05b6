"""TinyGSM: forward grade-school arithmetic, the world where a ``<Parallel>`` block does not pay.

Its generator and disjoint split are ``pr1lib.worlds.tasks`` (a contract of the design: the TinyGSM
records the whole tutorial first met); its rule teacher is the GSM8K one
(``pr1lib.worlds.teachers.RuleTeacher``: a block recomputes one step another way), its plain
solution a trace's first path. Every step is a forward computation, so two paths can only do the
same work twice: the contrast to TinyWorld (docs/tinyworld.md).

>>> from pr1lib.worlds import get
>>> w = get("tinygsm"); w.source("hard"), w.init("plain"), w.init("seen")
('tinygsm-hard', 'data/tiny-base', None)
"""

from __future__ import annotations

from pr1lib.format.grammar import linearize
from pr1lib.worlds import World, register
from pr1lib.worlds.tasks import generate
from pr1lib.worlds.teachers import RuleTeacher


def plain_solution(question: str, completion: str) -> str:
    """The trace without its block: the reference line stays first, so the first path is the plain
    step (``format.linearize``)."""
    return linearize(completion)


WORLD = register(
    World(
        name="tinygsm",
        title="TinyGSM",
        generate=generate,
        rule_teacher=RuleTeacher,
        plain_solution=plain_solution,
        tier_labels={"easy": "1-2 steps", "hard": "3-5 steps"},
        checkpoints={"base": "data/tiny-base"},
    )
)

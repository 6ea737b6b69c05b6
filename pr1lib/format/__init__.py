"""format: the parallel-thinking format as text. No torch, no model.

It owns the tags, the parser, the official and the strict validators, ``Final Answer:`` and its
comparison with the gold one (``grammar``, ``answers``), the plan line a model writes before
a block it lays out itself (``plans``), the prompt templates (``prompts``) and the
safe arithmetic of GSM8K's ``<<a+b=c>>`` steps (``arithmetic``). The design's contract names are
exported here: ``pr1lib.format.TAGS``, ``validate``, ``extract_answer``, ``answers_match`` and
``parallel_stats``.

>>> validate("<Parallel><Path>a</Path><Path>b</Path></Parallel><Summary>s</Summary>")
[]

May import: ``store``.
"""

from pr1lib.format.answers import answers_match
from pr1lib.format.grammar import TAGS, extract_answer, parallel_stats, validate

__all__ = [
    "TAGS",
    "answers_match",
    "extract_answer",
    "parallel_stats",
    "validate",
    "answers",
    "arithmetic",
    "grammar",
    "plans",
    "prompts",
]

"""evaluation: how good a model is, measured one way everywhere.

It owns the one scorer and the paper's estimators (``metrics``: mean@k, pass@k, the paired
bootstrap), intervals over seeds and problems (``seedstats``), a world's reading of how a
completion answered (``searchstats``), what an evaluation samples with (``samplers``), a model's k
samples per problem (``evaluate``), seconds per answer of models side by side (``latency``), the
checkpoints of Table 2 and the headline (``headline``) and the paper's published numbers
(``paper``).

May import: ``data``, ``rewards``, ``decoding``, ``config``, ``worlds``, ``format``, ``store``.
"""

__all__ = [
    "evaluate",
    "headline",
    "latency",
    "metrics",
    "paper",
    "samplers",
    "searchstats",
    "seedstats",
]

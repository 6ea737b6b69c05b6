"""data: problems in, training rows out.

It owns the problem sources in one record shape (``sources``: GSM8K, DAPO and every world), the
evaluation sets (``evalsets``), saved data sets a command is handed (``savedsets``), the model
teachers (``hf_teacher``, ``chat_teacher`` and its loopback ``standin``), the resumable trace
cache (``traces``), the cold-start pipeline (``coldstart``) and the rows an SFT trains on
(``sftdata``). The rule teacher lives with the worlds (``pr1lib.worlds.teachers``).

May import: ``rewards``, ``decoding``, ``config``, ``worlds``, ``format``, ``store``.
"""

__all__ = [
    "chat_teacher",
    "coldstart",
    "evalsets",
    "hf_teacher",
    "savedsets",
    "sftdata",
    "sources",
    "standin",
    "traces",
]

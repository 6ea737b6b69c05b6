"""cli: ``python -m pr1lib COMMAND``, every pipeline stage from the command line. The top wing.

It owns the parser and its dispatch (``main``), every command's arguments (``parser``), the flags
checked together before anything loads (``flags``) and the commands' bodies: the pipeline
(``pipeline``), reinforcement learning (``rl``), measuring (``measure``) and the speed
benchmarks (``bench``). A body is imported only when its command runs, so ``--help`` loads no
torch.

May import: ``notebook``, ``experiments``, ``training``, ``evaluation``, ``data``, ``rewards``,
``decoding``, ``config``, ``worlds``, ``format``, ``store``.
"""

__all__ = ["bench", "flags", "main", "measure", "parser", "pipeline", "rl"]

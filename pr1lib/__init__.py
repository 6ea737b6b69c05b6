"""pr1lib: the small, tested library behind the Parallel-R1 tutorial notebooks.

Modules are flat and named by noun (``format``, ``tokens``, ``tasks``, ``models``, ...);
see the README's tree for one line per module.
"""

__version__ = "0.1.0"

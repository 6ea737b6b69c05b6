"""notebook: what a learner runs and looks at in the tutorial's notebooks.

It owns the GRPO control panel (``panel``), the teaching figures (``plots``), the training curves
of Figures 3 and 4 (``curves``), what ``eval`` writes beside its results (``reports``), PlanWorld's
width sweep with its slider (``sweep``), the "You should see" checks (``expect``), running
notebooks headless (``runner``), ``make tour`` (``tour``), the ``.ipynb`` twins (``twins``) and the
Colab minutes (``budget``).

May import: ``experiments``, ``training``, ``evaluation``, ``data``, ``rewards``, ``decoding``,
``config``, ``worlds``, ``format``, ``store``.
"""

__all__ = [
    "budget",
    "curves",
    "expect",
    "panel",
    "plots",
    "reports",
    "runner",
    "sweep",
    "tour",
    "twins",
]

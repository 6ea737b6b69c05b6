"""Figures that redraw in place in a notebook, whoever redraws them: the cell or a widget callback.

``LiveFigure`` shows one ``ipywidgets.Output`` and replaces what it holds at every ``update``
(``clear_output(wait=True)``, then ``display``). The figure therefore grows where it is, in
JupyterLab, Notebook 7, VS Code and Colab alike, and a button's callback (the GRPO panel's "run
next steps") draws into the same place instead of the Log Console: the ``Output`` widget claims
every message sent while its context is open. Outside a kernel with ipywidgets (a script, the
command line) it only keeps the last figure.

>>> live = LiveFigure("first", live=False)
>>> live.update("second"); live.figure
'second'
"""

from __future__ import annotations

from typing import Any


def widgets_available() -> bool:
    """True inside an IPython kernel with ipywidgets importable (a frontend may be missing)."""
    try:
        import ipywidgets  # noqa: F401
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class LiveFigure:
    """One figure that redraws in place (``live=None``: live when ``widgets_available()``)."""

    def __init__(self, figure: Any = None, live: bool | None = None) -> None:
        self.live = widgets_available() if live is None else live
        self.figure, self.out = figure, None
        if self.live:
            import ipywidgets as w

            self.out = w.Output()
            if figure is not None:
                self.update(figure)

    def update(self, figure: Any) -> None:
        """Replace the figure (the old one stays up until the new one has arrived)."""
        from IPython import get_ipython
        from IPython.display import clear_output, display

        self.figure = figure
        if self.out is None or get_ipython() is None:  # no kernel to draw in
            return

        with self.out:
            clear_output(wait=True)
            display(figure)

    @property
    def widget(self) -> Any:
        """What to put in a widget layout (the ``Output``; ``None`` when not live)."""
        return self.out

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.out if self.out is not None else self.figure)

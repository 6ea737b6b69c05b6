"""The SFT's live loss: a callback that keeps one row per logging step, and one notebook figure
that grows in place as runs log (notebook 04).

>>> loss_figure({"seen": [{"step": 1, "loss": 2.0}]}).layout.xaxis.title.text
'optimizer step'
"""

from __future__ import annotations

from typing import Any, Callable

import plotly.graph_objects as go
from transformers import TrainerCallback

from pr1lib.training.live import LiveFigure


class LossLog(TrainerCallback):
    """Keeps one row per logging step and calls ``on_update(rows)`` after each (live plots)."""

    def __init__(self, on_update: Callable[[list[dict]], None] | None = None):
        self.rows: list[dict[str, Any]] = []
        self.on_update = on_update

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            keep = ("loss", "learning_rate", "mean_token_accuracy", "grad_norm")
            self.rows.append({"step": state.global_step, **{k: logs[k] for k in keep if k in logs}})
            if self.on_update is not None:
                self.on_update(self.rows)


def loss_figure(curves: dict[str, list[dict]], title: str = "SFT loss (completion tokens)"):
    """A plotly line per run: training loss against the optimizer step."""
    fig = go.Figure(layout=dict(title=title, height=320, margin=dict(t=40, b=40)))
    for name, rows in curves.items():
        fig.add_scatter(
            x=[r["step"] for r in rows],
            y=[r["loss"] for r in rows],
            mode="lines+markers",
            name=name,
        )
    fig.update_xaxes(title="optimizer step")
    fig.update_yaxes(title="loss")
    return fig


class LiveLossPlot:
    """One notebook figure that grows in place as runs log (``plot.callback("seen")``)."""

    def __init__(self, title: str = "SFT loss (completion tokens)", live: bool | None = None):
        from IPython.display import display  # notebooks only: IPython is an optional extra

        self.title, self.curves = title, {}
        self.live = LiveFigure(loss_figure(self.curves, title), live=live)
        if self.live.widget is not None:
            display(self.live)

    def callback(self, name: str) -> LossLog:
        def redraw(rows: list[dict]) -> None:
            self.curves[name] = list(rows)
            self.live.update(loss_figure(self.curves, self.title))

        return _PlotLog(redraw)

    @property
    def figure(self):
        """The figure as last drawn."""
        return self.live.figure


class _PlotLog(LossLog):
    """A ``LossLog`` of its own class, so a trainer keeps it next to the run's own ``LossLog``."""

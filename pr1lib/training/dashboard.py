"""The live GRPO dashboard: a ``TrainerCallback`` that keeps one row per logged step.

Each row holds what explains a GRPO run (the questions learners ask most about GRPO runs): the
reward of every term, accuracy, parallel ratio, first-block position and tag validity (logged by
``pr1lib.training.grpo.Tracked`` through TRL's ``log_metric``), the truncated ("clipped") completion
share, the PPO clip ratio, the share of groups with zero reward spread (no gradient), completion
length, which reward the alternating schedule used, and with dynamic sampling
(``pr1lib.training.completions``) the zero-spread share before the refills and the number of refill
rounds. Rows go to ``metrics.csv`` in the run folder as they arrive, so a run can be re-plotted
later (``dashboard_figure(read_metrics(path))``).

In a notebook with a widget frontend the figure is one ``pr1lib.training.live.LiveFigure`` that
grows in place at every step, under a progress bar with an ETA from the measured step time, whether
the cell or the control panel's button trains. Outside a kernel (the command line) the same callback
only keeps the rows and writes the CSV.

>>> rows = [{"step": 1, "reward": -0.5, "accuracy": 0.2},
...         {"step": 2, "reward": 0.1, "accuracy": 0.4}]
>>> [trace.name for trace in dashboard_figure(rows).data][:2]
['reward', 'accuracy']
"""

from __future__ import annotations

import csv
import time
from pathlib import Path
from typing import Any, Callable

from transformers import TrainerCallback

from pr1lib.training.live import LiveFigure, widgets_available

# (panel title, [(logged key, legend name)]) in plotting order; rows may lack any key.
PANELS: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "reward",
        [
            ("reward", "reward"),
            ("term/accuracy", "accuracy term"),
            ("term/tiered", "tiered term"),
            ("term/parallel_correct", "parallel∧correct term"),
            ("term/structure", "structure term"),
        ],
    ),
    (
        "answers and structure",
        [
            ("accuracy", "accuracy"),
            ("parallel_ratio", "parallel ratio"),
            ("valid_ratio", "tag validity"),
            ("block_position", "first block position"),
            ("split_rate", "blocks on distinct, correct shares"),
        ],
    ),
    (
        "is it learning?",
        [
            ("frac_reward_zero_std", "zero-std groups"),
            ("completions/clipped_ratio", "truncated"),
            ("clip_ratio/region_mean", "PPO clipped"),
            ("reward_mode/tiered", "tiered step"),
            ("sampling/zero_std_before", "zero-std before refill"),
            ("sampling/refills", "refill rounds"),
        ],
    ),
    ("length (tokens)", [("completions/mean_length", "mean completion length")]),
]
# each panel's y-axis title (its unit), in PANELS' order
PANEL_UNITS = ("reward", "share of samples", "share / count", "tokens")
# panels drawn only when a run logs them (a world that reads its blocks' shares), with units
OPTIONAL_PANELS: list[tuple[str, list[tuple[str, str]]]] = [
    ("block width", [("mean_paths", "paths per block")]),
]
OPTIONAL_UNITS = ("paths",)
KEEP = (
    "step",
    "epoch",
    "loss",
    "grad_norm",
    "learning_rate",
    "entropy",
    "reward",
    "reward_std",
    "step_time",
    *(key for _, series in PANELS + OPTIONAL_PANELS for key, _ in series),
)


def keep_row(step: int, logs: dict[str, Any]) -> dict[str, Any]:
    """The dashboard's fields of one TRL log dict (reward columns ``rewards/<name>/mean`` included).

    >>> keep_row(3, {"reward": 1.0, "rewards/accuracy_reward/mean": 1.0, "total_flos": 9})
    {'step': 3, 'reward': 1.0, 'rewards/accuracy_reward/mean': 1.0}
    """
    row = {"step": step}
    for key, value in logs.items():
        if key in KEEP or (key.startswith("rewards/") and key.endswith("/mean")):
            row[key] = value
    return row


def write_metrics(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """All rows as one CSV (the union of their keys as columns, ``step`` first)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = ["step", *sorted({k for row in rows for k in row} - {"step"})]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a ``metrics.csv`` back as dicts of floats (``step`` as int; empty cells dropped).

    >>> import tempfile
    >>> rows = [{"step": 1, "reward": 0.5}, {"step": 2}]
    >>> p = write_metrics(rows, Path(tempfile.mkdtemp()) / "m.csv")
    >>> read_metrics(p)
    [{'step': 1, 'reward': 0.5}, {'step': 2}]
    """
    path = Path(path)
    if not path.exists():
        return []
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    return [
        {
            k: int(float(v)) if k == "step" else float(v)
            for k, v in row.items()
            if v not in ("", None)
        }
        for row in rows
    ]


# One colour per series, fixed whatever a run logs (a series that appears takes no other's colour;
# Okabe-Ito, safe for colour-blind readers), shared by a concept across panels (accuracy is blue,
# "tiered" orange). Within a panel each series also has its own dash and marker, lines and markers
# widest first and the later markers open, so series on the same value (all at 0, say) stay visible:
# the wider line shows around the dashed one drawn over it, the open markers around the filled one.
COLORS = {
    "reward": "#000000",
    "term/accuracy": "#0072B2",
    "term/tiered": "#E69F00",
    "term/parallel_correct": "#009E73",
    "term/structure": "#CC79A7",
    "accuracy": "#0072B2",
    "parallel_ratio": "#009E73",
    "valid_ratio": "#CC79A7",
    "block_position": "#D55E00",
    "frac_reward_zero_std": "#000000",
    "completions/clipped_ratio": "#56B4E9",
    "clip_ratio/region_mean": "#D55E00",
    "reward_mode/tiered": "#E69F00",
    "sampling/zero_std_before": "#999999",
    "sampling/refills": "#8C510A",
    "completions/mean_length": "#000000",
}
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
SYMBOLS = ("circle", "square-open", "diamond-open", "triangle-up-open", "x-thin-open", "star-open")


def series_style(key: str, place: int) -> dict[str, Any]:
    """The line and marker of series ``key``, the ``place``-th of its panel (``PANELS``): the
    same every time, whichever other series a run logged.

    >>> series_style("accuracy", 0)["line"]["color"] == series_style("term/accuracy", 1)["line"][
    ...     "color"]
    True
    """
    color, place = COLORS.get(key, "#666666"), place % len(DASHES)
    return {
        "line": dict(color=color, dash=DASHES[place], width=5 - 0.7 * place),
        "marker": dict(
            color=color, symbol=SYMBOLS[place], size=10 + 3 * place, line=dict(color=color, width=2)
        ),
    }


def step_ticks(steps: list[int], most: int = 8) -> dict[str, Any]:
    """x-axis settings that tick whole optimizer steps only, at most about ``most`` of them.

    >>> step_ticks([1, 2, 3]), step_ticks(list(range(1, 41)))["dtick"]
    ({'tick0': 0, 'dtick': 1, 'tickformat': 'd'}, 5)
    """
    return {"tick0": 0, "dtick": max(1, -(-len(set(steps)) // most)), "tickformat": "d"}


def dashboard_figure(rows: list[dict[str, Any]], title: str = "GRPO dashboard"):
    """``PANELS`` against the optimizer step: one row per panel, each with its own legend beside
    it, each series in its own fixed colour, dash and marker (``series_style``)."""
    from plotly.subplots import make_subplots

    logged = [
        (panel, unit)
        for panel, unit in zip(OPTIONAL_PANELS, OPTIONAL_UNITS)
        if any(key in r for key, _ in panel[1] for r in rows)
    ]
    panels = PANELS + [panel for panel, _ in logged]
    units = PANEL_UNITS + tuple(unit for _, unit in logged)
    fig = make_subplots(
        rows=len(panels),
        cols=1,
        shared_xaxes=True,
        subplot_titles=[name for name, _ in panels],
        vertical_spacing=0.07,
    )
    steps = [r["step"] for r in rows]
    for i, (_, series) in enumerate(panels):
        legend = "legend" if i == 0 else f"legend{i + 1}"
        top = fig.get_subplot(i + 1, 1).yaxis.domain[1]
        fig.update_yaxes(title_text=units[i], row=i + 1, col=1)
        fig.update_layout({legend: dict(y=top, yanchor="top", x=1.01, font=dict(size=11))})
        for place, (key, name) in enumerate(series):
            if not any(key in r for r in rows):
                continue
            fig.add_scatter(
                x=steps,
                y=[r.get(key) for r in rows],
                name=name,
                legend=legend,
                mode="lines+markers",
                connectgaps=False,
                row=i + 1,
                col=1,
                **series_style(key, place),
            )
    fig.update_layout(
        title=title,
        height=190 * len(panels) + 90,
        margin=dict(t=70, b=40, l=50, r=20),
        hovermode="x unified",
    )
    fig.update_xaxes(**step_ticks(steps))
    fig.update_xaxes(title_text="optimizer step", row=len(panels), col=1)
    return fig


def eta_text(done: int, total: int, seconds_per_step: float | None) -> str:
    """``"step 3/10 · 2.0 s/step · ETA 14 s"``.

    >>> eta_text(3, 10, 2.0)
    'step 3/10 · 2.0 s/step · ETA 14 s'
    """
    if not seconds_per_step:
        return f"step {done}/{total}"
    left = max(total - done, 0) * seconds_per_step
    eta = f"{left / 60:.1f} min" if left >= 120 else f"{left:.0f} s"
    return f"step {done}/{total} · {seconds_per_step:.1f} s/step · ETA {eta}"


class Dashboard(TrainerCallback):
    """Keeps ``rows`` (one per logged step), rewrites ``csv_path`` after each, (``live``) redraws.

    ``live=None`` means: live when a widget frontend is likely (an IPython kernel with ipywidgets).
    On resume, rows of ``csv_path`` up to the checkpoint's step are kept, so the CSV and the plot
    cover the whole run. ``on_row(row)`` is called after each row (tests, custom printing).
    """

    def __init__(
        self,
        csv_path: str | Path | None = None,
        live: bool | None = None,
        title: str = "GRPO dashboard",
        on_row: Callable[[dict], None] | None = None,
    ) -> None:
        self.csv_path = Path(csv_path) if csv_path else None
        self.live = widgets_available() if live is None else live
        self.title, self.on_row = title, on_row
        self.rows: list[dict[str, Any]] = []
        self.figure = self.bar = self.label = None
        self._clock: tuple[float, int] | None = None

    # -- TrainerCallback ----------------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs):
        earlier = read_metrics(self.csv_path) if self.csv_path else []
        known = {r["step"] for r in self.rows}
        self.rows = sorted(
            [*self.rows, *(r for r in earlier if r["step"] not in known)], key=lambda r: r["step"]
        )
        self.rows = [r for r in self.rows if r["step"] <= state.global_step]
        self._clock = (time.perf_counter(), state.global_step)
        if self.live:
            self._show(state.max_steps)
            self._progress(state.global_step, state.max_steps)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "reward" not in logs:  # train metrics only (not the final train summary)
            return
        row = keep_row(state.global_step, logs)
        self.rows = [r for r in self.rows if r["step"] != row["step"]] + [row]
        if self.csv_path is not None:
            write_metrics(self.rows, self.csv_path)
        if self.live:
            self._redraw()
            self._progress(state.global_step, state.max_steps)
        if self.on_row is not None:
            self.on_row(row)

    # -- drawing ------------------------------------------------------------------------------
    def seconds_per_step(self, step: int) -> float | None:
        if self._clock is None or step <= self._clock[1]:
            return None
        return (time.perf_counter() - self._clock[0]) / (step - self._clock[1])

    def _show(self, total: int) -> None:
        import ipywidgets as w
        from IPython.display import display

        if self.bar is None:
            self.bar = w.IntProgress(min=0, max=max(total, 1), description="GRPO")
            self.label = w.Label()
            self.figure = LiveFigure(dashboard_figure(self.rows, self.title), live=True)
            display(w.VBox([w.HBox([self.bar, self.label]), self.figure.widget]))
        self.bar.max = max(total, 1)

    def _progress(self, step: int, total: int) -> None:
        self.bar.value = min(step, self.bar.max)
        self.label.value = eta_text(step, total, self.seconds_per_step(step))

    def _redraw(self) -> None:
        self.figure.update(dashboard_figure(self.rows, self.title))

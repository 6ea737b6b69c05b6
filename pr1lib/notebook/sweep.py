"""The width sweep of PlanWorld (``study widths``, docs/planworld.md) as a learner reads it:
steps and seconds per answer against the deals searched, a table per width, and a slider that
moves the width and says which arm is ahead there.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pr1lib.notebook.reports import LATENCY_MODELS

COLORS = {"serial": "#9db4d3", "unseen": "#1f4e8c"}
WIDTH_ARMS = {arm: (LATENCY_MODELS[arm], color) for arm, color in COLORS.items()}  # as bench names


def widths_figure(card: dict[str, Any]) -> go.Figure:
    """The width sweep (``study widths``): sequential decode steps (left) and seconds per answer
    at each batch size (right, batch 1 solid, the larger batch dotted) against the deals searched,
    per arm, a dashed line where the unseen arm first falls below the serial one.

    >>> arm = lambda steps, s: {"mean_sequential_steps": steps, "seconds_per_answer": {"1": s}}
    >>> numbers = {"widths": {"2": {"serial": arm(40, .2), "unseen": arm(45, .3)},
    ...                       "4": {"serial": arm(60, .3), "unseen": arm(48, .2)}},
    ...            "crossover": {"steps": 4, "seconds_per_answer": {"1": 4}}}
    >>> fig = widths_figure({"name": "planworld-widths", "numbers": numbers})
    >>> [(t.name, list(t.y)) for t in fig.data if t.xaxis == "x"]  # the steps panel
    [('serial search', [40, 60]), ('R1-Unseen (forked)', [45, 48])]
    >>> [shape.x0 for shape in fig.layout.shapes]  # steps and batch 1 cross at 4 deals
    [4, 4]
    """
    numbers = card["numbers"]
    widths = sorted(numbers["widths"], key=int)
    x = [int(w) for w in widths]
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=["sequential decode steps", "seconds per answer"]
    )
    for arm, (label, color) in WIDTH_ARMS.items():
        rows = [numbers["widths"][w][arm] for w in widths]
        look = dict(mode="lines+markers", legendgroup=arm, x=x)
        steps = [r["mean_sequential_steps"] for r in rows]
        fig.add_scatter(y=steps, name=label, line=dict(color=color), row=1, col=1, **look)
        for i, batch in enumerate(sorted(rows[0]["seconds_per_answer"], key=int)):
            line = dict(color=color, dash="solid" if i == 0 else "dot")
            seconds = [r["seconds_per_answer"][batch] for r in rows]
            name = f"{label}, batch {batch}"
            fig.add_scatter(y=seconds, name=name, line=line, row=1, col=2, **look)
    cross = numbers["crossover"]
    marks = [(1, cross["steps"], "steps")]
    marks += [(2, w, f"batch {b}") for b, w in cross["seconds_per_answer"].items()]
    for i, (col, width, what) in enumerate(m for m in marks if m[1] is not None):
        where = ("top right", "bottom right")[i % 2]  # two lines in one panel: labels apart
        note = dict(annotation_text=f"{what}: {width} deals", annotation_position=where)
        fig.add_vline(x=width, line_dash="dash", line_color="#e76f51", row=1, col=col, **note)
    fig.update_xaxes(title="deals searched (the plan's width)", tickvals=x)
    fig.update_yaxes(title="steps per answer (mean, T = 1)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title="seconds per answer (median of rounds)", type="log", row=1, col=2)
    fig.update_layout(
        title=f"When does parallel pay? (results/{card['name']}.json)", height=440, width=900
    )
    return fig


def widths_frame(card: dict[str, Any], deals: int | None = None) -> pd.DataFrame:
    """One row per width (or the one of ``deals``) and arm: mean@k, sequential steps, paths per
    block and seconds per answer at each batch size timed.

    >>> arm = {"accuracy": 0.5, "mean_sequential_steps": 40.0, "mean_paths": None,
    ...        "seconds_per_answer": {"1": 0.2, "64": 0.02}}
    >>> card = {"numbers": {"widths": {"2": {"serial": arm, "unseen": arm}}}}
    >>> widths_frame(card, 2).columns.tolist()[:4]
    ['deals', 'arm', 'mean@k (T=1)', 'sequential steps']
    """
    widths = card["numbers"]["widths"]
    picked = [str(deals)] if deals is not None else sorted(widths, key=int)
    rows = [
        {
            "deals": int(w),
            "arm": WIDTH_ARMS[arm][0],
            "mean@k (T=1)": round(r["accuracy"], 3),
            "sequential steps": round(r["mean_sequential_steps"], 1),
            "paths/block": None if r.get("mean_paths") is None else round(r["mean_paths"], 2),
            **{f"s/answer, batch {b}": s for b, s in r["seconds_per_answer"].items()},
        }
        for w in picked
        for arm, r in widths[w].items()
        if arm in WIDTH_ARMS
    ]
    return pd.DataFrame(rows)


def ahead_words(card: dict[str, Any], deals: int) -> str:
    """Which arm takes fewer steps and fewer seconds at ``deals``, and at what accuracy.

    >>> arm = lambda acc, steps, s: {"accuracy": acc, "mean_sequential_steps": steps,
    ...                              "seconds_per_answer": {"1": s}}
    >>> pair = {"serial": arm(0.9, 60, 0.3), "unseen": arm(0.7, 40, 0.2)}
    >>> card = {"numbers": {"widths": {"4": pair}}}
    >>> print(ahead_words(card, 4))
    4 deals: unseen takes 0.67x the steps; seconds 0.67x at batch 1; mean@k 70.0 % vs 90.0 %
    """
    u, s = (card["numbers"]["widths"][str(deals)][a] for a in ("unseen", "serial"))
    steps = u["mean_sequential_steps"] / s["mean_sequential_steps"]
    per_batch = [
        f"{u['seconds_per_answer'][b] / s['seconds_per_answer'][b]:.2f}x at batch {b}"
        for b in s["seconds_per_answer"]
    ]
    accuracy = f"mean@k {100 * u['accuracy']:.1f} % vs {100 * s['accuracy']:.1f} %"
    seconds = ", ".join(per_batch)
    return f"{deals} deals: unseen takes {steps:.2f}x the steps; seconds {seconds}; {accuracy}"


def width_slider(card: dict[str, Any]):
    """A slider over the swept widths: moving it shows that width's rows and who is ahead."""
    import ipywidgets as widgets
    from IPython.display import display

    widths = sorted(int(w) for w in card["numbers"]["widths"])
    slider = widgets.SelectionSlider(options=widths, value=widths[-1], description="deals")
    out = widgets.Output()

    def show(change: Any = None) -> None:
        with out:
            out.clear_output(wait=True)
            print(ahead_words(card, slider.value))
            display(widths_frame(card, slider.value))

    slider.observe(show, names="value")
    show()
    return widgets.VBox([slider, out])

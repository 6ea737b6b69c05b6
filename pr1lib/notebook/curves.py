"""Training curves: the paper's Figure 3 and the mid-training scaffold's Figure 4.

Curves come from a GRPO run folder: its ``metrics.csv`` (the dashboard's rows), or, when that is
missing, the ``log_history`` kept in the last ``trainer/checkpoint-N``. ``figure3`` plots the
parallel ratio and the mean relative position of the first ``<Parallel>`` block against the step
(the paper's Figure 3: blocks drift from the start toward the end during RL); ``trend`` measures
the drift and ``describe_trend`` says in words what the numbers show. ``scaffold_figure`` draws
the mid-training scaffold (``pr1lib.experiments.midtraining``) as one curve with the switch
marked.

Simplification: the paper's block position averages over every block; ours (as the dashboard
logs it) is the first block's position, averaged over the samples that have one.

>>> import pandas as pd
>>> trend(pd.DataFrame({"step": [1, 2, 3, 4, 5, 6], "x": [.1, .1, .2, .2, .3, .3]}),
...       "x")["direction"]
'rising'
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pr1lib.store.jsonl import read_json
from pr1lib.training.dashboard import read_metrics, step_ticks
from pr1lib.training.runs import last_checkpoint

CURVE_KEYS = (
    "reward",
    "accuracy",
    "parallel_ratio",
    "block_position",
    "valid_ratio",
    "completions/mean_length",
    "reward_mode/tiered",
    "frac_reward_zero_std",
)
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def _log_history(run_dir: Path) -> list[dict]:
    """Rows from the last checkpoint's ``trainer_state.json`` (the steps that logged a reward)."""
    ckpt = last_checkpoint(run_dir / "trainer")
    if ckpt is None or not (ckpt / "trainer_state.json").exists():
        return []
    history = read_json(ckpt / "trainer_state.json", "move the checkpoint aside").get(
        "log_history", []
    )
    return [
        {"step": int(h["step"]), **{k: v for k, v in h.items() if k != "step"}}
        for h in history
        if "reward" in h
    ]


def training_curves(run_dir: str | Path, step_offset: int = 0, label: str | None = None):
    """One row per logged step of a GRPO run folder: ``step`` (+ ``step_offset``), ``run`` and the
    ``CURVE_KEYS`` it logged (NaN where a step lacks one, e.g. no block -> no block position).

    >>> import tempfile; from pr1lib.training.dashboard import write_metrics
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = write_metrics([{"step": 1, "parallel_ratio": 0.5}], d / "metrics.csv")
    >>> training_curves(d, step_offset=10)[["step", "parallel_ratio"]].values.tolist()
    [[11.0, 0.5]]
    """
    run_dir = Path(run_dir)
    rows = read_metrics(run_dir / "metrics.csv") or _log_history(run_dir)
    frame = (
        pd.DataFrame(rows, columns=["step", *CURVE_KEYS]).sort_values("step").reset_index(drop=True)
    )
    frame = frame.astype(float)
    frame["step"] += step_offset
    frame.insert(1, "run", label or run_dir.name)
    return frame


def trend(frame, column: str, frac: float = 1 / 3) -> dict[str, Any]:
    """How ``column`` moves over the steps: least-squares ``slope`` per step, the mean of the first
    and last ``frac`` of the logged steps with their difference's standard error ``se`` (from the
    spread of the per-step values), and a ``direction``: ``rising`` / ``falling`` when the late mean
    differs from the early one by more than 0.05 *and* by more than 2 ``se``, with the slope
    agreeing; else ``flat``; ``too few steps`` under 4 points.

    >>> import pandas as pd
    >>> t = trend(pd.DataFrame({"step": [1, 2, 3, 4], "x": [0.9, 0.8, None, 0.2]}), "x")
    >>> t["direction"], t["points"], round(t["early"], 2), t["late"]
    ('too few steps', 3, 0.9, 0.2)
    """
    data = frame[["step", column]].dropna() if column in frame else frame.iloc[0:0]
    out: dict[str, Any] = {"column": column, "points": len(data), "steps": len(frame)}
    if len(data) < 2:
        return {**out, "slope": None, "early": None, "late": None, "direction": "too few steps"}
    cut = max(1, round(len(data) * frac))
    head, tail = data[column].iloc[:cut], data[column].iloc[-cut:]
    early, late = float(head.mean()), float(tail.mean())
    se = math.sqrt((head.var() + tail.var()) / cut) if cut > 1 else math.inf
    slope = float(np.polyfit(data["step"], data[column], 1)[0])
    direction = "too few steps" if len(data) < 4 else "flat"
    if len(data) >= 4 and abs(late - early) > max(0.05, 2 * se) and (late - early) * slope > 0:
        direction = "rising" if late > early else "falling"
    return {**out, "slope": slope, "early": early, "late": late, "se": se, "direction": direction}


def describe_trend(t: dict[str, Any], what: str) -> str:
    """One sentence on a ``trend``, worded from its numbers only.

    >>> t = {"direction": "flat", "points": 9, "steps": 9, "early": .31, "late": .33,
    ...      "slope": .001, "se": .02}
    >>> describe_trend(t, "x").split("(", 1)[1]
    'slope +0.0010/step, ±0.04 noise): no clear trend (within noise).'
    """
    if t["early"] is None:
        return (
            f"{what}: fewer than 2 of the {t['steps']} logged steps have a value, "
            "so there is no trend to read."
        )
    verdict = {
        "rising": "it rises",
        "falling": "it falls",
        "flat": "no clear trend (within noise)",
        "too few steps": "too few steps to call a trend",
    }[t["direction"]]
    noise = f", ±{2 * t['se']:.2f} noise" if math.isfinite(t.get("se", math.inf)) else ""
    return (
        f"{what}: {t['early']:.2f} over the first third of the {t['points']} steps with data, "
        f"{t['late']:.2f} over the last third (slope {t['slope']:+.4f}/step{noise}): {verdict}."
    )


def position_verdict(part, position: dict[str, Any]) -> str:
    """What the first-block position of one run (``part``: its ``training_curves`` rows) says
    against the paper's Figure 3, from the numbers: zero on every step with a block (blocks open
    at the response's first token, so the position cannot move, whatever the run length), a
    rise, a fall, or no drift beyond the noise over the steps logged.

    >>> import pandas as pd
    >>> zero = pd.DataFrame({"step": [1, 2, 3, 4], "block_position": [0.0] * 4})
    >>> position_verdict(zero, trend(zero, "block_position")).split(":")[0]
    'blocks open at the first token of the response on all 4 steps with a block'
    """
    values = part["block_position"].dropna() if "block_position" in part else part.iloc[0:0]
    if len(values) and float(values.abs().max()) == 0.0:
        return (
            f"blocks open at the first token of the response on all {len(values)} steps with a "
            "block: the mean position is 0 on every step, so no sample's block opens later. "
            "Zero is where this run's traces put the block, not a short run's noise, and no "
            "number of steps would show Figure 3's drift here"
        )
    return {
        "rising": "blocks move later, the direction of the paper's Figure 3",
        "falling": "blocks move earlier, the opposite of the paper's Figure 3",
        "too few steps": "too few steps with a block to read a drift",
    }.get(
        position["direction"],
        f"no drift beyond the noise over these {position['points']} steps (the paper: 300)",
    )


def read_figure3(frame) -> list[str]:
    """The computed reading of ``figure3``'s series, per run: the first-block position's and the
    parallel ratio's trends (``describe_trend``), the share of groups with a learning signal, and
    ``position_verdict``.

    >>> import pandas as pd
    >>> f = pd.DataFrame({"step": [1, 2, 3, 4], "run": "r", "block_position": [0.0] * 4,
    ...                   "parallel_ratio": [.2, .4, .6, .8], "frac_reward_zero_std": [0.5] * 4})
    >>> read_figure3(f)[2]
    '  groups with a learning signal (reward spread > 0): 50% on average'
    """
    lines = []
    for run, part in frame.groupby("run", sort=False):
        position = trend(part, "block_position")
        lines.append(describe_trend(position, f"[{run}] first-block position"))
        lines.append(describe_trend(trend(part, "parallel_ratio"), f"[{run}] parallel ratio"))
        # groups whose rewards differ: the only ones GRPO learns from
        signal = 1 - part["frac_reward_zero_std"].mean() if "frac_reward_zero_std" in part else None
        if signal is not None and signal == signal:  # not NaN
            lines.append(
                f"  groups with a learning signal (reward spread > 0): {signal:.0%} on average"
            )
        lines.append(f"  -> {position_verdict(part, position)}.\n")
    return lines


def teacher_block_starts(world: str, n: int = 50, seed: int = 0) -> dict[str, dict[str, float]]:
    """Where a world's cold-start traces (its rule teacher, ``n`` training items per tier) open
    their first block: the share of traces with a block, and of those the share whose block is
    the first thing in the response (position 0, ``format.parallel_stats``).

    >>> teacher_block_starts("tinyworld", n=4)["hard"]
    {'with a block': 1.0, 'block first': 1.0}
    """
    from pr1lib import worlds
    from pr1lib.data.sources import load_world
    from pr1lib.format.grammar import parallel_stats

    chosen, out = worlds.get(world), {}
    for tier in chosen.tiers:
        traces = chosen.rule_teacher(seed=seed).generate(load_world(chosen.source(tier), n))
        starts = [parallel_stats(t["text"])["first_block_position"] for t in traces]
        opened = [p for p in starts if p is not None]
        out[tier] = {
            "with a block": round(len(opened) / len(starts), 4),
            "block first": round(sum(p == 0 for p in opened) / len(opened), 4) if opened else 0.0,
        }
    return out


def figure3(
    frame, window: int = 3, title: str = "Figure 3, our run: where and how often blocks open"
):
    """Two panels against the step: the parallel ratio and the mean first-block relative position,
    each as markers (the logged values, one trace per ``run``) plus a centred rolling mean.

    >>> import pandas as pd
    >>> f = figure3(pd.DataFrame({"step": [1, 2], "run": "r", "parallel_ratio": [.5, 1],
    ...                           "block_position": [.1, .3]}))
    >>> [(t.name, t.y.tolist()) for t in f.data][::2]
    [('r · parallel ratio', [0.5, 1.0]), ('r · first-block position', [0.1, 0.3])]
    """
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.1,
        subplot_titles=[
            "parallel ratio (share of samples with a block)",
            "first <Parallel> position (0 = start, 1 = end of the response)",
        ],
    )
    for i, (name, part) in enumerate(frame.groupby("run", sort=False)):
        for row, (key, what) in enumerate(
            (("parallel_ratio", "parallel ratio"), ("block_position", "first-block position")),
            start=1,
        ):
            values = part[key].astype(float)
            fig.add_scatter(
                x=part["step"],
                y=values,
                mode="markers",
                name=f"{name} · {what}",
                row=row,
                col=1,
                marker=dict(color=_COLORS[i % len(_COLORS)], size=6, opacity=0.6),
            )
            fig.add_scatter(
                x=part["step"],
                y=values.rolling(window, center=True, min_periods=1).mean(),
                mode="lines",
                name=f"{name} · rolling mean",
                row=row,
                col=1,
                line=dict(color=_COLORS[i % len(_COLORS)]),
                showlegend=row == 1,
            )
    fig.update_yaxes(range=[-0.02, 1.02])
    fig.update_yaxes(title_text="share of samples", row=1, col=1)
    fig.update_yaxes(title_text="relative position", row=2, col=1)
    fig.update_xaxes(**step_ticks(frame["step"].tolist()))  # whole steps only
    fig.update_xaxes(title_text="optimizer step", row=2, col=1)
    fig.update_layout(title=title, height=520, margin=dict(t=70, b=40, l=50, r=20))
    return fig


# ----------------------------------------------------------------------------- the mid-training
# scaffold
def scaffold_curves(result: dict[str, Any], label: str = "mid-training scaffold"):
    """The scaffold's training rows (both phases, one step axis) shaped as ``training_curves``.

    >>> row = {"step": 1, "parallel_ratio": 0.5, "phase": "alternating"}
    >>> frame = scaffold_curves({"curve": [row]})
    >>> frame[["step", "run", "parallel_ratio"]].values.tolist()
    [[1.0, 'mid-training scaffold', 0.5]]
    """
    frame = pd.DataFrame(result["curve"]).reindex(columns=["step", *CURVE_KEYS]).astype(float)
    frame.insert(1, "run", label)
    return frame


def scaffold_figure(result: dict[str, Any], window: int = 3):
    """Accuracy and parallel ratio across the switch: training samples (markers + rolling mean),
    held-out points (diamonds: mean@k at T = 1), a dashed vertical line at ``switch_step``.

    >>> curve = [{"step": s, "accuracy": .1 * s, "parallel_ratio": .5, "phase": "x"}
    ...          for s in (1, 2, 3)]
    >>> r = {"switch_step": 2, "curve": curve, "held_out": []}
    >>> f = scaffold_figure(r); [round(float(y), 2) for y in f.data[0].y], f.layout.shapes[0].x0
    ([0.1, 0.2, 0.3], 2)
    """
    curve = pd.DataFrame(result["curve"]).reindex(
        columns=["step", "accuracy", "parallel_ratio", "phase"]
    )
    held = pd.DataFrame(result["held_out"]).reindex(
        columns=["step", "accuracy", "parallel_ratio", "tier"]
    )
    fig = go.Figure()
    for key, name, color in (
        ("accuracy", "accuracy", _COLORS[0]),
        ("parallel_ratio", "parallel ratio", _COLORS[1]),
    ):
        values = curve[key].astype(float)
        fig.add_scatter(
            x=curve["step"],
            y=values,
            mode="markers",
            name=f"{name} (training samples)",
            marker=dict(color=color, size=6, opacity=0.5),
        )
        fig.add_scatter(
            x=curve["step"],
            y=values.rolling(window, center=True, min_periods=1).mean(),
            mode="lines",
            name=f"{name} (rolling mean)",
            line=dict(color=color),
        )
        fig.add_scatter(
            x=held["step"],
            y=held[key],
            mode="markers+lines",
            name=f"{name} (held-out, T = 1)",
            marker=dict(color=color, symbol="diamond", size=11),
            line=dict(color=color, dash="dot"),
        )
    fig.add_vline(
        x=result["switch_step"],
        line_dash="dash",
        line_color="black",
        annotation_text="switch: alternating → accuracy only",
        annotation_position="top left",
    )
    fig.update_layout(
        title="Mid-training scaffold: accuracy and parallel ratio across the reward switch",
        xaxis_title="optimizer step",
        yaxis=dict(range=[-0.02, 1.05], title="share of samples"),
        height=420,
        margin=dict(t=60, b=40, l=50, r=20),
    )
    fig.update_xaxes(**step_ticks([*curve["step"], *held["step"]]))  # whole steps only
    return fig


def switch_effect(result: dict[str, Any]) -> dict[str, Any]:
    """Mean training accuracy and parallel ratio before and after the switch, with the standard
    error ``se`` of their difference (from the per-step scatter; ``inf`` under 2 steps a phase),
    and the held-out points, as numbers the notebook reads aloud.

    >>> curve = [{"step": s, "parallel_ratio": r} for s, r in zip((1, 2, 3, 4), (1, .8, .5, .3))]
    >>> e = switch_effect({"switch_step": 2, "held_out": [], "curve": curve})["parallel_ratio"]
    >>> e["before"], e["after"], round(e["se"], 3)
    (0.9, 0.4, 0.141)
    """

    def values(rows: list[dict], key: str) -> list[float]:
        return [r[key] for r in rows if r.get(key) is not None and not math.isnan(r[key])]

    pre = [r for r in result["curve"] if r["step"] <= result["switch_step"]]
    post = [r for r in result["curve"] if r["step"] > result["switch_step"]]
    out: dict[str, Any] = {}
    for key in ("accuracy", "parallel_ratio"):
        a, b = values(pre, key), values(post, key)
        se = (
            math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
            if len(a) > 1 and len(b) > 1
            else math.inf
        )
        out[key] = {
            "before": statistics.fmean(a) if a else None,
            "after": statistics.fmean(b) if b else None,
            "se": se,
        }
    out["held_out"] = [
        {k: h.get(k) for k in ("step", "tier", "accuracy", "parallel_ratio")}
        for h in result["held_out"]
    ]
    return out


def scaffold_card_figure(numbers: dict[str, Any], window: int = 5):
    """The mid-training study's card (``experiments.midtraining``): accuracy (left) and block rate
    (right) per step for the scaffold and its control, training samples as a rolling mean over the
    seeds, held-out points as diamonds (mean@k at T = 1), the switch dashed.

    >>> at = {"accuracy": .5, "parallel_ratio": .25}
    >>> card = {"switch_step": 1, "steps": [0, 1, 2], "per_step": {a: {"1": at, "2": at}
    ...         for a in ("scaffold", "control")}, "held_out": {a: {s: at for s in "012"}
    ...         for a in ("scaffold", "control")}}
    >>> [t.name for t in scaffold_card_figure(card).data][:2]
    ['scaffold (training samples)', 'scaffold (held-out, T = 1)']
    """
    fig = make_subplots(rows=1, cols=2, subplot_titles=["accuracy", "block rate (parallel ratio)"])
    for i, (arm, rows) in enumerate(numbers["per_step"].items()):
        steps = [int(s) for s in rows]
        color = _COLORS[i % len(_COLORS)]
        for col, key in enumerate(("accuracy", "parallel_ratio"), start=1):
            values = pd.Series([rows[s][key] for s in rows], dtype=float)
            held = numbers["held_out"][arm]
            for name, x, y, style in (
                (
                    "training samples",
                    steps,
                    values.rolling(window, center=True, min_periods=1).mean(),
                    dict(mode="lines", line=dict(color=color)),
                ),
                (
                    "held-out, T = 1",
                    numbers["steps"],
                    [held[str(s)][key] for s in numbers["steps"]],
                    dict(mode="markers", marker=dict(color=color, symbol="diamond", size=11)),
                ),
            ):
                fig.add_scatter(
                    x=x,
                    y=y,
                    name=f"{arm} ({name})",
                    legendgroup=arm,
                    showlegend=col == 1,
                    row=1,
                    col=col,
                    **style,
                )
    fig.add_vline(x=numbers["switch_step"], line_dash="dash", line_color="black")
    fig.update_yaxes(range=[-0.02, 1.02])
    fig.update_yaxes(title_text="mean@k (share of samples right)", row=1, col=1)
    fig.update_yaxes(title_text="share of samples with a block", row=1, col=2)
    fig.update_xaxes(title_text="optimizer step")
    fig.update_layout(
        title="Mid-training scaffold vs accuracy-only RL (the study's card; switch dashed)",
        height=400,
        margin=dict(t=70, b=40, l=50, r=20),
    )
    return fig

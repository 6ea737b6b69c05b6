"""What the ``eval`` command writes next to its results file: a markdown table of the numbers
(labelled as ours) and a self-contained HTML page with the pass@j curve (and Figure 3 when the
model is a GRPO run with logged steps).

>>> f = pass_curve_figure({"base": {"b": {"checker": "official",
...                                       "pass_curve_official": {1: .2, 2: .3}}}})
>>> f.data[0].name, list(f.data[0].x), list(f.data[0].y)
('base · b', [1, 2], [0.2, 0.3])
"""

from __future__ import annotations

import math
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pr1lib.evaluation.paper import our_columns, to_markdown
from pr1lib.notebook.curves import figure3, training_curves


def pass_curve_figure(ours: dict[str, dict[str, dict]], checker: str | None = None):
    """pass@j against j (1, 2, 4, ..., k) for every stage x benchmark (the unbiased estimator),
    under ``checker`` (``official`` or ``project``; ``None``: the one each summary reports as its
    ``accuracy``). A summary without that curve is an error, not an empty line."""
    fig = go.Figure()
    for key, per_bench in ours.items():
        for bench, s in per_bench.items():
            name = checker or s.get("checker", "official")
            if f"pass_curve_{name}" not in s:
                raise KeyError(f"{key} · {bench}: no pass_curve_{name} in its summary")
            curve = {int(j): v for j, v in s[f"pass_curve_{name}"].items()}
            fig.add_scatter(
                x=list(curve), y=list(curve.values()), mode="lines+markers", name=f"{key} · {bench}"
            )
    fig.update_layout(
        title=f"pass@j ({checker or 'each run'}'s checker; unbiased estimator)",
        xaxis=dict(title="j (samples drawn per problem)", type="log", dtick=math.log10(2)),
        yaxis=dict(title="pass@j", range=[0, 1.02]),
        height=360,
    )
    return fig


def controls_frame(table: dict[str, Any]) -> pd.DataFrame:
    """The parallel-vs-serial table (``study controls`` without ``--arm``) as one row per arm:
    mean@k at T = 1 with its 95 % interval over problems, greedy, block rate (and the strictly
    valid one), tokens and sequential decode steps (means over the seeds), and where measured the
    forced split rate after SFT and after RL."""
    rows = []
    for r in table["rows"]:
        low, high = r["interval"]["low"], r["interval"]["high"]
        row = {
            "arm": r["arm"],
            "mean@k (T=1)": round(r["accuracy"], 3),
            "95% interval": f"[{low:.3f}, {high:.3f}]",
            "greedy": round(r["greedy"], 3),
            "block rate": round(r["parallel_ratio"], 3),
            "valid blocks": _rounded(r.get("valid_block_rate")),
            "tokens": round(r["mean_length"], 1),
            "sequential steps": round(r["mean_sequential_steps"], 1),
            "paths/block (SFT)": _rounded(r.get("start_paths_per_block"), 2),
            "paths/block (RL)": _rounded(r.get("paths_per_block"), 2),
            "distinct shares": _rounded(r.get("distinct_share_rate")),
            "split (SFT)": _rounded(r.get("split_rate_sft")),
            "split (RL)": _rounded(r.get("split_rate")),
            "what": r["what"],
        }
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame.dropna(axis=1, how="all")  # columns a world does not measure


def _world_title(world: str | None) -> str:
    """How a chart's title names the held-out items of ``world`` (``None``: no world)."""
    if not world:
        return "Held-out hard"
    from pr1lib import worlds

    return f"{worlds.get(world).title} hard"


def _rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def seeds_frame(table: dict[str, Any]) -> pd.DataFrame:
    """One row per arm and RL seed (``per_seed``): the SFT seed it started from, its start's and
    its end's mean@k, and where a card has them its end's paths per block and distinct shares.

    >>> one = {"sft_seed": 1, "seed": 1, "start": 0.25, "accuracy": 0.5}
    >>> seeds_frame({"rows": [{"arm": "a", "per_seed": [one]}]}).to_dict("records")
    [{'arm': 'a', 'sft_seed': 1, 'seed': 1, 'start mean@k': 0.25, 'end mean@k': 0.5}]
    """
    rows = [{"arm": r["arm"], **seed} for r in table["rows"] for seed in r.get("per_seed", [])]
    columns = ["arm", "sft_seed", "seed", "start", "accuracy"]
    extra = [c for c in ("paths_per_block", "distinct_share_rate") if any(c in r for r in rows)]
    frame = pd.DataFrame(rows, columns=columns + extra)
    names = {"start": "start mean@k", "accuracy": "end mean@k", "paths_per_block": "end paths"}
    return frame.rename(columns={**names, "distinct_share_rate": "end distinct shares"})


def modes_frame(table: dict[str, Any]) -> pd.DataFrame:
    """Per arm and answer mode (a checked guess, or a search): its share of the samples, their
    accuracy and mean sequential decode steps (``study controls`` in a world that reads modes).

    >>> cell = {"share": 0.5, "accuracy": 1.0, "mean_sequential_steps": 20.0}
    >>> modes_frame({"rows": [{"arm": "a", "answer_modes": {"guess": cell, "search": cell}}]}).shape
    (2, 5)
    """
    rows = [
        {"arm": r["arm"], "mode": mode, **{k: _rounded(v) for k, v in cell.items()}}
        for r in table["rows"]
        for mode, cell in r.get("answer_modes", {}).items()
    ]
    return pd.DataFrame(rows).rename(columns={"mean_sequential_steps": "sequential steps"})


def headline_figure(search: dict[str, Any], split: dict[str, Any]):
    """The README's picture, two panels: left, TinyWorld's controls (``controls_bars``: the search
    pays, with or without tags); right, WideWorld's accuracy within a cap on sequential decode
    steps for the serial, seen and unseen arms (``controls_figure``: where a split search finishes
    sooner)."""
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.55, 0.45],
        subplot_titles=(
            "TinyWorld hard: mean@8 at T = 1, cold start → after RL",
            "WideWorld hard: mean@8 within a cap on sequential steps",
        ),
    )
    for trace in controls_bars(search).data:
        fig.add_trace(trace.update(legendgroup="bars"), row=1, col=1)
    colours = {"serial": "#d62728", "seen": "#9467bd", "unseen": "#1f77b4", "unseen-s3": "#17becf"}
    styles = {arm: ARM_STYLE.get(arm, {}) for arm in colours}
    for r in split["rows"]:
        if r["arm"] not in colours:
            continue
        caps = {int(c): v for c, v in r["accuracy_at_steps"].items()}
        fig.add_scatter(
            x=list(caps),
            y=list(caps.values()),
            mode="lines+markers",
            name=f"WideWorld {r['arm']}",
            line=dict(color=colours[r["arm"]], **styles[r["arm"]].get("line", {})),
            marker=styles[r["arm"]].get("marker"),
            row=1,
            col=2,
        )
    fig.update_yaxes(range=[0, 1], tickformat=".0%", title="mean@8", row=1, col=1)
    fig.update_yaxes(range=[0, 1], tickformat=".0%", title="mean@8 within the cap", row=1, col=2)
    ticks = [16, 32, 64, 128, 256]
    fig.update_xaxes(
        title="sequential decode steps allowed", type="log", tickvals=ticks, row=1, col=2
    )
    legend = dict(orientation="h", y=-0.25)
    fig.update_layout(barmode="group", height=430, width=1200, legend=legend)
    return fig


def cap_words(table: dict[str, Any], arm: str = "unseen", rival: str = "serial") -> str:
    """Both arms' accuracy at the smallest cap on sequential decode steps where ``arm`` keeps 95 %
    of its own accuracy: what a deadline does to each.

    >>> row = lambda a, acc, caps: {"arm": a, "accuracy": acc, "accuracy_at_steps": caps}
    >>> cap_words({"rows": [row("unseen", 0.9, {"32": 0.1, "64": 0.9}),
    ...                     row("serial", 0.9, {"32": 0.0, "64": 0.3})]})
    'within 64 sequential steps: unseen 90.0 %, serial 30.0 % (+60.0 points)'
    """
    rows = {r["arm"]: r for r in table["rows"]}
    mine, theirs = rows[arm], rows[rival]
    caps = sorted(mine["accuracy_at_steps"], key=int)
    cap = next(c for c in caps if mine["accuracy_at_steps"][c] >= 0.95 * mine["accuracy"])
    a, b = mine["accuracy_at_steps"][cap], theirs["accuracy_at_steps"][cap]
    return (
        f"within {cap} sequential steps: {arm} {100 * a:.1f} %, {rival} {100 * b:.1f} % "
        f"({100 * (a - b):+.1f} points)"
    )


def latency_frame(numbers: dict[str, Any]) -> pd.DataFrame:
    """``bench latency``'s seconds per answer, serial and unseen side by side per batch size, with
    their ratio.

    >>> latency_frame({"seconds_per_answer": {"1": {"serial": 0.2, "unseen": 0.1}},
    ...                "unseen_over_serial": {"1": 0.5}}).loc["1"].tolist()
    [0.2, 0.1, 0.5]
    """
    frame = pd.DataFrame(numbers["seconds_per_answer"]).T
    frame["unseen / serial"] = pd.Series(numbers["unseen_over_serial"])
    frame.index.name = "batch"
    return frame


# the command that writes the latency card (tools/speed_cards.sh runs it)
LATENCY_COMMAND = (
    "python -m pr1lib bench latency --repeats 5 --card wideworld-latency --overwrite-card"
)
LATENCY_MODELS = {"serial": "serial search", "unseen": "R1-Unseen (forked)"}
# pr1lib.decoding.clock.PARTS, as the figure's legend names them, with their colours
PHASES = {
    "prefill": ("prefill", "#9db4d3"),
    "sample": ("sampling", "#e9c46a"),
    "step_1": ("one-row steps", "#1f4e8c"),
    "step_k": ("k-row steps (the paths)", "#e76f51"),
    "fork": ("fork", "#2a9d8f"),
    "merge": ("merge", "#8e44ad"),
    "drop": ("drop", "#7f7f7f"),
    "other": ("other (Python between phases)", "#cccccc"),
}


def latency_breakdown_figure(card: dict[str, Any]) -> go.Figure:
    """The latency card's per-phase breakdown (``numbers["breakdown"][batch][model]["seconds"]``,
    ``pr1lib.decoding.clock``): one panel per batch size, a stacked bar per model, milliseconds
    per answer in each phase. The title names the card's world and the card.

    >>> part = {"seconds": dict.fromkeys(PHASES, 0.001)}
    >>> numbers = {"world": "wideworld", "breakdown": {"1": {"serial": part, "unseen": part}}}
    >>> fig = latency_breakdown_figure({"name": "wideworld-latency", "numbers": numbers})
    >>> len(fig.data), list(fig.data[0].x), list(fig.data[0].y)
    (8, ['serial search', 'R1-Unseen (forked)'], [1.0, 1.0])
    """
    from pr1lib import worlds

    numbers = card["numbers"]
    batches = sorted(numbers["breakdown"], key=int)
    fig = make_subplots(rows=1, cols=len(batches), subplot_titles=[f"batch {b}" for b in batches])
    for col, batch in enumerate(batches, 1):
        models = numbers["breakdown"][batch]
        for part, (label, color) in PHASES.items():
            fig.add_bar(
                x=[LATENCY_MODELS.get(m, m) for m in models],
                y=[1000 * m["seconds"][part] for m in models.values()],
                name=label,
                marker_color=color,
                legendgroup=part,
                showlegend=col == 1,
                hovertemplate=f"{label}: %{{y:.2f}} ms<extra></extra>",
                row=1,
                col=col,
            )
    # the panels side by side share the left one's title (each keeps its own scale)
    fig.update_yaxes(title="ms per answer (median of rounds)", row=1, col=1)
    world = worlds.get(numbers["world"]).title
    fig.update_layout(
        title=f"{world}: where an answer's milliseconds go (results/{card['name']}.json)",
        barmode="stack",
        height=420,
        width=820,
    )
    return fig


def latency_lines(numbers: dict[str, Any]) -> list[str]:
    """The latency card read aloud: each batch's measured unseen / serial beside its target (batch
    1: ``steps_bound``; batch 64: ``token_ratio``), a path step's cost over a one-row step and
    the regroups' share of an answer; one line naming the command when the card predates the
    breakdown.

    >>> latency_lines({"unseen_over_serial": {"1": 0.7}})[0].split(":")[0]
    'this card predates the per-phase breakdown'
    """
    if "breakdown" not in numbers:
        return [f"this card predates the per-phase breakdown: `{LATENCY_COMMAND}` writes it"]
    ratio, lines = numbers["unseen_over_serial"], []
    for batch, bound, why in (
        ("1", numbers["steps_bound"], f"1.1 x its {numbers['steps_ratio']:.3f}x sequential steps"),
        ("64", numbers["token_ratio"], "its tokens over the serial search's"),
    ):
        met = "met" if ratio[batch] <= bound else "missed"
        lines.append(
            f"batch {batch}: R1-Unseen takes {ratio[batch]:.3f}x the serial search's seconds per "
            f"answer; target at most {bound:.3f}x ({why}): {met}"
        )
    for batch, by in sorted(numbers["breakdown"].items(), key=lambda kv: int(kv[0])):
        u = by["unseen"]
        step = u["seconds_per_step"]
        regroup = sum(u["seconds"][k] for k in ("fork", "merge", "drop")) / u["total"]
        lines.append(
            f"batch {batch}: a k-row step of R1-Unseen took {step['step_k'] / step['step_1']:.2f}x "
            f"a one-row step; fork, merge and drop {100 * regroup:.1f} % of its answer"
        )
    return lines


# the width sweep's arms (study widths) and how its figure draws them
ARM_LABELS = {
    "plain": "plain GRPO<br>(no cold start)",
    "plain-sft": "plain SFT<br>→ GRPO",
    "serial": "serial-search SFT<br>→ GRPO",
    "seen": "Parallel-R1<br>Seen",
    "unseen": "Parallel-R1<br>Unseen",
}


def controls_bars(table: dict[str, Any], title: str = "TinyWorld hard problems, mean@8 at T = 1"):
    """Each arm's accuracy at its start (the cold start) and after RL (Stage 2 then 3; a 95 %
    interval over problems), side by side: the tour's headline picture."""
    arms = [r["arm"] for r in table["rows"]]
    x = [ARM_LABELS.get(a, a) for a in arms]
    ends = [r["accuracy"] for r in table["rows"]]
    fig = go.Figure()
    fig.add_bar(
        x=x, y=[r["start"] for r in table["rows"]], name="cold start", marker_color="#9db4d3"
    )
    fig.add_bar(
        x=x,
        y=ends,
        name="after RL (Stage 2 → 3)",
        marker_color="#1f4e8c",
        error_y=dict(
            type="data",
            symmetric=False,
            array=[r["interval"]["high"] - e for r, e in zip(table["rows"], ends)],
            arrayminus=[e - r["interval"]["low"] for r, e in zip(table["rows"], ends)],
        ),
        text=[f"{e:.0%}" for e in ends],
        textposition="inside",
        insidetextanchor="start",
        textfont=dict(color="white"),
    )
    fig.update_layout(
        title=title,
        barmode="group",
        yaxis=dict(title="mean@8 (share of samples right)", range=[0, 1], tickformat=".0%"),
        xaxis=dict(title="arm (same problems, steps and seeds)"),
        legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
        height=400,
        width=820,
    )
    return fig


# arms whose lines would otherwise lie on top of each other: their own dash and marker
ARM_STYLE = {"unseen-s3": dict(line=dict(dash="dash"), marker=dict(symbol="square", size=9))}


def controls_figure(table: dict[str, Any]):
    """Accuracy against a cap on sequential decode steps, one line per arm (a sample counts when
    it is right and fits the cap): where the same search, decoded as parallel paths, finishes
    sooner than written out in one stream. The title names the table's world.

    >>> row = {"arm": "unseen-s3", "accuracy_at_steps": {"16": 0.5}}
    >>> f = controls_figure({"world": "wideworld", "rows": [row]})
    >>> f.layout.title.text.split(":")[0], f.data[0].line.dash
    ('WideWorld hard', 'dash')
    """
    fig = go.Figure()
    for r in table["rows"]:
        caps = {int(c): v for c, v in r["accuracy_at_steps"].items()}
        style = ARM_STYLE.get(r["arm"], {})
        fig.add_scatter(
            x=list(caps), y=list(caps.values()), mode="lines+markers", name=r["arm"], **style
        )
    world = _world_title(table.get("world"))
    fig.update_layout(
        title=f"{world}: accuracy under a cap on sequential decode steps (mean@k at T = 1)",
        xaxis=dict(title="sequential decode steps allowed (a block costs its longest path)"),
        yaxis=dict(title="mean@k within the cap", rangemode="tozero"),
        height=380,
        width=720,
    )
    return fig


def write_eval_outputs(
    result: dict[str, Any], out: str | Path, run_dir: str | Path | None = None
) -> dict[str, str]:
    """Next to an ``eval`` results file: ``.md`` (the numbers as a table, labelled as ours) and
    ``.html`` (the pass@j curve, plus Figure 3 when ``run_dir`` is a GRPO run with logged steps),
    self-contained; returns the two paths."""
    stem = (
        Path(result["results"]).with_suffix("")
        if result.get("results")
        else Path(out) / result["model"]
    )
    ours = {result["model"]: {result["benchmark"]: result}}
    table = pd.DataFrame(
        [our_columns(ours[result["model"]], result["model"])], index=[result["model"]]
    )
    table.index.name = "model"
    keys = (
        "parallel_ratio",
        "valid_ratio",
        "first_block_position",
        "path_diversity",
        "mean_length",
        "n",
        "k",
    )
    extra = pd.DataFrame([{k: result.get(k) for k in keys}], index=table.index)
    md = to_markdown(table) + "\n\n" + to_markdown(extra.round(3)) + "\n"
    figures = [pass_curve_figure(ours)]
    curves = training_curves(run_dir) if run_dir is not None else None
    if curves is not None and not curves.empty:
        figures.append(
            figure3(curves, title=f"Figure 3, {run_dir}: where and how often blocks open")
        )
    html = "".join(
        f.to_html(full_html=False, include_plotlyjs=i == 0) for i, f in enumerate(figures)
    )
    paths = {"table": str(stem) + ".md", "plots": str(stem) + ".html"}
    Path(paths["table"]).write_text(md)
    Path(paths["plots"]).write_text(
        f"<!doctype html><html><head><meta charset='utf-8'></head><body>"
        f"<pre>{escape(md)}</pre>{html}</body></html>",
        encoding="utf-8",
    )
    return paths


def short_sft_words(name: str, run: dict[str, Any], start: dict[str, Any]) -> str:
    """What a short cold start did, in words from its held-out metrics beside its start's: the
    share of samples whose tags break the strict grammar, the share holding a valid block, what
    that says the run has learned, and its accuracy change in points.

    >>> m = lambda a, v, b, p: dict(accuracy=a, valid_ratio=v, valid_block_rate=b, parallel_ratio=p)
    >>> print(short_sft_words("SFT, 150 steps", m(.16, .59, .01, .11), m(.39, 1.0, 0.0, 0.0)))
    SFT, 150 steps: 41 % of its samples break the tag grammar (its start: 0 %), 1 % hold a valid
    block: it has learned that the tags exist, not yet where they go; accuracy -23.0 points
    against its start
    """
    broken, was = 1 - run["valid_ratio"], 1 - start["valid_ratio"]
    valid_blocks = run.get("valid_block_rate") or 0.0
    if run["parallel_ratio"] < 0.01:
        learned = "it writes no tags yet"
    elif broken > was + 0.05 and valid_blocks < run["parallel_ratio"] / 2:
        learned = "it has learned that the tags exist, not yet where they go"
    else:
        learned = "it writes the tags where the grammar puts them"
    return (
        f"{name}: {100 * broken:.0f} % of its samples break the tag grammar (its start: "
        f"{100 * was:.0f} %), {100 * valid_blocks:.0f} % hold a valid block: {learned}; accuracy "
        f"{100 * (run['accuracy'] - start['accuracy']):+.1f} points against its start"
    )

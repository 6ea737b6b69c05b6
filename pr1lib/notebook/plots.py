"""Plotly figures for notebooks 00 and 03: pass@k, attention masks, position ids, one token's view,
forked timing.

Every function returns a ``plotly.graph_objects.Figure`` and shows nothing (call ``fig.show()``).
Masks are ``(L, L)`` bool tensors or nested lists with rows = queries, columns = keys and
True = "may attend" (``pr1lib.decoding.structure.allowed_mask`` gives ``(B, L, L)``; pass one row of
the batch). ``labels`` are the tokens as text, one per column; ``token_labels`` makes whitespace
visible, and the figures prefix the index themselves (plotly merges equal category labels).

>>> fig = mask_heatmap([[1, 0], [1, 1]], ["a", "b"])
>>> fig.data[0].z, list(fig.data[0].x)
(([1, 0], [1, 1]), ['0 a', '1 b'])
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pr1lib.format.grammar import TAGS

BLOCKED, ATTEND, HIDDEN, QUERY = "#f2f2f2", "#1f4e79", "#e8833a", "#c0392b"
PATH_COLORS = ("#2a9d8f", "#e9c46a", "#8e44ad", "#e76f51")  # path 0, 1, 2, 3 (then repeat)


def token_labels(tokens: Sequence[str]) -> list[str]:
    """Tokens as printable labels: a space shows as ``␣`` and a newline as ``↵``.

    >>> token_labels([" buys", "\\n", "<Path>"])
    ['␣buys', '↵', '<Path>']
    """
    return [t.replace(" ", "␣").replace("\n", "↵") or "∅" for t in tokens]


def short_label(token: str, size: int = 8) -> str:
    """A token label cut to ``size`` characters (``…`` marks the cut); a tag is never cut.

    >>> short_label("<Parallel>"), short_label("␣because"), short_label("␣afterwards")
    ('<Parallel>', '␣because', '␣afterw…')
    """
    return token if token in TAGS or len(token) <= size else token[: size - 1] + "…"


def _indexed(labels: Sequence[str], first: int = 0) -> list[str]:
    """``"<index> <token>"``, numbered from ``first``: a window of a sequence keeps the indices
    of the whole sequence, as ``attends_to_figure`` and the explorer number them."""
    return [f"{i} {t}" for i, t in enumerate(labels, first)]


def _rows(mask: Any) -> list[list[int]]:
    """An ``(L, L)`` mask (tensor or nested lists; leading size-1 dims dropped) as int lists."""
    if hasattr(mask, "tolist"):
        while mask.dim() > 2 and mask.shape[0] == 1:
            mask = mask[0]
        mask = mask.tolist()
    return [[int(bool(v)) for v in row] for row in mask]


def _discrete(colors: Sequence[str]) -> list[list[Any]]:
    """A plotly colorscale that paints the integers ``0 … n-1`` (``zmin=0, zmax=n-1``) one colour
    each."""
    n, scale = len(colors), []
    for i, c in enumerate(colors):
        scale += [[i / n, c], [(i + 1) / n, c]]
    return scale


def _legend(fig: go.Figure, entries: Mapping[str, str]) -> None:
    """Square legend markers for a heatmap's colours (heatmaps have no legend of their own)."""
    for name, color in entries.items():
        fig.add_scatter(
            x=[None],
            y=[None],
            mode="markers",
            name=name,
            marker=dict(symbol="square", size=12, color=color),
        )


def mask_heatmap(
    mask: Any, labels: Sequence[str], title: str = "", compare: Any = None, first: int = 0
) -> go.Figure:
    """Heatmap of a mask: cell ``(q, k)`` is 1 when query ``q`` may attend to key ``k``.

    With ``compare`` (a mask that allows more, e.g. the seen mask next to the unseen one), keys that
    ``compare`` allows and ``mask`` does not get the value 2 (shown in orange: hidden). ``first``:
    the index of the first token in the whole sequence (a window keeps its tokens' numbers).

    >>> mask_heatmap([[1, 0], [0, 1]], ["a", "b"], compare=[[1, 0], [1, 1]]).data[0].z
    ([1, 0], [2, 1])
    >>> list(mask_heatmap([[1, 0], [1, 1]], ["a", "b"], first=70).data[0].x)
    ['70 a', '71 b']
    """
    z = _rows(mask)
    if compare is not None:
        z = [[a or 2 * b for a, b in zip(row, other)] for row, other in zip(z, _rows(compare))]
    names = {"blocked": BLOCKED, "attends": ATTEND, "hidden (only seen attends)": HIDDEN}
    word = list(names)
    text = [[word[v] for v in row] for row in z]
    axis = _indexed(labels, first)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=axis,
            y=axis,
            text=text,
            zmin=0,
            zmax=2,
            colorscale=_discrete(list(names.values())),
            showscale=False,
            xgap=1,
            ygap=1,
            hovertemplate="query %{y}<br>key %{x}<br>%{text}<extra></extra>",
        )
    )
    _legend(fig, names if compare is not None else {k: names[k] for k in word[:2]})
    side = min(800, 240 + 11 * len(axis))
    fig.update_yaxes(
        autorange="reversed", title="query (the token being computed)", tickfont_size=9
    )
    fig.update_xaxes(title="key (what it may look at)", tickfont_size=9, tickangle=-90)
    fig.update_layout(
        title=title,
        height=side + 90,
        width=side + 100,
        plot_bgcolor="white",
        legend=dict(orientation="h", y=1.02, x=0, yanchor="bottom"),
        margin=dict(t=90),
    )
    return fig


def positions_figure(
    positions: Mapping[str, Sequence[int]],
    labels: Sequence[str],
    path: Sequence[int] | None = None,
    title: str = "Position ids",
    first: int = 0,
) -> go.Figure:
    """One line per entry of ``positions`` (e.g. ``{"seen": …, "unseen": …}``): position id per
    token, tokens numbered from ``first`` (their index in the whole sequence).

    With ``path`` (the path index of each token, -1 outside paths) the markers are coloured by path.

    >>> fig = positions_figure(
    ...     {"seen": [0, 1, 2], "unseen": [0, 1, 1]}, ["a", "b", "c"], path=[-1, 0, 1]
    ... )
    >>> [list(d.y) for d in fig.data], fig.data[1].marker.color
    ([[0, 1, 2], [0, 1, 1]], ('#999999', '#2a9d8f', '#e9c46a'))
    """
    axis = _indexed(labels, first)
    colors = (
        None
        if path is None
        else ["#999999" if p < 0 else PATH_COLORS[p % len(PATH_COLORS)] for p in path]
    )
    fig = go.Figure()
    for i, (name, pos) in enumerate(positions.items()):
        fig.add_scatter(
            x=axis,
            y=list(pos),
            name=name,
            mode="lines+markers",
            line=dict(dash="dot" if i == 0 else "solid", width=1.5),
            marker=dict(size=7, color=colors if i > 0 else None),
            hovertemplate="%{x}<br>position %{y}<extra>" + name + "</extra>",
        )
    fig.update_xaxes(title="token", tickfont_size=9, tickangle=-90)
    fig.update_yaxes(title="position id")
    fig.update_layout(
        title=title, height=420, legend=dict(orientation="h", y=1.02, yanchor="bottom")
    )
    return fig


def attends_to_figure(
    mask: Any, labels: Sequence[str], index: int, width: int = 16, title: str | None = None
) -> go.Figure:
    """What token ``index`` sees: the tokens laid out like text, ``width`` per line, coloured by
    3 = the query itself, 1 = it attends, 2 = an earlier token it may not see, 0 = a later token.

    >>> fig = attends_to_figure([[1, 0, 0], [1, 1, 0], [1, 0, 1]], ["a", "b", "c"], 2, width=2)
    >>> fig.data[0].z
    ([1, 2], [3, None])
    """
    row, n = _rows(mask)[index], len(labels)
    values = [3 if k == index else row[k] if row[k] else (2 if k < index else 0) for k in range(n)]
    lines = range(0, n, width)

    def pad(xs: Sequence[Any], fill: Any = None) -> list[list[Any]]:  # wrap into lines of ``width``
        return [list(xs[s : s + width]) + [fill] * (s + width - min(n, s + width)) for s in lines]

    names = {
        "later (causal)": BLOCKED,
        "attends": ATTEND,
        "earlier, hidden": HIDDEN,
        "query": QUERY,
    }
    fig = go.Figure(
        go.Heatmap(
            z=pad(values),
            text=pad([short_label(t) for t in labels], ""),
            customdata=pad(list(range(n))),
            texttemplate="%{text}",
            textfont_size=10,
            zmin=0,
            zmax=3,
            colorscale=_discrete(list(names.values())),
            showscale=False,
            xgap=2,
            ygap=2,
            hovertemplate="token %{customdata}: %{text}<extra></extra>",
        )
    )
    _legend(fig, names)
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_xaxes(title=f"tokens left to right, {width} per line")
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False, autorange="reversed")
    fig.update_yaxes(title="line of the sequence")
    seen = sum(row)
    fig.update_layout(
        title=title
        or f"token {index} {labels[index]!r} attends to {seen} of {index + 1} tokens so far",
        height=120 + 34 * len(lines),
        plot_bgcolor="white",
        legend=dict(orientation="h", y=1.0, yanchor="bottom"),
        margin=dict(t=80, b=10),
    )
    return fig


def timing_chart(results: Mapping[str, Any]) -> go.Figure:
    """Forked versus sequential decoding of k paths: ``results`` is ``bench_forked``'s dict from
    ``benchmarks/rollout.py`` (``single_path_s``, ``path_len`` and ``forked[str(k)]["seconds"]``).

    >>> r = {
    ...     "path_len": 8,
    ...     "single_path_s": 0.1,
    ...     "forked": {"2": {"seconds": 0.12}, "4": {"seconds": 0.15}},
    ... }
    >>> fig = timing_chart(r)
    >>> list(fig.data[0].y), [round(y, 2) for y in fig.data[1].y]
    ([0.1, 0.12, 0.15], [0.1, 0.2, 0.4])
    """
    ks = [1] + sorted(int(k) for k in results["forked"])
    single = results["single_path_s"]
    forked = [single] + [results["forked"][str(k)]["seconds"] for k in ks[1:]]
    sequential = [k * single for k in ks]
    x = [f"k = {k}" for k in ks]
    fig = go.Figure()
    fig.add_bar(
        x=x,
        y=forked,
        name="forked: k rows decode together",
        marker_color=ATTEND,
        textposition="outside",
        text=[f"{s / f:.1f}× faster" if k > 1 else "" for k, s, f in zip(ks, sequential, forked)],
    )
    fig.add_bar(
        x=x, y=sequential, name="sequential: one path after another", marker_color="#bbbbbb"
    )
    fig.update_xaxes(title="paths per block")
    fig.update_yaxes(title="seconds (median)")
    fig.update_layout(
        title=f"Decoding k paths of {results['path_len']} tokens each",
        barmode="group",
        height=380,
        legend=dict(orientation="h", y=1.02, yanchor="bottom"),
    )
    return fig


def pass_at_k_figure(
    curves: Mapping[str, Mapping[Any, float]], title: str, greedy: float | None = None
) -> go.Figure:
    """pass@k against k, one line per entry of ``curves`` (``metrics.summarize``'s
    ``pass_curve_*``, ``{1: …, 2: …, 4: …}``; a card's keys are strings): pass@1 is mean@k, and the
    rise from there is what more candidates could add if the right one were picked. ``greedy``
    draws one answer's accuracy as a dashed line.

    >>> fig = pass_at_k_figure({"run": {"1": 0.4, "2": 0.55, "8": 0.8}}, "t", greedy=0.5)
    >>> list(fig.data[0].x), list(fig.layout.xaxis.tickvals), fig.layout.shapes[0].y0
    ([1, 2, 8], [1, 2, 8], 0.5)
    """
    fig, ks = go.Figure(), set()
    for name, curve in curves.items():
        points = sorted((int(k), v) for k, v in curve.items())  # (k, pass@k)
        ks |= {k for k, _ in points}
        fig.add_scatter(
            x=[k for k, _ in points],
            y=[v for _, v in points],
            name=name,
            mode="lines+markers",
            hovertemplate="pass@%{x} = %{y:.1%}",
        )
    if greedy is not None:
        fig.add_hline(y=greedy, line_dash="dash", annotation_text="greedy (one answer)")
    fig.update_xaxes(title="samples per problem k", type="log", tickvals=sorted(ks))
    fig.update_yaxes(title="pass@k (some sample right)", range=[0, 1], tickformat=".0%")
    fig.update_layout(
        title=title, width=720, height=420, legend=dict(orientation="h", y=1.02, yanchor="bottom")
    )
    return fig


def attention_explorer(
    masks: Mapping[str, Any], labels: Sequence[str], index: int = 0, width: int = 16
):
    """An ipywidgets box: pick a mask and a token, see ``attends_to_figure`` for it.

    The latest figure is kept as ``box.figure`` (outside a kernel nothing is displayed).

    >>> box = attention_explorer({"causal": [[1, 0], [1, 1]]}, ["a", "b"], width=2)
    >>> box.children[0].children[1].value = 1
    >>> box.figure.data[0].z
    ([1, 3],)
    """
    import ipywidgets as widgets
    from IPython import get_ipython
    from IPython.display import display

    pick = widgets.Dropdown(options=list(masks), description="mask")
    token = widgets.IntSlider(
        value=index,
        min=0,
        max=len(labels) - 1,
        description="token",
        continuous_update=False,
        layout=widgets.Layout(width="80%"),
    )
    out = widgets.Output()
    box = widgets.VBox([widgets.HBox([pick, token]), out])

    def render(_: Any = None) -> None:
        box.figure = attends_to_figure(masks[pick.value], labels, token.value, width)
        if get_ipython() is None:
            return
        with out:
            out.clear_output(wait=True)
            display(box.figure)

    pick.observe(render, "value")
    token.observe(render, "value")
    render()
    return box


def mask_figure(
    batches: dict[str, dict],
    tokenizer,
    start: int = 0,
    title: str = "The attention mask of one training example, per variant",
):
    """Side-by-side heatmaps of each collated batch's first mask, from token ``start`` on
    (rows = queries, columns = keys, dark = may attend), numbered by index in the whole sequence.

    >>> import torch
    >>> batch = {"input_ids": torch.tensor([[5, 6]]),
    ...          "attention_mask": torch.tensor([[[[1, 0], [1, 1]]]])}
    >>> class Tok:
    ...     def decode(self, ids): return "x"
    >>> fig = mask_figure({"seen": batch}, Tok())
    >>> fig.layout.xaxis.title.text, [t.name for t in fig.data][1:]
    ('key (what it may look at)', ['attends', 'blocked'])
    """
    ids = next(iter(batches.values()))["input_ids"][0, start:].tolist()
    labels = [f"{i}:{tokenizer.decode([t])}" for i, t in enumerate(ids, start)]
    fig = make_subplots(1, len(batches), subplot_titles=list(batches), horizontal_spacing=0.08)
    for col, batch in enumerate(batches.values(), 1):
        allowed = batch["attention_mask"][0, 0, start:, start:].int().tolist()  # (L', L')
        fig.add_heatmap(
            z=allowed,
            x=labels,
            y=labels,
            colorscale=[[0, BLOCKED], [1, ATTEND]],
            showscale=False,
            hovertemplate="query %{y}<br>key %{x}<extra></extra>",
            row=1,
            col=col,
        )
    _legend(fig, {"attends": ATTEND, "blocked": BLOCKED})
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_yaxes(title="query (the token being computed)", col=1)
    fig.update_xaxes(showticklabels=False, title="key (what it may look at)")
    fig.update_layout(
        title=title,
        height=480,
        width=880,
        plot_bgcolor="white",
        legend=dict(orientation="h", y=1.08, x=1, xanchor="right", yanchor="bottom"),
        margin=dict(t=90, b=50, l=60, r=10),
    )
    return fig


def untitled_y_axes(fig: go.Figure) -> list[str]:
    """The y-axes (``"y"``, ``"y2"``, ...) that hold a trace in a row of panels none of whose
    y-axes has a title: a reader cannot tell what such a panel measures. Panels side by side may
    share one title on the left (axes with the same vertical domain are one row).

    >>> fig = make_subplots(rows=2, cols=1)
    >>> _ = fig.add_scatter(y=[1], row=1, col=1).add_scatter(y=[2], row=2, col=1)
    >>> untitled_y_axes(fig.update_yaxes(title="share", row=1, col=1))
    ['y2']
    """
    used = {getattr(t, "yaxis", None) or "y" for t in fig.data if "yaxis" in t}
    rows: dict[tuple, list[tuple[str, str]]] = {}
    for ref in used:
        axis = fig.layout["yaxis" + ref[1:]]
        rows.setdefault(tuple(axis.domain or (0, 1)), []).append((ref, axis.title.text or ""))
    return sorted(ref for axes in rows.values() if not any(t for _, t in axes) for ref, _ in axes)

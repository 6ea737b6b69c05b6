"""Analytics over training and evaluation: Figure 3, the mid-training scaffold, Table 2's rows.

* **Training curves** come from a GRPO run folder: its ``metrics.csv`` (the dashboard's rows), or,
  when that is missing, the ``log_history`` kept in the last ``trainer/checkpoint-N``. ``figure3``
  plots the parallel ratio and the mean relative position of the first ``<Parallel>`` block
  against the step (the paper's Figure 3: blocks drift from the start toward the end during RL);
  ``trend`` measures the drift and ``describe_trend`` says in words what the numbers show.
* **The mid-training scaffold** (the paper's Figure 4; ``pr1lib.studies.mid_training`` runs it):
  ``scaffold_figure`` draws its two phases as one curve with the switch marked.
* **The checkpoints of Table 2**: ``find_checkpoints`` looks for each stage's run folder (the
  notebooks' and the command line's), ``evaluate_checkpoints`` scores those that exist with
  ``pr1lib.evaluate.run_eval`` (cached, resumable), and ``headline_table`` / ``write_headline``
  give the short table ``make tour`` prints and puts at the top of its report.

Simplification: the paper's block position averages over every block; ours (as the dashboard
logs it) is the first block's position, averaged over the samples that have one.

>>> import pandas as pd
>>> trend(pd.DataFrame({"step": [1, 2, 3, 4, 5, 6], "x": [.1, .1, .2, .2, .3, .3]}),
...       "x")["direction"]
'rising'
"""

from __future__ import annotations

import json
import math
import os
import statistics
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pr1lib.config import PROMPTS, VARIANT_ROLLOUT, EvalConfig, ModelConfig
from pr1lib.dashboard import read_metrics
from pr1lib.evalsets import load_benchmark
from pr1lib.evaluate import ResultsFile, load_for_eval, results_path, run_eval
from pr1lib.models import checkpoint_folder
from pr1lib.paper import PAPER_MODEL, STAGE_NAMES, our_columns, side_by_side, to_markdown
from pr1lib.paths import runs_dir
from pr1lib.profiles import check_profile
from pr1lib.runs import STAGE_RUNS, last_checkpoint
from pr1lib.runtime import profile_threads, set_threads

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


# ----------------------------------------------------------------------------- training curves
def _log_history(run_dir: Path) -> list[dict]:
    """Rows from the last checkpoint's ``trainer_state.json`` (the steps that logged a reward)."""
    ckpt = last_checkpoint(run_dir / "trainer")
    if ckpt is None or not (ckpt / "trainer_state.json").exists():
        return []
    history = json.loads((ckpt / "trainer_state.json").read_text()).get("log_history", [])
    return [
        {"step": int(h["step"]), **{k: v for k, v in h.items() if k != "step"}}
        for h in history
        if "reward" in h
    ]


def training_curves(run_dir: str | Path, step_offset: int = 0, label: str | None = None):
    """One row per logged step of a GRPO run folder: ``step`` (+ ``step_offset``), ``run`` and the
    ``CURVE_KEYS`` it logged (NaN where a step lacks one, e.g. no block -> no block position).

    >>> import tempfile; from pr1lib.dashboard import write_metrics
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
        yaxis=dict(range=[-0.02, 1.05]),
        height=420,
        margin=dict(t=60, b=40, l=50, r=20),
    )
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


# ----------------------------------------------------------------------------- Table 2's
# checkpoints
def find_checkpoints(profile: str | None = None, seed: int = 0, root: str | Path | None = None):
    """``(found, missing)``: ``found`` maps ``base`` to the profile's model and each stage of
    ``STAGE_RUNS`` with a ``merged/`` model to its run folder; ``missing`` maps the others to the
    folders that were searched.

    >>> import tempfile
    >>> found, missing = find_checkpoints("tiny", root=tempfile.mkdtemp())
    >>> found, sorted(missing)[:2]
    ({'base': 'data/tiny-base'}, ['grpo-gsm8k', 'rl-seen'])
    """
    profile = check_profile(profile)
    root = Path(root) if root else runs_dir()
    found, missing = {"base": ModelConfig.for_profile(profile).name}, {}
    for key, (_, patterns) in STAGE_RUNS.items():
        if key == "base":
            continue
        folders = [root / p.format(p=profile, s=seed) for p in patterns]
        hit = next((f for f in folders if (f / "merged").is_dir()), None)
        if hit is None:
            missing[key] = [str(f) for f in folders]
        else:
            found[key] = str(hit)
    return found, missing


def _stamp(source: str) -> str:
    """What identifies a checkpoint's weights: the folder and its weight files' sizes and times."""
    folder = Path(checkpoint_folder(source))
    files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    return json.dumps(
        [str(folder)] + [[f.name, f.stat().st_size, int(f.stat().st_mtime)] for f in files]
    )


def _cached(cfg: EvalConfig, path: Path, stamp: str) -> bool:
    """True when ``path`` holds every problem of ``cfg`` for the same weights; stale files are
    removed."""
    stamp_file = path.with_suffix(".source.json")
    if stamp_file.exists() and stamp_file.read_text() != stamp:
        for stale in (path, stamp_file, path.with_suffix(".config.json")):
            stale.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp_file.write_text(stamp)
    rows = ResultsFile(path).rows if path.exists() else {}
    return all(str(r["id"]) in rows for r in load_benchmark(cfg.benchmark, cfg.n, seed=cfg.seed))


def evaluate_checkpoints(
    found: dict[str, str],
    profile: str | None = None,
    benchmarks: tuple[str, ...] = (),
    out: str | Path | None = None,
    progress: bool = False,
    **eval_overrides: Any,
):
    """``{stage: {benchmark: summary}}`` for every checkpoint of ``found`` (``run_eval`` with the
    profile's ``EvalConfig`` + ``eval_overrides``), each rolled out and prompted as its variant
    was trained (``STAGE_RUNS``: the paper's protocol). Results files go to ``OUT`` (one per
    stage x benchmark x mode); a complete one for the same weights is read back without loading
    the model."""
    profile = check_profile(profile)
    set_threads(profile_threads(profile))
    out = Path(out) if out else runs_dir() / f"07_evaluation-{profile}" / "eval"
    results: dict[str, dict[str, dict]] = {}
    for key, source in found.items():
        variant = STAGE_RUNS.get(key, ("seen", ()))[0]
        base = EvalConfig.for_profile(
            profile,
            **{
                "prompt_style": PROMPTS[profile][variant],
                "mode": VARIANT_ROLLOUT[variant],
                **eval_overrides,
            },
        )
        loaded = None
        for bench in benchmarks or (base.benchmark,):
            cfg = base.replace(benchmark=bench)
            if not _cached(cfg, results_path(out, key, bench, cfg.mode), _stamp(source)):
                loaded = loaded or load_for_eval(source, profile, say=lambda *_: None)
            model, tokenizer = loaded or (None, None)
            summary = run_eval(
                model, tokenizer, config=cfg, out_dir=out, tag=key, progress=progress
            )
            results.setdefault(key, {})[bench] = summary
    return results


# ----------------------------------------------------------------------------- the headline table
HEADLINE_ENV = "PR1_TOUR_DIR"  # set by ``make tour``: notebook 07 writes headline.json there too
HEADLINE_FILE = "headline.json"  # others (``headline-<what>.json``, notebook 06) go below it


def headline_table(ours: dict[str, dict[str, dict]], model: str):
    """Table 2's rows, short: the paper's parallel % and Avg, then ours (parallel %, and mean@k /
    pass@k per benchmark), only for the stages we evaluated; every column says whose it is.

    >>> m = dict(accuracy=.25, pass_at_k=.5, parallel_ratio=0., n=4, k=2, checker="strict")
    >>> t = headline_table({"base": {"tinygsm-hard": m}}, "tiny")
    >>> t.shape, float(t.iloc[0, 1]), float(t.iloc[0, 3])
    ((1, 5), 6.6, 25.0)
    """
    frame = side_by_side(ours, model)
    frame = frame.loc[[STAGE_NAMES.get(key, key) for key in ours]]
    paper_cols = [f"paper: {PAPER_MODEL} | parallel %", f"paper: {PAPER_MODEL} | Avg"]
    keep = paper_cols + [c for c in frame.columns if c.startswith("ours:") and "Avg of" not in c]
    return frame[keep]


def write_headline(
    frame, title: str, folder: str | Path | None = None, name: str = HEADLINE_FILE
) -> list[Path]:
    """Save the headline (``rows`` + ``markdown``) as ``runs_dir()/latest-<name>`` and, when
    ``make tour`` set ``PR1_TOUR_DIR`` (or ``folder`` is given), as ``<name>`` there."""
    payload = {
        "title": title,
        "markdown": to_markdown(frame),
        "rows": json.loads(frame.reset_index().to_json(orient="records")),
    }
    targets = [runs_dir() / f"latest-{name}"]
    folder = folder or os.environ.get(HEADLINE_ENV)
    if folder:
        targets.append(Path(folder) / name)
    for path in targets:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=2))
    return targets


def read_headline(folder: str | Path) -> dict | None:
    """The headline notebook 07 wrote into ``folder`` (``None`` when there is none).

    >>> import tempfile; read_headline(tempfile.mkdtemp()) is None
    True
    """
    path = Path(folder) / HEADLINE_FILE
    return json.loads(path.read_text()) if path.exists() else None


def read_headlines(folder: str | Path) -> list[dict]:
    """Every headline in ``folder``: notebook 07's first, then the others by name."""
    others = sorted(Path(folder).glob("headline-*.json"))
    return [h for h in [read_headline(folder)] + [json.loads(p.read_text()) for p in others] if h]


# ----------------------------------------------------------------------------- the eval command's
# outputs
def pass_curve_figure(ours: dict[str, dict[str, dict]], checker: str = "strict"):
    """pass@j against j (1, 2, 4, ..., k) for every stage x benchmark (the unbiased estimator).

    >>> f = pass_curve_figure({"base": {"b": {"pass_curve_strict": {1: .2, 2: .3}}}})
    >>> f.data[0].name, list(f.data[0].x), list(f.data[0].y)
    ('base · b', [1, 2], [0.2, 0.3])
    """
    fig = go.Figure()
    for key, per_bench in ours.items():
        for bench, s in per_bench.items():
            curve = {int(j): v for j, v in s.get(f"pass_curve_{checker}", {}).items()}
            fig.add_scatter(
                x=list(curve), y=list(curve.values()), mode="lines+markers", name=f"{key} · {bench}"
            )
    fig.update_layout(
        title=f"pass@j ({checker} checker; unbiased estimator)",
        xaxis=dict(title="j", type="log"),
        yaxis=dict(title="pass@j", range=[0, 1.02]),
        height=360,
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
    figures = [pass_curve_figure(ours, result.get("checker", "strict"))]
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

"""``make tour``: execute every notebook headless and gather what they show into one report.

The report (``runs/tour-<timestamp>/report.html``) is self-contained and opens offline: one section
per notebook with its status and time, then the outputs of the cells tagged ``report`` (tables,
plotly charts, images, text). The executed notebooks are saved beside it. While the notebooks run,
``PR1_TOUR_DIR`` names the tour folder; notebook 07 saves its headline table there
(``headline.json``) and notebook 06 its TinyWorld one (``headline-tinyworld.json``); they go on
top of the report and are printed at the end. Each section also
lists the notebook's "You should see" checks (``pr1lib.notebook.expect.should_see``), those outside
their range highlighted; all of them are saved as ``checks.json``. A check outside its range does
not fail the tour.
"""

from __future__ import annotations

import ast
import html
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from pr1lib.config.runtime import profile_threads, usable_cores
from pr1lib.notebook.expect import Seen
from pr1lib.notebook.runner import Executed, cell_timings, execute, list_notebooks
from pr1lib.store.paths import runs_dir

PLOTLY_MIME = "application/vnd.plotly.v1+json"


def notebook_title(nb) -> str:
    """The first markdown heading of a notebook (or an empty string)."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("# ").strip()
    return ""


def _render_output(output: dict, fig_id: str) -> str:
    data = output.get("data", {})
    if PLOTLY_MIME in data:
        fig = json.dumps(data[PLOTLY_MIME])
        return (
            f'<div id="{fig_id}"></div><script>(function(f){{Plotly.newPlot("{fig_id}", '
            f'f.data, f.layout || {{}});}})({fig});</script>'
        )
    if "text/html" in data:
        return (
            "".join(data["text/html"]) if isinstance(data["text/html"], list) else data["text/html"]
        )
    if "image/png" in data:
        return f'<img src="data:image/png;base64,{data["image/png"]}"/>'
    text = output.get("text") or data.get("text/plain")
    if text:
        text = "".join(text) if isinstance(text, list) else text
        return f"<pre>{html.escape(text)}</pre>"
    return ""


def report_outputs(nb, prefix: str) -> list[str]:
    """HTML snippets for the outputs of the cells tagged ``report``."""
    parts = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "report" not in cell.get("metadata", {}).get("tags", []):
            continue
        for j, output in enumerate(cell.get("outputs", [])):
            parts.append(_render_output(output, f"{prefix}-{i}-{j}"))
    return [p for p in parts if p]


def _seen(check: dict) -> Seen:
    return Seen(*(check[k] for k in ("name", "value", "low", "high", "profile")))


def checks_summary(checks: list[dict]) -> str:
    """``3/3 in range``, ``1 of 3 OUTSIDE its range``, ``2 unranged`` ... (empty: no checks)."""
    verdicts = [_seen(c).ok for c in checks]
    parts = []
    if verdicts.count(False):
        parts.append(f"{verdicts.count(False)} of {len(verdicts)} OUTSIDE its range")
    elif verdicts.count(True):
        parts.append(f"{verdicts.count(True)}/{verdicts.count(True)} in range")
    if verdicts.count(None):
        parts.append(f"{verdicts.count(None)} with no range yet")
    return ", ".join(parts)


def checks_html(checks: list[dict]) -> str:
    """The "You should see" checks as a list; a check outside its range is highlighted."""
    if not checks:
        return ""
    items = []
    for check in checks:
        seen = _seen(check)
        css = {True: "in", False: "out", None: "unranged"}[seen.ok]
        items.append(f"<li class='{css}'>{html.escape(seen.line())}</li>")
    return f"<ul class='checks'>{''.join(items)}</ul>"


def _section(run: Executed, index: int) -> str:
    status = "ok" if run.error is None else "FAILED"
    head = f"<h2>{html.escape(run.path.stem)} — {html.escape(notebook_title(run.nb))}</h2>"
    slow = "; ".join(
        f"cell {t['cell']} {t['seconds']:.0f} s ({html.escape(t['first_line'])})"
        for t in cell_timings(run.nb, top=3)
    )
    meta = f'<p class="meta">{status} · {run.seconds:.0f} s · slowest cells: {slow or "-"}</p>'
    err = f"<pre class='err'>{html.escape(run.error[-3000:])}</pre>" if run.error else ""
    body = "\n".join(report_outputs(run.nb, f"fig{index}")) or "<p><em>(no report cells)</em></p>"
    return f"<section>{head}{meta}{err}{checks_html(run.checks)}{body}</section>"


def _headline_html(headline: dict | None) -> str:
    """A headline table a notebook saved (``pr1lib.evaluation.headline.write_headline``), as
    HTML."""
    if not headline or not headline.get("rows"):
        return ""
    cols = list(headline["rows"][0])
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape('–' if r[c] is None else str(r[c]))}</td>" for c in cols)
        + "</tr>"
        for r in headline["rows"]
    )
    return (
        f"<h2>{html.escape(headline.get('title', 'headline'))}</h2>"
        f"<table><tr>{head}</tr>{body}</table>"
    )


def build_report(runs: list[Executed], profile: str, headlines: Sequence[dict] = ()) -> str:
    """The whole self-contained HTML page (plotly.js embedded once), the headline tables on top."""
    from plotly.offline import get_plotlyjs

    rows = "".join(
        f"<tr><td>{r.path.stem}</td><td>{'ok' if r.error is None else 'FAILED'}</td>"
        f"<td>{r.seconds:.0f}</td><td>{html.escape(checks_summary(r.checks))}</td></tr>"
        for r in runs
    )
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px}"
        ".meta{color:#555}.err{background:#fee;white-space:pre-wrap}"
        ".checks{list-style:none;padding-left:0}.checks li{padding:2px 6px;margin:2px 0}"
        ".checks .in{background:#eef8ee}.checks .out{background:#fcc;font-weight:bold}"
        ".checks .unranged{color:#555}"
    )
    sections = "\n".join(_section(r, i) for i, r in enumerate(runs))
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>pr1 tour ({profile})</title>"
        f"<style>{style}</style><script>{get_plotlyjs()}</script></head><body>"
        f"<h1>pr1 tour — profile <code>{profile}</code></h1>"
        f"{''.join(_headline_html(h) for h in headlines)}"
        f"<table><tr><th>notebook</th><th>status</th><th>seconds</th><th>you should see</th></tr>"
        f"{rows}</table>"
        f"{sections}</body></html>"
    )


def select_notebooks(only: Iterable[str] | None = None) -> list[Path]:
    """The notebooks whose name starts with one of ``only`` (all when ``None``); a prefix that
    matches none is a ``ValueError`` listing the names.

    >>> [p.name for p in select_notebooks(["01"])]
    ['01_parallel_format.py']
    """
    paths = list_notebooks()
    for prefix in only or ():
        if not any(p.name.startswith(prefix) for p in paths):
            names = ", ".join(p.stem for p in paths)
            raise ValueError(f"--only {prefix} matches no notebook; choose prefixes of: {names}")
    return [p for p in paths if not only or any(p.name.startswith(o) for o in only)]


def declared_parameters(path: Path) -> set[str]:
    """The names a notebook's ``parameters`` cell sets (``PROFILE``, ``SEED``, ...).

    >>> sorted(declared_parameters(select_notebooks(["06"])[0]))
    ['INIT', 'LIVE', 'PROFILE', 'SEED']
    """
    text = Path(path).read_text(encoding="utf-8")
    cell = text.split('tags=["parameters"]', 1)[-1].split("# %%", 1)[0]
    return set(re.findall(r"^([A-Z][A-Z0-9_]*)\s*=", cell, re.MULTILINE))


def notebook_parameters(paths: list[Path], items: Iterable[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` items as notebook parameters (Python literals, else text); a key no
    notebook in ``paths`` declares, or one a flag sets, is a ``ValueError`` naming the others.

    >>> notebook_parameters(select_notebooks(["06"]), ["init=runs/sft-tiny-seen"])
    {'INIT': 'runs/sft-tiny-seen'}
    """
    declared = set().union(*(declared_parameters(p) for p in paths)) - {"PROFILE", "SEED"}
    params: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip().upper()
        if key in ("PROFILE", "SEED"):
            raise ValueError(f"{key} comes from --{key.lower()}, not --set")
        if not sep or key not in declared:
            valid = ", ".join(sorted(declared)) or "none"
            raise ValueError(
                f"--set {item}: the notebooks run here declare no parameter {key!r} "
                f"(settable: {valid})"
            )
        try:
            params[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            params[key] = raw
    return params


# Notebooks that load what notebook 04 trains (05's doctor, 06's Stage 2, 07's table) run in order
# on one lane; the others (00-03) run on a second one, each lane on its own kernel: beside the
# first where the cores hold both lanes' threads (``lane_workers``), else after it.
CHAIN = ("04", "05", "06", "07")


def lanes(paths: list[Path]) -> list[list[Path]]:
    """The notebooks split into the training chain and the rest (empty lanes dropped).

    >>> [[p.name[:2] for p in lane] for lane in lanes(select_notebooks(["01", "04", "06"]))]
    [['04', '06'], ['01']]
    """
    chain = [p for p in paths if p.name[:2] in CHAIN]
    return [lane for lane in (chain, [p for p in paths if p not in chain]) if lane]


def lane_workers(profile: str, n_lanes: int, cores: int | None = None) -> int:
    """How many lanes run at once: all of them where ``cores`` (default ``usable_cores()``) hold
    every lane's torch threads (``profile_threads``; ``None``, a GPU profile's, counts as one),
    else one after another: two threads that share a core with another kernel wait on each other
    and run slower than one.

    >>> [lane_workers(name, 2, cores) for name, cores in [("tiny", 2), ("tiny", 4), ("smoke", 2)]]
    [1, 2, 2]
    """
    threads = profile_threads(profile) or 1
    cores = usable_cores() if cores is None else cores
    return n_lanes if threads * n_lanes <= cores else 1


def _run_lane(
    lane: list[Path], profile: str, out: Path, seed: int, params: dict[str, Any]
) -> dict[Path, Executed]:
    import nbformat

    runs = {}
    for path in lane:
        print(f"[tour] {path.name} ({profile}) ...", flush=True)
        mine = {k: v for k, v in params.items() if k in declared_parameters(path)}
        run = execute(path, profile=profile, seed=seed, params=mine)
        nbformat.write(run.nb, out / f"{path.stem}.ipynb")
        print(
            f"[tour] {path.name}: {'ok' if run.error is None else 'FAILED'} in {run.seconds:.0f} s",
            flush=True,
        )
        runs[path] = run
    return runs


def run_notebooks(
    profile: str,
    out: Path,
    only: list[str] | None = None,
    seed: int = 0,
    params: dict[str, Any] | None = None,
) -> list[Executed]:
    """Execute the notebooks (only those whose name starts with one of ``only``, if given) and
    save each executed copy under ``out``; each gets the ``params`` its parameters cell declares.
    The ``lanes`` run at once where the cores allow (``lane_workers``), the training chain first
    otherwise; the result keeps the notebooks' order."""
    from concurrent.futures import ThreadPoolExecutor

    out.mkdir(parents=True, exist_ok=True)
    paths = select_notebooks(only)
    groups = lanes(paths)
    with ThreadPoolExecutor(max_workers=lane_workers(profile, len(groups)) or 1) as pool:
        futures = [pool.submit(_run_lane, g, profile, out, seed, params or {}) for g in groups]
        done = {path: run for f in futures for path, run in f.result().items()}
    return [done[path] for path in paths]


FOLDER_ENV = ("PR1_RUNS_DIR", "PR1_DATA_DIR")  # folders the kernels read from the environment


def run_tour(
    profile: str = "tiny",
    out: Path | None = None,
    only: list[str] | None = None,
    seed: int = 0,
    params: dict[str, Any] | None = None,
) -> tuple[Path, list[Executed]]:
    """Execute the notebooks (``profile``: resolved by the caller), save them and ``report.html``
    under ``out``; return both."""
    from pr1lib.evaluation.headline import (  # heavy: --set is checked first
        HEADLINE_ENV,
        read_headlines,
    )

    # absolute: the kernels run in notebooks/, where a relative PR1_TOUR_DIR would point elsewhere
    out = Path(out or runs_dir() / f"tour-{time.strftime('%Y%m%d-%H%M%S')}").absolute()
    # notebook 07 saves headline.json there (kernels inherit it); the folders the user named
    # relative to here stay the same folders for kernels working in notebooks/
    before = {k: os.environ.get(k) for k in (HEADLINE_ENV, *FOLDER_ENV)}
    os.environ[HEADLINE_ENV] = str(out)
    for key in FOLDER_ENV:
        if os.environ.get(key, "").strip():
            os.environ[key] = str(Path(os.environ[key]).expanduser().absolute())
    try:
        runs = run_notebooks(profile, out, only, seed, params)
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    report = out / "report.html"
    report.write_text(build_report(runs, profile, read_headlines(out)), encoding="utf-8")
    checks = {r.path.stem: r.checks for r in runs}
    (out / "checks.json").write_text(
        json.dumps(checks, indent=2, ensure_ascii=False), encoding="utf-8"
    )
    (out / "timings.json").write_text(json.dumps(tour_timings(runs), indent=1), encoding="utf-8")
    return report, runs


def tour_timings(runs: list[Executed]) -> dict[str, Any]:
    """Seconds per notebook and per code cell, slowest first (``timings.json``, ``--timings``)."""
    return {
        r.path.stem: {"seconds": round(r.seconds, 1), "cells": cell_timings(r.nb)} for r in runs
    }

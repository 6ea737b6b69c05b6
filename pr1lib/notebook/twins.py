"""The ``.ipynb`` twins as a visitor sees them: the outputs of a run, each figure also as a PNG.

``make outputs`` (``python -m pr1lib outputs``) executes the notebooks (profile ``tiny``), turns
each executed copy into what GitHub, Colab and nbviewer can show before anyone runs it, and
writes it over ``notebooks/NN_slug.ipynb``:

* a widget view (the live dashboard, the control panel, the SFT loss plot) is replaced by what
  its ``Output`` widgets held at the end (the last figure), and the widget state is dropped;
* every plotly figure also carries an ``image/png`` (rendered by kaleido with a local Chrome),
  which is what GitHub shows; JupyterLab still draws the interactive figure;
* the kernelspec is set, so the notebook opens without a "Select Kernel" dialog;
* ``metadata.pr1.code_hash`` records the code it ran (``code_hash`` of the ``.py`` source), so
  ``stale_twins`` names every twin whose code changed since its outputs were made.

A twin over ``MAX_BYTES`` is refused. The cells' sources are the jupytext ``.py`` sources', so the
drift test (tests/test_notebooks.py) holds for twins with outputs too, and ``make sync`` keeps the
outputs of every cell whose source did not change.

>>> views = {"o": {"model_name": "OutputModel", "state": {"outputs": [{"output_type": "stream"}]}},
...          "b": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_o"]}}}
>>> widget_outputs("b", views)
[{'output_type': 'stream'}]
"""

from __future__ import annotations

import base64
import copy
import re
import warnings
from pathlib import Path
from typing import Any, Callable

from pr1lib.notebook.runner import NOTEBOOK_DIR, list_notebooks, read
from pr1lib.notebook.tour import run_notebooks
from pr1lib.store.paths import runs_dir, shown

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PLOTLY = "application/vnd.plotly.v1+json"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
MAX_BYTES = 2_000_000  # one twin, outputs included
PNG_WIDTH = 860  # fits JupyterLab's and GitHub's notebook column without a scrollbar
# what a committed twin must not show: the machine that ran it, a leftover of an old run folder,
# a row the notebook could not fill. Each is a defect of the run, not of the reader's checkout.
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|tmp|home|root|Users|content|private)/[^\s'\"]+")
LEFTOVERS = {
    "a run folder moved aside": re.compile(r"moved \S+ to \S+\.prev"),
    "a missing run": re.compile(r"\bmissing\b.*\b(?:rl|sft|grpo)-|no range for"),
}
# stderr a twin may show, with the reason it is there
ALLOWED_STDERR: dict[str, str] = {}
# what `jupytext --sync` keeps of a twin's jupytext metadata (jupytext.toml): a twin written here
# is then left as it is by `make sync`
JUPYTEXT_KEPT = ("cell_metadata_filter",)


def widget_states(nb) -> dict[str, dict]:
    """``model id -> {"model_name", "state", ...}`` as saved by an executed notebook."""
    return dict(nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {}))


def widget_outputs(model_id: str, states: dict[str, dict]) -> list[dict]:
    """What a widget shows as notebook outputs: an ``Output`` widget's outputs, a box's children's
    in order (nested widget views resolved too); other widgets (sliders, bars) show nothing."""
    widget = states.get(model_id, {})
    state = widget.get("state", {})
    if widget.get("model_name") == "OutputModel":
        return [o for out in state.get("outputs", []) for o in _resolved(out, states)]
    children = [c.removeprefix("IPY_MODEL_") for c in state.get("children", [])]
    return [o for child in children for o in widget_outputs(child, states)]


def _resolved(output: dict, states: dict[str, dict]) -> list[dict]:
    view = output.get("data", {}).get(WIDGET_VIEW)
    return [output] if view is None else widget_outputs(view["model_id"], states)


def inline_widgets(nb) -> Any:
    """A copy of ``nb`` with every widget view replaced by its outputs and no widget state."""
    nb = copy.deepcopy(nb)
    states = widget_states(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for out in cell.outputs for o in _resolved(out, states)]
    nb.metadata.pop("widgets", None)
    return nb


def figure_titles(output: dict) -> list[str]:
    """The title of the plotly figure in one output (``[]`` if none; ``""`` if untitled)."""
    fig = output.get("data", {}).get(PLOTLY)
    if fig is None:
        return []
    title = fig.get("layout", {}).get("title", "")
    return [title.get("text", "") if isinstance(title, dict) else str(title)]


def figures_by_cell(nb) -> list[list[str]]:
    """Per code cell, the titles of the plotly figures it shows, widgets' contents included: a
    figure that redraws in place counts once."""
    flat = inline_widgets(nb)
    return [
        [t for o in c.outputs for t in figure_titles(o)]
        for c in flat.cells
        if c.cell_type == "code"
    ]


def _texts(output: dict) -> list[str]:
    """The text an output shows: a stream, or its text/plain, text/markdown and text/html."""
    if output.get("output_type") == "stream":
        return [output.get("text", "")]
    data = output.get("data", {})
    return [str(data[k]) for k in ("text/plain", "text/markdown", "text/html") if k in data]


def _empty_figure(output: dict) -> bool:
    """A plotly figure whose traces hold no data point."""
    fig = output.get("data", {}).get(PLOTLY)
    if fig is None:
        return False
    points = [len(t.get(a) or []) for t in fig.get("data", []) for a in ("x", "y", "z", "values")]
    return not any(points)


def twin_problems(nb) -> list[str]:
    """What a committed twin shows that a learner should not see, one line per problem (cell
    number first): a figure without a data point, a machine's absolute path, a stderr output that
    is not allowed (``ALLOWED_STDERR``), a run folder moved aside, a missing run.

    >>> import nbformat
    >>> cell = nbformat.v4.new_code_cell("x")
    >>> moved = nbformat.v4.new_output("stream", name="stderr", text="moved /tmp/a to b.prev")
    >>> cell.outputs = [moved]
    >>> twin_problems(nbformat.v4.new_notebook(cells=[cell]))  # doctest: +NORMALIZE_WHITESPACE
    ['cell 1: a stderr output: moved /tmp/a to b.prev',
     'cell 1: an absolute path: /tmp/a', 'cell 1: a run folder moved aside']
    """
    problems = []
    for n, cell in enumerate(inline_widgets(nb).cells, 1):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            problems += [f"cell {n}: {p}" for p in _output_problems(output)]
    return problems


def _output_problems(output: dict) -> list[str]:
    found = ["a figure with no data point"] if _empty_figure(output) else []
    text = "\n".join(_texts(output))
    if output.get("name") == "stderr" and not any(k in text for k in ALLOWED_STDERR):
        found.append(f"a stderr output: {text.strip().splitlines()[0][:120]}")
    found += [f"an absolute path: {m}" for m in MACHINE_PATH.findall(text)[:3]]
    return found + [what for what, rule in LEFTOVERS.items() if rule.search(text)]


def plotly_png(figure: dict) -> bytes:
    """A PNG of a plotly figure (JSON form) through kaleido and a local Chrome/Chromium."""
    import plotly.io as pio

    height = figure.get("layout", {}).get("height")
    return pio.to_image(figure, format="png", width=PNG_WIDTH, height=height)


def with_png(nb, to_png: Callable[[dict], bytes] = plotly_png) -> Any:
    """``nb`` with an ``image/png`` beside every plotly figure (GitHub shows the PNG)."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if PLOTLY in data and "image/png" not in data:
                data["image/png"] = base64.b64encode(to_png(data[PLOTLY])).decode("ascii")
    return nb


def static_twin(nb, to_png: Callable[[dict], bytes] = plotly_png) -> Any:
    """What ``make outputs`` writes: widgets inlined, PNGs added, the kernelspec set."""
    nb = with_png(inline_widgets(nb), to_png)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    paired = nb.metadata.pop("jupytext", {})
    if any(k in paired for k in JUPYTEXT_KEPT):
        nb.metadata["jupytext"] = {k: paired[k] for k in JUPYTEXT_KEPT if k in paired}
    for cell in nb.cells:
        cell.get("metadata", {}).pop("execution", None)  # per-cell timestamps: noise in diffs
    nb.cells = [c for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    return nb


def keep_ids(nb, old_twin: Path) -> Any:
    """``nb`` with the cell ids of the twin it replaces, where cell sources match one to one (so
    a regenerated twin's diff shows outputs, not new ids)."""
    import nbformat

    if Path(old_twin).exists():
        old = nbformat.read(str(old_twin), as_version=4).cells
        if [c.source for c in old] == [c.source for c in nb.cells]:
            for cell, before in zip(nb.cells, old):
                cell["id"] = before.get("id", cell.get("id"))
    return nb


def code_hash(nb) -> str:
    """A short hash of a notebook's code cells, in order (markdown left out: prose changes no
    output). A twin records it when ``make outputs`` writes it.

    >>> import nbformat
    >>> nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1 ")])
    >>> code_hash(nb) == code_hash(nbformat.v4.new_notebook(cells=[
    ...     nbformat.v4.new_markdown_cell("prose"), nbformat.v4.new_code_cell("x = 1")]))
    True
    """
    import hashlib

    code = "\n\0".join(c.source.strip() for c in nb.cells if c.cell_type == "code")
    return hashlib.sha256(code.encode("utf-8")).hexdigest()[:16]


def stale_twins(dest: Path = NOTEBOOK_DIR) -> list[str]:
    """One line per twin whose outputs are not a run of its ``.py`` source's code as it is now:
    the hash it recorded (``metadata.pr1.code_hash``) is missing or differs, or a code cell never
    ran (no ``execution_count``). ``[]``: every twin is current. ``make outputs`` regenerates."""
    import nbformat

    stale = []
    for path in list_notebooks():
        twin = nbformat.read(str(Path(dest) / f"{path.stem}.ipynb"), as_version=4)
        recorded = twin.metadata.get("pr1", {}).get("code_hash")
        if recorded != (now := code_hash(read(path))):
            was = f"ran code {recorded}" if recorded else "records no run"
            stale.append(f"{path.stem}.ipynb: {was}, its source's code is {now}")
        code = [c for c in twin.cells if c.cell_type == "code"]
        never = [i for i, c in enumerate(code) if c.get("execution_count") is None]
        if never:
            stale.append(f"{path.stem}.ipynb: code cells {never[:5]} never ran")
    return stale


def twin_bytes(nb) -> bytes:
    """The twin as ``nbformat`` writes it."""
    import nbformat

    return (nbformat.writes(nb) + "\n").encode("utf-8")


def write_twins(
    runs: list,
    dest: Path = NOTEBOOK_DIR,
    to_png: Callable[[dict], bytes] = plotly_png,
    max_bytes: int = MAX_BYTES,
) -> dict[str, int]:
    """Write each executed run's static twin to ``dest/<stem>.ipynb``; ``{name: bytes}``. A failed
    run or a twin over ``max_bytes`` is a ``RuntimeError`` (nothing of that notebook written)."""
    sizes = {}
    for run in runs:
        if run.error is not None:
            raise RuntimeError(
                f"{run.path.name} failed, its twin is left as it was: {run.error[-400:]}"
            )
        twin = Path(dest) / f"{run.path.stem}.ipynb"
        nb = keep_ids(static_twin(run.nb, to_png), twin)
        nb.metadata["pr1"] = {"code_hash": code_hash(read(run.path))}  # what this run executed
        data = twin_bytes(nb)
        if len(data) > max_bytes:
            raise RuntimeError(
                f"{run.path.stem}.ipynb would be {len(data) / 1e6:.1f} MB "
                f"(limit {max_bytes / 1e6:.1f} MB): shrink its figures or outputs"
            )
        twin.write_bytes(data)
        sizes[f"{run.path.stem}.ipynb"] = len(data)
    return sizes


def make_outputs(
    profile: str = "tiny",
    only: list[str] | None = None,
    work: Path | None = None,
    dest: Path = NOTEBOOK_DIR,
) -> dict[str, int]:
    """Execute the notebooks (``only``: name prefixes) and write their twins with outputs. All of
    them come from one clean run: runs left by an earlier one (``NN_*`` folders under the runs
    folder) are refused before anything runs, unless ``only`` reruns some on purpose."""
    import tempfile

    left = sorted(p.name for p in runs_dir().glob("[0-9][0-9]_*"))
    if left and not only:  # --only reruns some notebooks on purpose, on the runs already there
        raise ValueError(
            f"{shown(runs_dir())} holds notebook runs ({', '.join(left[:3])}, ...): twins come "
            "from one clean run; run `make outputs` in a fresh clone, or set PR1_RUNS_DIR to an "
            "empty folder"
        )
    import kaleido

    work = Path(work or tempfile.mkdtemp(prefix="pr1-outputs-"))
    runs = run_notebooks(profile, work, only)
    kaleido.start_sync_server(silence_warnings=True)  # one browser for every figure
    try:
        with warnings.catch_warnings():  # plotly notes that a running server ignores its options
            warnings.filterwarnings("ignore", message="The kopts argument is ignored")
            return write_twins(runs, dest)
    finally:
        kaleido.stop_sync_server(silence_warnings=True)

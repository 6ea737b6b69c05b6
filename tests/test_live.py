"""Live figures redraw in place in a real kernel, and ``make outputs`` turns them into static twins.

A small notebook runs headless (nbclient mimics a frontend's ``Output`` widgets, as JupyterLab
does): the GRPO dashboard logs three steps in one cell and two more from the next cell (as the
panel's button would, from elsewhere), and the SFT loss plot logs two runs.

Run: .venv/bin/python -m pytest tests/test_live.py -q -p no:cacheprovider
"""

from __future__ import annotations

import nbclient
import nbformat
import pytest

from pr1lib.paths import REPO_ROOT
from pr1lib.twins import (
    KERNELSPEC,
    PLOTLY,
    WIDGET_VIEW,
    figures_by_cell,
    static_twin,
    twin_bytes,
    write_twins,
)

CELLS = [
    """from types import SimpleNamespace as S
from pr1lib.runtime import quiet_known_noise
quiet_known_noise()  # as start_notebook does, before anything imports bitsandbytes
from pr1lib.dashboard import Dashboard
dash = Dashboard(None, live=True, title="T")
dash.on_train_begin(None, S(global_step=0, max_steps=5), None)
for i in (1, 2, 3):
    dash.on_log(None, S(global_step=i, max_steps=5), None, logs={"reward": float(i)})""",
    """for i in (4, 5):  # another cell (or a button's callback) trains the same session on
    dash.on_log(None, S(global_step=i, max_steps=5), None, logs={"reward": float(i)})""",
    """from pr1lib.sft import LiveLossPlot
plot = LiveLossPlot(title="L")
for name in ("seen", "unseen"):
    log = plot.callback(name)
    for step in (1, 2, 3):
        log.on_log(None, S(global_step=step), None, logs={"loss": 1.0 / step})""",
]


@pytest.fixture(scope="module")
def executed():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    return nb


@pytest.mark.notebook
def test_each_live_figure_is_one_figure_that_grows(executed):
    assert figures_by_cell(executed) == [["T"], [], ["L"]]
    assert not [o for o in executed.cells[1].outputs if o.output_type == "display_data"]
    twin = static_twin(executed, to_png=lambda fig: b"png")
    dashboard = [o for o in twin.cells[0].outputs if PLOTLY in o.get("data", {})]
    assert len(dashboard) == 1 and max(len(t["x"]) for t in dashboard[0].data[PLOTLY]["data"]) == 5
    loss = [o for o in twin.cells[2].outputs if PLOTLY in o.get("data", {})][0].data[PLOTLY]
    assert [t["name"] for t in loss["data"]] == ["seen", "unseen"]


@pytest.mark.notebook
def test_static_twin_inlines_widgets_adds_png_and_a_kernelspec(executed):
    twin = static_twin(executed, to_png=lambda fig: b"png")
    outputs = [o for c in twin.cells for o in c.outputs]
    assert not [o for o in outputs if WIDGET_VIEW in o.get("data", {})]
    assert all(o.data["image/png"] == "cG5n" for o in outputs if PLOTLY in o.get("data", {}))
    assert twin.metadata["kernelspec"] == KERNELSPEC and "widgets" not in twin.metadata
    assert "kernels-community" not in str(outputs)  # bitsandbytes' note, silenced
    assert "widgets" in executed.metadata  # the executed copy itself is left alone


@pytest.mark.notebook
def test_write_twins_refuses_a_failed_run_or_an_oversized_twin(executed, tmp_path):
    class Run:
        def __init__(self, error=None):
            self.path, self.nb, self.error = tmp_path / "09_demo.py", executed, error

    sizes = write_twins([Run()], tmp_path, to_png=lambda fig: b"png")
    assert sizes == {"09_demo.ipynb": (tmp_path / "09_demo.ipynb").stat().st_size}
    with pytest.raises(RuntimeError, match="would be .* MB"):
        write_twins([Run()], tmp_path, to_png=lambda fig: b"x" * 3_000_000)
    with pytest.raises(RuntimeError, match="failed"):
        write_twins([Run("boom")], tmp_path)
    assert len(twin_bytes(static_twin(executed, lambda fig: b"png"))) == sizes["09_demo.ipynb"]


def test_a_written_twin_is_left_as_it_is_by_make_sync(tmp_path):
    from jupytext.cli import jupytext

    (tmp_path / "jupytext.toml").write_text((REPO_ROOT / "jupytext.toml").read_text())
    source = tmp_path / "09_demo.py"
    source.write_text("# %%\nprint(1)\n")
    jupytext(["--sync", str(source)])
    nb = nbformat.read(str(source.with_suffix(".ipynb")), as_version=4)
    # an executed copy: outputs, and the metadata a run adds (papermill/nbclient, jupytext)
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    nb.metadata["jupytext"].update(main_language="python", notebook_metadata_filter="-all",
                                   text_representation={"extension": ".py"})
    nb.metadata["language_info"] = {"name": "python"}
    twin = source.with_suffix(".ipynb")
    twin.write_bytes(twin_bytes(static_twin(nb, to_png=lambda fig: b"png")))
    written = twin.read_bytes()
    jupytext(["--sync", "--set-kernel", "python3", str(source)])
    assert twin.read_bytes() == written

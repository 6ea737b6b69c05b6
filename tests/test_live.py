"""Live figures redraw in place in a real kernel, and ``make outputs`` turns them into static twins.

A small notebook runs headless (nbclient mimics a frontend's ``Output`` widgets, as JupyterLab
does): the GRPO dashboard logs three steps in one cell and two more from the next cell (as the
panel's button would, from elsewhere), and the SFT loss plot logs two runs.

Run: .venv/bin/python -m pytest tests/test_live.py -q -p no:cacheprovider
"""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from pr1lib.notebook.twins import (
    KERNELSPEC,
    PLOTLY,
    WIDGET_VIEW,
    code_hash,
    figures_by_cell,
    static_twin,
    twin_bytes,
    write_twins,
)
from pr1lib.store.paths import REPO_ROOT

CELLS = [
    """from types import SimpleNamespace as S
from pr1lib.config.runtime import quiet_known_noise
quiet_known_noise()  # as start_notebook does, before anything imports bitsandbytes
from pr1lib.training.dashboard import Dashboard
dash = Dashboard(None, live=True, title="T")
dash.on_train_begin(None, S(global_step=0, max_steps=5), None)
for i in (1, 2, 3):
    dash.on_log(None, S(global_step=i, max_steps=5), None, logs={"reward": float(i)})""",
    """for i in (4, 5):  # another cell (or a button's callback) trains the same session on
    dash.on_log(None, S(global_step=i, max_steps=5), None, logs={"reward": float(i)})""",
    """from pr1lib.training.sft_live import LiveLossPlot
plot = LiveLossPlot(title="L")
for name in ("seen", "unseen"):
    log = plot.callback(name)
    for step in (1, 2, 3):
        log.on_log(None, S(global_step=step), None, logs={"loss": 1.0 / step})""",
]


RUNNER = REPO_ROOT / "tests" / "_nbrun.py"  # nbclient in a child process, stdin to stdout


def _execute_once(nb: nbformat.NotebookNode, timeout: float) -> nbformat.NotebookNode | None:
    """``nb`` executed by nbclient in a child process; ``None`` if it had not finished after
    ``timeout`` seconds (the child is killed; its kernel exits with its parent)."""
    child = subprocess.Popen(
        [sys.executable, str(RUNNER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = child.communicate(nbformat.writes(nb), timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        return None
    assert child.returncode == 0, err[-3000:]
    return nbformat.reads(out, as_version=4)


@pytest.fixture(scope="module")
def executed():
    """The cells run in a real kernel (``tests/_nbrun.py``: nbclient, its lost shell wake-ups
    polled away). A run still going after 2 minutes (a normal one takes 20-30 s) is killed and run
    once more, and a second hang fails the test instead of stalling the suite."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    for _ in range(2):
        done = _execute_once(nb, timeout=120)
        if done is not None:
            return done
    pytest.fail("nbclient hung twice executing the live-figure notebook")


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
    import jupytext

    jupytext.write(executed, tmp_path / "09_demo.py", fmt="py:percent")  # the run's source

    class Run:
        def __init__(self, error=None):
            self.path, self.nb, self.error = tmp_path / "09_demo.py", executed, error

    sizes = write_twins([Run()], tmp_path, to_png=lambda fig: b"png")
    assert sizes == {"09_demo.ipynb": (tmp_path / "09_demo.ipynb").stat().st_size}
    with pytest.raises(RuntimeError, match="would be .* MB"):
        write_twins([Run()], tmp_path, to_png=lambda fig: b"x" * 3_000_000)
    with pytest.raises(RuntimeError, match="failed"):
        write_twins([Run("boom")], tmp_path)
    twin = static_twin(executed, lambda fig: b"png")
    twin.metadata["pr1"] = {"code_hash": code_hash(jupytext.read(tmp_path / "09_demo.py"))}
    assert len(twin_bytes(twin)) == sizes["09_demo.ipynb"]  # the static twin and its run's hash


def test_a_written_twin_is_left_as_it_is_by_make_sync(tmp_path):
    from jupytext.cli import jupytext

    (tmp_path / "jupytext.toml").write_text((REPO_ROOT / "jupytext.toml").read_text())
    source = tmp_path / "09_demo.py"
    source.write_text("# %%\nprint(1)\n")
    jupytext(["--sync", str(source)])
    nb = nbformat.read(str(source.with_suffix(".ipynb")), as_version=4)
    # an executed copy: outputs, and the metadata a run adds (papermill/nbclient, jupytext)
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    nb.metadata["jupytext"].update(
        main_language="python",
        notebook_metadata_filter="-all",
        text_representation={"extension": ".py"},
    )
    nb.metadata["language_info"] = {"name": "python"}
    twin = source.with_suffix(".ipynb")
    twin.write_bytes(twin_bytes(static_twin(nb, to_png=lambda fig: b"png")))
    written = twin.read_bytes()
    jupytext(["--sync", "--set-kernel", "python3", str(source)])
    assert twin.read_bytes() == written


def test_one_second_polls_finds_a_reply_whose_wake_up_was_lost_and_keeps_the_deadline():
    """A poll that would wait its whole timeout for a reply already there (the lost wake-up) ends
    after a second and looks again; with no reply at all, Empty comes at the deadline."""
    import asyncio
    import time
    from queue import Empty

    from pr1lib.notebook.runner import one_second_polls

    polls: list[float] = []

    async def lost_then_found(timeout=None):  # the reply lands during the first poll, unseen
        polls.append(timeout)
        if len(polls) == 1:
            await asyncio.sleep(min(timeout, 60))
            raise Empty
        return {"msg_type": "execute_reply"}

    start = time.monotonic()
    reply = asyncio.run(one_second_polls(lost_then_found)(timeout=300))
    assert reply == {"msg_type": "execute_reply"} and polls[0] == 1.0
    assert time.monotonic() - start < 5  # not the 300 s a single poll would have waited

    async def nothing(timeout=None):
        await asyncio.sleep(timeout)
        raise Empty

    start = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(one_second_polls(nothing)(timeout=2.5))
    assert 2.4 <= time.monotonic() - start < 4

"""pr1lib.config.runtime: known noise silenced in one place (real warnings kept); Colab set up.

Run: .venv/bin/python -m pytest tests/test_runtime.py -q -p no:cacheprovider
"""

from __future__ import annotations

import logging
import sys
import types
import warnings

import pytest

from pr1lib.config import runtime


def test_known_noise_is_silenced_and_other_warnings_are_kept(caplog):
    runtime.quiet_known_noise()
    runtime.quiet_known_noise()  # twice: still one filter
    logger = logging.getLogger("bitsandbytes.backends.cpu.ops")
    assert len(logger.filters) == 1
    with caplog.at_level(logging.WARNING):
        logger.warning("Failed to load CPU gemm_4bit_forward from kernels-community: %s.", "x")
        logger.warning("a real bitsandbytes problem")
    assert [r.getMessage() for r in caplog.records] == ["a real bitsandbytes problem"]
    caplog.clear()
    kernels = logging.getLogger("kernels._internals.hf_hub")
    with caplog.at_level(logging.WARNING):
        kernels.warning(
            "Skipping publisher trust check for 'kernels-community/quantization-"
            "bitsandbytes' because Hugging Face Hub is in offline mode."
        )
        kernels.warning("Skipping publisher trust check for 'someone-else/kernel' because ...")
    assert [r.getMessage()[:40] for r in caplog.records] == [
        "Skipping publisher trust check for 'some"
    ]  # only the known kernel's note is noise
    caplog.clear()
    resize = logging.getLogger("transformers.modeling_utils")
    with caplog.at_level(logging.WARNING):
        resize.warning("The new embeddings will be initialized from a multivariate normal ...")
        resize.warning("a real transformers problem")
    assert [r.getMessage() for r in caplog.records] == ["a real transformers problem"]
    caplog.clear()
    resume = logging.getLogger("transformers.trainer")
    with caplog.at_level(logging.WARNING):  # the tied output layer is not missing; others are
        resume.warning(
            "There were missing keys in the checkpoint model loaded: ['lm_head.weight']."
        )
        resume.warning("There were missing keys in the checkpoint model loaded: ['q_proj.weight'].")
    assert [r.getMessage() for r in caplog.records] == [
        "There were missing keys in the checkpoint model loaded: ['q_proj.weight']."
    ]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        runtime.quiet_known_noise()  # filters go in front of "default"
        warnings.warn(
            "`is_gradient_checkpointing` is deprecated and will be removed in v6.", FutureWarning
        )
        warnings.warn("something else is deprecated", FutureWarning)
    assert [str(w.message) for w in seen] == ["something else is deprecated"]


def _fake_colab(monkeypatch):
    calls = []
    output = types.SimpleNamespace(enable_custom_widget_manager=lambda: calls.append("widgets"))
    colab = types.ModuleType("google.colab")
    colab.output = output
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setenv("PR1_RUNS_DIR", "-")  # recorded, so colab_setup's value is undone after
    monkeypatch.delenv("PR1_RUNS_DIR")
    return calls


def test_colab_setup_turns_widgets_on_and_keeps_runs_on_drive(monkeypatch, tmp_path):
    assert "google.colab" in sys.modules or runtime.colab_setup() is None  # not Colab: nothing
    calls = _fake_colab(monkeypatch)
    monkeypatch.setattr(runtime, "COLAB_DRIVE", tmp_path / "MyDrive")  # not mounted
    assert "lost when it is recycled" in runtime.colab_setup() and calls == ["widgets"]
    (tmp_path / "MyDrive").mkdir()  # mounted
    line = runtime.colab_setup()
    assert line.startswith(f"runs go to {tmp_path / 'MyDrive' / 'pr1-runs'}")
    from pr1lib.store.paths import runs_dir

    assert runs_dir() == tmp_path / "MyDrive" / "pr1-runs"


@pytest.mark.parametrize("profile, threads", [("tiny", 2), ("smoke", 1), ("colab", None)])
def test_start_notebook_sets_the_profile_threads_capped_at_the_cores(monkeypatch, profile, threads):
    import torch

    from pr1lib.config.runtime import start_notebook

    calls = []
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    monkeypatch.setattr("pr1lib.config.runtime.environment_report", lambda *a: "")
    monkeypatch.setattr("pr1lib.config.runtime.usable_cores", lambda: 8)
    start_notebook(profile, 0)
    assert calls == ([threads] if threads else [])
    calls.clear()
    monkeypatch.setattr("pr1lib.config.runtime.usable_cores", lambda: 1)  # a one-core machine
    start_notebook(profile, 0)
    assert calls == ([1] if threads else [])


def test_omp_num_threads_in_the_environment_wins_over_the_profile(monkeypatch):
    import torch

    from pr1lib.config.runtime import set_threads, usable_cores

    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    set_threads(2)
    assert calls == []
    monkeypatch.delenv("OMP_NUM_THREADS")
    set_threads(2)
    assert calls == [min(2, usable_cores())]

"""Shared test plumbing: the tests folder on ``sys.path`` (for the ``_tiny`` fixtures),
``needs_data`` for tests that read the real data sets, and one line at the end saying how many
tests skipped for missing data and how to run them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pr1lib.store.paths import shared_data_dir

sys.path.insert(0, str(Path(__file__).parent))  # `from _tiny import ...` (importlib import mode)
MISSING_DATA = "missing data:"  # every data skip's reason starts so, and the summary counts them


def needs_data(*relative: str) -> pytest.MarkDecorator:
    """Skip unless every ``relative`` path exists under the shared data folder (``PR1_DATA_DIR``,
    else ``../shared/data``)."""
    root = shared_data_dir()
    missing = [r for r in relative if root is None or not (root / r).exists()]
    return pytest.mark.skipif(bool(missing), reason=f"{MISSING_DATA} {', '.join(missing)}")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skipped = terminalreporter.stats.get("skipped", [])
    count = sum(MISSING_DATA in str(getattr(report, "longrepr", "")) for report in skipped)
    if count:
        terminalreporter.write_line(
            f"{count} tests skipped for missing data sets: set PR1_DATA_DIR to a folder holding "
            "gsm8k/, eval/, dapo/ and parallel_gsm8k/ (each skip's reason names its file) "
            "to run them."
        )


@pytest.fixture(scope="module")
def base():
    """One smoke policy (random tiny Qwen3 + tags + LoRA config) per test module; tests train
    deep copies (``fresh``)."""
    import torch

    from pr1lib.config import GRPOStageConfig
    from pr1lib.decoding.models import load_training_policy, stage_model_config

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    cfg = GRPOStageConfig.for_stage(3, "smoke")
    yield load_training_policy(stage_model_config(cfg), cfg.train_tag_rows)
    torch.set_num_threads(before)


def fresh(base):
    """Deep copies of the ``base`` fixture's model and LoRA config (the tokenizer is shared)."""
    import copy

    model, tokenizer, lora = base
    return copy.deepcopy(model), tokenizer, copy.deepcopy(lora)

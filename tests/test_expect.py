"""``pr1lib.notebook.expect``: a "You should see" check prints one line, lands in the file the tour
names, comes back on the executed notebook, and shows in ``report.html`` (outside its range:
highlighted, and the tour still succeeds). The notebooks' own checks are exercised in smoke by
tests/test_notebooks.py."""

from __future__ import annotations

import json
import textwrap

import pytest

from pr1lib.notebook import tour
from pr1lib.notebook.expect import (
    EXPECT_ENV,
    EXPECTED,
    Seen,
    expected_range,
    read_checks,
    should_see,
)
from pr1lib.notebook.runner import list_notebooks


def test_the_line_says_range_value_and_verdict(capsys):
    assert should_see("parallel ratio", 0.97, "tiny", low=0.9, high=1.0) is True
    assert capsys.readouterr().out.strip() == "you should see parallel ratio 0.9–1: got 0.97 ✓"
    assert should_see("parallel ratio", 0.5, "tiny", low=0.9, high=1.0) is False
    assert "✗ outside the range" in capsys.readouterr().out
    assert should_see("a gap", 2e-7, "smoke", high=1e-4) is True
    assert "a gap ≤ 0.0001: got 2e-07 ✓" in capsys.readouterr().out


def test_ranges_come_from_the_table_per_profile():
    assert expected_range("parallel ratio, base model", "tiny") == (0, 0.05)
    assert expected_range("hacks paid more than honest_parallel", "paper") == (0, 0)  # "*"
    assert expected_range("mean@k, base model", "tiny") == (0.25, 0.5)  # TinyWorld's, measured
    assert expected_range("mean@k, base model", "colab") is None  # left for a measured tour
    assert Seen("x", float("nan"), 0, 1, "smoke").ok is False
    assert Seen("x", 3.0, None, None, "tiny").ok is None


def test_a_check_is_recorded_where_the_env_says(tmp_path, monkeypatch, capsys):
    record = tmp_path / "checks.jsonl"
    monkeypatch.setenv(EXPECT_ENV, str(record))
    should_see("hacks paid more than honest_parallel", 1, "smoke")  # outside (0, 0)
    should_see("something new", 3, "tiny")
    rows = read_checks(record)
    assert [(r["name"], r["ok"], r["low"], r["high"]) for r in rows] == [
        ("hacks paid more than honest_parallel", False, 0, 0),
        ("something new", None, None, None),
    ]
    assert read_checks(tmp_path / "absent.jsonl") == []


def test_every_expected_range_is_used_by_a_notebook():
    sources = "\n".join(p.read_text(encoding="utf-8") for p in list_notebooks())
    for name in EXPECTED:
        assert f'should_see("{name}"' in sources, f"EXPECTED[{name!r}] is used by no notebook"


NOTEBOOK = textwrap.dedent('''\
    # %% [markdown]
    # # 99 · A check

    # %% tags=["parameters"]
    PROFILE = None
    SEED = 0

    # %%
    from pr1lib.notebook.expect import should_see

    should_see("in range", 0.5, PROFILE, low=0, high=1)
    should_see("out of range", 7, PROFILE, low=0, high=1)
    ''')


@pytest.mark.notebook
def test_the_tour_collects_and_highlights_the_checks(tmp_path, monkeypatch):
    path = tmp_path / "99_check.py"
    path.write_text(NOTEBOOK, encoding="utf-8")
    monkeypatch.setattr(tour, "select_notebooks", lambda only=None: [path])
    report, runs = tour.run_tour("smoke", tmp_path / "tour")
    assert runs[0].error is None  # a check outside its range does not fail the notebook
    assert [(c["name"], c["ok"]) for c in runs[0].checks] == [
        ("in range", True),
        ("out of range", False),
    ]
    page = report.read_text(encoding="utf-8")
    assert "<li class='out'>you should see out of range 0–1: got 7 ✗ outside the range</li>" in page
    assert "<li class='in'>you should see in range 0–1: got 0.5 ✓</li>" in page
    assert "1 of 2 OUTSIDE its range" in page
    saved = json.loads((tmp_path / "tour" / "checks.json").read_text(encoding="utf-8"))
    assert [c["name"] for c in saved["99_check"]] == ["in range", "out of range"]

"""Intervals over seeds and problems (``evaluation.seedstats``) and the controls table's per-seed
and width columns, on data whose answers are known."""

import json

import pytest

from pr1lib.evaluation.metrics import mean_interval
from pr1lib.evaluation.seedstats import two_level


def test_seeds_that_disagree_widen_the_interval_beyond_the_problems_only_one():
    """Two seeds, one right on every problem and one on none: the problems-only interval of the
    seeds' mean is a point (every problem scores 0.5), the two-level one spans most of [0, 1]."""
    grid = [[1.0] * 50, [0.0] * 50]
    flat = mean_interval([0.5] * 50)
    both = two_level(grid)
    assert flat["low"] == flat["high"] == 0.5
    assert both["mean"] == 0.5 and both["low"] <= 0.01 and both["high"] >= 0.99


def test_one_seed_gives_the_problems_only_interval():
    values = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0] * 5
    one, flat = two_level([values]), mean_interval(values)
    assert one["mean"] == pytest.approx(flat["mean"])
    assert abs(one["low"] - flat["low"]) < 0.06 and abs(one["high"] - flat["high"]) < 0.06


def test_a_contrast_keeps_its_sign_and_pairs_the_problems():
    """Treatment right wherever the control is, and on 20 more problems: the difference is +0.5
    with an interval above zero; reversed, below zero. Paired problems make a shared hard half
    cancel (the interval stays off zero though half the problems are failed by both)."""
    control = [[1.0] * 20 + [0.0] * 20] * 3
    treatment = [[1.0] * 40] * 2
    ahead, behind = two_level(treatment, control), two_level(control, treatment)
    assert ahead["diff"] == pytest.approx(0.5) and ahead["low"] > 0.3
    assert behind["diff"] == pytest.approx(-0.5) and behind["high"] < -0.3
    with pytest.raises(ValueError, match="same problems"):
        two_level(treatment, [[1.0] * 39])
    with pytest.raises(ValueError, match="seeds x problems"):
        two_level([])


def _stage(root, arm, seed, stage, start, hard_before, hard_after):
    folder = root / arm / f"seed{seed}" / f"grpo-tiny-{arm}-{stage}-accuracy-seed{seed}"
    folder.mkdir(parents=True)
    card = {"start": start, "before": {"hard": hard_before}, "after": {"hard": hard_after}}
    (folder / "run_card.json").write_text(json.dumps(card))


def _hard(right, paths=None, split=None):
    return {
        "accuracy": sum(right) / len(right),
        "pass_at_k": 1.0,
        "parallel_ratio": 1.0 if paths else 0.0,
        "mean_length": 10.0,
        "mean_sequential_steps": 10.0,
        "greedy": {"accuracy": 0.5},
        "per_problem": {"accuracy": right},
        "mean_paths": paths,
        "split_rate": split,
        "n_blocks": 40 if paths else 0,
    }


def test_the_controls_table_reports_each_seed_its_sft_seed_and_the_widths(tmp_path):
    """Two RL seeds of the unseen arm, each from its own SFT seed: ``per_seed`` names the SFT seed
    read from the start folder, the width columns pool the evaluations, ``sft_widths`` unions the
    SFT cards' row widths; a plain-variant arm gets no width columns."""
    from pr1lib.experiments import controls

    for seed, sft in ((0, "sft"), (1, "sft-s1")):
        start = f"{tmp_path}/unseen/{sft}#abc"
        for stage in ("s2", "s3"):
            before = _hard([0.0, 1.0] * 20, paths=2.0 + 0.5 * seed, split=0.9)
            after = _hard([1.0] * 30 + [0.0] * 10, paths=3.0, split=1.0)
            _stage(tmp_path, "unseen", seed, stage, start, before, after)
            _stage(
                tmp_path,
                "serial",
                seed,
                stage,
                f"{tmp_path}/serial/{sft}#d",
                _hard([0.0] * 40),
                _hard([1.0, 0.0] * 20),
            )
        (tmp_path / "unseen" / sft).mkdir()
        widths = {"blocks": {"2": 5, str(2 + seed): 5}, "plans": {"2": 5, "3": 5}}
        (tmp_path / "unseen" / sft / "run_card.json").write_text(json.dumps({"row_widths": widths}))
    table = controls.controls_table(tmp_path, [0, 1], arms=("unseen", "serial"))
    unseen, serial = table["rows"]
    assert [(s["sft_seed"], s["seed"], s["start"], s["accuracy"]) for s in unseen["per_seed"]] == [
        (0, 0, 0.5, 0.75),
        (1, 1, 0.5, 0.75),
    ]
    assert [(s["paths_per_block"], s["distinct_share_rate"]) for s in unseen["per_seed"]] == [
        (3.0, 1.0),
        (3.0, 1.0),
    ]
    assert all("paths_per_block" not in s for s in serial["per_seed"])
    assert unseen["start_paths_per_block"] == 2.25 and unseen["paths_per_block"] == 3.0
    assert unseen["start_distinct_share_rate"] == 0.9 and unseen["distinct_share_rate"] == 1.0
    assert "paths_per_block" not in serial
    assert table["sft_widths"] == {"blocks": [2, 3], "plans": [2, 3]}
    assert table["contrasts"]["unseen-serial"]["diff"] == pytest.approx(0.25)
    assert "seeds and problems" in table["interval_method"]


def test_the_stage3_only_arms_table_leaves_out_the_folders_that_hold_their_cold_starts(tmp_path):
    """serial-s3 and unseen-s3 train their cold starts in the serial and unseen arms' folders
    (``sft_of``): with no arms named, the table has the two arms that ran RL, their contrast, and
    the widths of the cold starts they share."""
    from pr1lib.experiments import controls

    for arm, owner, right in (
        ("unseen-s3", "unseen", [1.0, 0.0] * 20),
        ("serial-s3", "serial", [1.0] * 40),
    ):
        _stage(tmp_path, arm, 0, "s3", f"{tmp_path}/{owner}/sft#a", _hard([0.0] * 40), _hard(right))
        (tmp_path / owner / "sft").mkdir(parents=True)
        widths = {"plans": {"2": 5, "3": 5}}
        (tmp_path / owner / "sft" / "run_card.json").write_text(json.dumps({"row_widths": widths}))
    table = controls.controls_table(tmp_path, [0])
    assert [r["arm"] for r in table["rows"]] == ["serial-s3", "unseen-s3"]
    assert table["contrasts"]["unseen-s3-serial-s3"]["diff"] == pytest.approx(-0.5)
    assert table["sft_widths"] == {"plans": [2, 3]}

"""Training analytics (curves, trends, Figure 3), the mid-training scaffold, checkpoints,
headline."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from pr1lib.config import EvalConfig
from pr1lib.data.evalsets import load_benchmark
from pr1lib.evaluation import headline
from pr1lib.evaluation.evaluate import ResultsFile, results_path
from pr1lib.experiments import curriculum, midtraining
from pr1lib.notebook import curves, reports
from pr1lib.notebook.tour import build_report
from pr1lib.store.folders import FolderError
from pr1lib.store.paths import REPO_ROOT
from pr1lib.training.dashboard import write_metrics


def _rows(positions, ratios):
    return [
        {"step": i + 1, "block_position": p, "parallel_ratio": r, "accuracy": 0.1 * (i % 3)}
        for i, (p, r) in enumerate(zip(positions, ratios))
    ]


def test_curves_read_the_csv_and_figure3_plots_its_columns(tmp_path):
    rows = _rows([0.1, 0.15, None, 0.4, 0.5, 0.7], [1.0, 0.9, 0.0, 0.6, 0.5, 0.5])
    write_metrics(
        [{k: v for k, v in r.items() if v is not None} for r in rows], tmp_path / "metrics.csv"
    )
    frame = curves.training_curves(tmp_path, label="run-a")
    assert frame["step"].tolist() == [1, 2, 3, 4, 5, 6] and set(frame["run"]) == {"run-a"}
    assert math.isnan(frame["block_position"][2])  # a step without blocks has no position
    fig = curves.figure3(frame)
    by_name = {t.name: t for t in fig.data}
    assert by_name["run-a · parallel ratio"].y.tolist() == [1.0, 0.9, 0.0, 0.6, 0.5, 0.5]
    position = by_name["run-a · first-block position"].y.tolist()
    assert (
        position[:2] == [0.1, 0.15] and math.isnan(position[2]) and position[3:] == [0.4, 0.5, 0.7]
    )
    assert by_name["run-a · first-block position"].yaxis == "y2"  # the second panel


def test_curves_fall_back_to_the_checkpoints_log_history(tmp_path):
    ckpt = tmp_path / "trainer" / "checkpoint-4"
    ckpt.mkdir(parents=True)
    history = [
        {"step": 2, "reward": 0.5, "parallel_ratio": 0.25},
        {"step": 4, "reward": 1.0, "block_position": 0.8},
        {"step": 4, "train_runtime": 9.0},
    ]  # the final summary has no reward: not a row
    (ckpt / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    frame = curves.training_curves(tmp_path)
    assert frame["step"].tolist() == [2, 4] and frame["reward"].tolist() == [0.5, 1.0]
    assert frame["block_position"].tolist()[1] == 0.8


def test_trend_reads_direction_from_the_data():
    steps = list(range(1, 10))
    rising = pd.DataFrame({"step": steps, "x": [0.1, 0.2, 0.15, 0.3, 0.35, 0.3, 0.6, 0.5, 0.7]})
    t = curves.trend(rising, "x")
    assert (
        t["direction"] == "rising"
        and t["early"] == pytest.approx(0.15)
        and t["late"] == pytest.approx(0.6)
    )
    assert curves.trend(rising.assign(x=rising["x"][::-1].values), "x")["direction"] == "falling"
    assert curves.trend(rising.assign(x=0.4), "x")["direction"] == "flat"
    noisy = curves.trend(rising.assign(x=[0.1, 0.5, 0.3, 0.4, 0.2, 0.4, 0.2, 0.6, 0.4]), "x")
    assert noisy["late"] - noisy["early"] == pytest.approx(0.1) and noisy["slope"] > 0
    # a 0.1 rise, but the per-step values scatter by more than that
    assert noisy["direction"] == "flat"
    assert curves.trend(rising.assign(x=None), "x")["direction"] == "too few steps"
    assert "it rises" in curves.describe_trend(t, "position") and "0.15" in curves.describe_trend(
        t, "p"
    )


def test_scaffold_figure_marks_the_switch_and_plots_the_curve():
    curve = [
        {
            "step": s,
            "accuracy": 0.05 * s,
            "parallel_ratio": 1.0 if s <= 3 else 0.4,
            "phase": "alternating" if s <= 3 else "accuracy",
        }
        for s in range(1, 7)
    ]
    held = [
        {"step": 0, "tier": "hard", "accuracy": 0.1, "parallel_ratio": 0.9},
        {"step": 6, "tier": "hard", "accuracy": 0.3, "parallel_ratio": 0.2},
    ]
    result = {"switch_step": 3, "curve": curve, "held_out": held}
    fig = curves.scaffold_figure(result)
    traces = {t.name: t for t in fig.data}
    assert traces["parallel ratio (training samples)"].y.tolist() == [
        r["parallel_ratio"] for r in curve
    ]
    assert traces["accuracy (held-out, T = 1)"].x.tolist() == [0, 6]
    assert [(s.x0, s.x1) for s in fig.layout.shapes] == [(3, 3)]
    effect = curves.switch_effect(result)
    assert effect["parallel_ratio"] == {
        "before": 1.0,
        "after": pytest.approx(0.4),
        "se": pytest.approx(0.0),
    }
    assert effect["accuracy"]["after"] == pytest.approx((0.2 + 0.25 + 0.3) / 3)


def test_step_axes_tick_whole_steps_only():
    """07's Figure 3 and scaffold figure ticked 1.5, 2.5 on a 3-step run."""
    frame = pd.DataFrame(_rows([0.1, 0.2, 0.3], [0.5, 0.6, 0.7])).assign(run="r")
    curve = [{"step": s, "accuracy": 0.1, "parallel_ratio": 0.5, "phase": "x"} for s in (1, 2, 3)]
    held = [{"step": s, "accuracy": 0.1, "parallel_ratio": 0.5, "tier": "hard"} for s in (0, 2, 4)]
    scaffold = curves.scaffold_figure({"switch_step": 2, "curve": curve, "held_out": held})
    for fig in (curves.figure3(frame), scaffold):
        axes = [fig.layout[name] for name in fig.layout if name.startswith("xaxis")]
        assert axes and all(a.dtick == 1 and a.tickformat == "d" for a in axes)


def test_scaffold_refuses_a_switch_outside_the_run():
    with pytest.raises(ValueError, match="switch_step"):
        midtraining.mid_training("smoke", None, switch_step=4, total_steps=4)


def test_find_checkpoints_takes_the_first_folder_with_a_merged_model(tmp_path):
    for folder in (
        "04_sft_lora-tiny/seen/merged",
        "sft-tiny-seen",
        "grpo-unseen-stage2-tiny-seed1/direct/grpo-tiny-unseen-s3-alternating-seed1/merged",
        "06_grpo_training-tiny/stage3",
    ):  # no merged/: not a checkpoint yet
        (tmp_path / folder).mkdir(parents=True)
    found, missing = headline.find_checkpoints("tiny", seed=1, root=tmp_path)
    assert found["sft-seen"] == str(tmp_path / "04_sft_lora-tiny/seen")
    assert found["rl-unseen-s2"].endswith("grpo-tiny-unseen-s3-alternating-seed1")
    assert set(missing) == {"sft-unseen", "grpo-gsm8k", "rl-seen", "rl-unseen-s1"}
    assert str(tmp_path / "06_grpo_training-tiny/stage3") in missing["rl-seen"]
    shipped = {"base": "data/tinyworld-base", "sft-seen": "data/tinyworld-sft"}
    shipped["sft-unseen"] = "data/tinyworld-sft-unseen"
    found, missing = headline.find_checkpoints("tiny", seed=1, root=tmp_path, defaults=shipped)
    assert found["base"] == "data/tinyworld-base"
    assert found["sft-seen"] == str(tmp_path / "04_sft_lora-tiny/seen")  # a run folder first
    assert found["sft-unseen"] == "data/tinyworld-sft-unseen" and "sft-unseen" not in missing


def test_trained_checkpoints_are_labelled_by_what_was_loaded_never_random(tmp_path):
    """The issue: 07's headline and 06's table called TinyWorld's trained checkpoints "smoke
    (random weights)". The label now comes from the files loaded: architecture and size."""
    import shutil

    from pr1lib.config import NotebookConfig
    from pr1lib.worlds import get

    world = get("tinyworld")
    shipped = {k: world.init(v) for k, v in (("base", "plain"), ("sft-seen", "seen"))}
    run = tmp_path / "06_grpo_training-smoke" / "stage3"
    shutil.copytree(REPO_ROOT / "data" / "tinyworld-sft", run / "merged")  # a trained RL run
    found, _ = headline.find_checkpoints("smoke", root=tmp_path, defaults=shipped)
    assert set(found) == {"base", "sft-seen", "rl-seen"}
    smoke = NotebookConfig.for_profile("smoke").model_label
    label = headline.loaded_label(found, smoke)
    assert label == "Qwen3 (0.92M params)" and "random" not in label
    assert (
        headline.headline_table(
            {
                "rl-seen": {
                    "tinyworld-easy": dict(
                        accuracy=0.5, pass_at_k=1.0, parallel_ratio=1.0, n=2, k=2, checker="strict"
                    )
                }
            },
            label,
        )
        .filter(like="ours: Qwen3 (0.92M params)")
        .shape[1]
        == 3
    )
    # smoke's own random model has no folder: only it keeps the profile's label
    assert headline.loaded_label({"base": "random-tiny-qwen3"}, smoke) == smoke


def test_headline_is_written_where_the_tour_reads_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PR1_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv(headline.HEADLINE_ENV, str(tmp_path / "tour"))
    summary = {
        "accuracy": 0.5,
        "pass_at_k": 0.75,
        "parallel_ratio": 0.25,
        "n": 8,
        "k": 4,
        "checker": "strict",
    }
    table = headline.headline_table({"sft-seen": {"tinygsm-hard": summary}}, "tiny")
    assert table.loc["Parallel-SFT-Seen", "ours: tiny | tinygsm-hard mean@4 (strict)"] == 50.0
    assert table.loc["Parallel-SFT-Seen", "paper: Qwen3-4B-Base | Avg"] == 36.0
    paths = headline.write_headline(table, "test")
    assert paths == [
        tmp_path / "runs" / "latest-headline.json",
        tmp_path / "tour" / "headline.json",
    ]
    saved = headline.read_headline(tmp_path / "tour")
    assert saved["rows"][0]["ours: tiny | tinygsm-hard pass@4 (strict)"] == 75.0
    assert "| Parallel-SFT-Seen | 95.6 | 36.0 | 25.0 | 50.0 | 75.0 |" in saved["markdown"]


def test_eval_outputs_write_a_table_and_the_figures(tmp_path):
    write_metrics(
        [{"step": 1, "parallel_ratio": 0.5, "block_position": 0.2}],
        tmp_path / "run" / "metrics.csv",
    )
    result = {
        "model": "stage3",
        "benchmark": "tinygsm-hard",
        "mode": "forked",
        "accuracy": 0.25,
        "pass_at_k": 0.5,
        "parallel_ratio": 0.5,
        "valid_ratio": 1.0,
        "n": 2,
        "k": 2,
        "checker": "strict",
        "pass_curve_strict": {"1": 0.25, "2": 0.5},
        "results": str(tmp_path / "stage3__tinygsm-hard__forked.jsonl"),
    }
    paths = reports.write_eval_outputs(result, tmp_path, run_dir=tmp_path / "run")
    assert "| stage3 | 50.0 | 25.0 | 50.0 |" in open(paths["table"]).read()
    page = open(paths["plots"]).read()
    assert "pass@j" in page and "Figure 3" in page and page.count("<script") >= 2


def test_scaffold_smoke_run_switches_reward_at_the_step(tmp_path):
    result = midtraining.mid_training("smoke", None, switch_step=2, total_steps=4, out=tmp_path)
    assert [(r["step"], r["phase"]) for r in result["curve"]] == [
        (1, "alternating"),
        (2, "alternating"),
        (3, "accuracy"),
        (4, "accuracy"),
    ]
    assert [h["step"] for h in result["held_out"]] == [0, 2, 4]
    cards = [
        json.loads((tmp_path / name / "run_card.json").read_text())
        for name in ("alternating", "accuracy")
    ]
    assert [c["reward"] for c in cards] == ["alternating", "accuracy"]
    assert [c["steps"] for c in cards] == [2, 2] and cards[1]["init"] == str(
        tmp_path / "alternating"
    )
    # cached
    again = midtraining.mid_training("smoke", None, switch_step=2, total_steps=4, out=tmp_path)
    assert again == json.loads(json.dumps(result, default=str))
    (tmp_path / "accuracy" / "marker").write_text("old run")
    with pytest.raises(FolderError, match="holds the scaffold of another config or start"):
        midtraining.mid_training("smoke", None, switch_step=3, total_steps=4, out=tmp_path)
    fresh = midtraining.mid_training(
        "smoke", None, switch_step=3, total_steps=4, out=tmp_path, tiers=(), refresh=True
    )
    # a new config never resumes the old checkpoints: they move aside, kept
    assert not (tmp_path / "accuracy" / "marker").exists()
    assert (tmp_path / "accuracy.prev" / "marker").read_text() == "old run"
    assert [r["phase"] for r in fresh["curve"]] == ["alternating"] * 3 + ["accuracy"] and fresh[
        "held_out"
    ] == []


def test_tour_report_puts_the_headline_on_top(tmp_path):

    summary = {
        "accuracy": 0.5,
        "pass_at_k": 0.75,
        "parallel_ratio": 0.25,
        "n": 8,
        "k": 4,
        "checker": "strict",
    }
    table = headline.headline_table({"base": {"tinygsm-hard": summary}}, "tiny")
    headline.write_headline(table, "Headline (tiny)", folder=tmp_path)
    metrics = dict(summary, greedy={"accuracy": 0.5})
    world = curriculum.world_headline(
        {"before": {"hard": summary | {"greedy": {"accuracy": 0.25}}}, "after": {"hard": metrics}},
        "tiny",
    )
    headline.write_headline(
        world, "TinyWorld (tiny)", folder=tmp_path, name="headline-tinyworld.json"
    )
    headlines = headline.read_headlines(tmp_path)
    assert [h["title"] for h in headlines] == ["Headline (tiny)", "TinyWorld (tiny)"]  # 07 first
    page = build_report([], "tiny", headlines)
    top = page.index("<h2>Headline (tiny)</h2>")
    assert top < page.index("<h2>TinyWorld (tiny)</h2>") < page.index("<th>notebook</th>")
    assert (
        "<td>base model</td><td>0.0</td><td>6.6</td><td>25.0</td><td>50.0</td><td>75.0</td>" in page
    )
    start = "<td>Parallel-SFT-Seen (start)</td><td>50.0</td><td>75.0</td><td>25.0</td><td>25.0</td>"
    assert start in page  # mean@4, pass@4, parallel %, greedy
    assert "Headline" not in build_report([], "tiny")


def test_cached_results_are_reused_only_for_the_same_weights(tmp_path):
    import shutil

    cfg = EvalConfig(benchmark="tinygsm-easy", n=3, k=1)
    path = results_path(tmp_path, "sft-seen", cfg.benchmark, cfg.mode)
    assert not headline._cached(cfg, path)  # nothing there yet
    store = ResultsFile(path)
    for record in load_benchmark(cfg.benchmark, 2):
        store.append({"id": record["id"], "k": 1})
    assert not headline._cached(cfg, path)  # 2 of 3 problems
    store.append({"id": load_benchmark(cfg.benchmark, 3)[2]["id"], "k": 1})
    assert headline._cached(cfg, path)
    # the tag carries the model's content: a copy is the same model, a change is another one
    model = tmp_path / "m" / "merged"
    shutil.copytree(REPO_ROOT / "data" / "tiny-base", model)
    tag = headline.results_tag("sft-seen", str(model.parent))
    assert tag == headline.results_tag("sft-seen", str(REPO_ROOT / "data" / "tiny-base"))
    (model / "config.json").write_text((model / "config.json").read_text() + " ")
    assert headline.results_tag("sft-seen", str(model.parent)) != tag


def test_headline_intervals_and_verdict_read_the_same_problems():
    """A row per scored checkpoint with its interval; RL 0.4 above its SFT on every problem is a
    gap of +40 points beyond noise; a pair with a missing checkpoint is skipped."""

    def scored(accuracies):
        return {
            "accuracy": sum(accuracies) / len(accuracies),
            "pass_at_k": 1.0,
            "parallel_ratio": 0.5,
            "n": len(accuracies),
            "k": 4,
            "per_problem": {"accuracy": accuracies},
        }

    ours = {
        "sft-seen": {"b": scored([0.25, 0.5] * 10)},
        "rl-seen": {"b": scored([0.75, 0.75] * 10)},
    }
    table = headline.headline_intervals(ours, "b")
    assert list(table.index) == ["sft-seen", "rl-seen"] and table.loc["rl-seen", "n"] == 20
    (line,) = headline.headline_verdict(ours, "b")
    assert line.startswith("rl-seen vs sft-seen on b: accuracy +37.5 points (95 % interval +")
    assert line.endswith("higher, beyond the noise")
    assert "no pair" in headline.headline_verdict(ours, "other")[0]


def test_tour_timings_list_the_slowest_cell_first_and_the_report_names_it(tmp_path):
    import nbformat

    from pr1lib.notebook.runner import Executed
    from pr1lib.notebook.tour import tour_timings

    def cell(source, start, end):
        c = nbformat.v4.new_code_cell(source)
        stamp = "2026-01-01T00:00:{:04.1f}Z"
        c.metadata["execution"] = {
            "iopub.execute_input": stamp.format(start),
            "shell.execute_reply": stamp.format(end),
        }
        return c

    nb = nbformat.v4.new_notebook(cells=[cell("load()", 0, 2), cell("train()", 2, 32)])
    run = Executed(tmp_path / "04_sft_lora.ipynb", nb, 33.0)
    timings = tour_timings([run])["04_sft_lora"]
    assert timings["seconds"] == 33.0
    assert [(c["cell"], c["seconds"]) for c in timings["cells"]] == [(2, 30.0), (1, 2.0)]
    assert "slowest cells: cell 2 30 s (train())" in build_report([run], "tiny")


def test_change_table_gives_each_model_its_paired_interval_and_verdict():
    from pr1lib.evaluation.headline import change_table, change_words, paired_change

    base = {"per_problem": {"accuracy": [0.0, 0.25, 0.5, 0.0] * 25, "parallel": [0.0] * 100}}
    better = {"per_problem": {"accuracy": [1.0, 0.75, 1.0, 0.5] * 25, "parallel": [1.0] * 100}}
    same = {"per_problem": {"accuracy": [0.25, 0.0, 0.25, 0.25] * 25, "parallel": [0.0] * 100}}
    rows = change_table({"base": base, "better": better, "same": same}, "base")
    assert [r["model"] for r in rows] == ["better", "same"]  # every model but the reference
    assert rows[0]["accuracy Δ"] == 62.5 and rows[0]["parallel Δ"] == 100.0
    assert rows[0]["accuracy: what this shows"].endswith("higher, beyond the noise")
    assert (
        rows[1]["accuracy Δ"] == 0.0 and "within the noise" in rows[1]["accuracy: what this shows"]
    )
    worse = paired_change(base, better)  # a - b: the sign follows the order
    assert worse["high"] < 0 and "lower, beyond the noise" in change_words("x", worse)

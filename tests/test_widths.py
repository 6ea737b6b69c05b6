"""The width sweep (``study widths``, ``pr1lib.experiments.widths``): its crossovers from known
numbers, the card a smoke run writes, each arm timed in its own decode mode at both batch sizes,
and the inputs it refuses before anything is written."""

from __future__ import annotations

import json

import pytest
from _probes import snapshot

from pr1lib.cli.main import main
from pr1lib.experiments import widths

SMOKE = "random-tiny-qwen3"  # the smoke profile's model: random weights, built in memory


def _arm(steps: float, s1: float, s64: float) -> dict:
    return {"mean_sequential_steps": steps, "seconds_per_answer": {"1": s1, "64": s64}}


def test_crossover_is_the_smallest_width_from_which_unseen_stays_below_serial():
    """Widths are compared as numbers ("10" after "6"), a tie is not a crossing, a dip below at
    a small width that does not last is listed but is not the crossover, and a measure where
    unseen never falls below serial has none."""
    table = {
        "10": {"serial": _arm(150, 0.9, 0.03), "unseen": _arm(50, 0.4, 0.06)},
        "2": {"serial": _arm(40, 0.2, 0.01), "unseen": _arm(45, 0.1, 0.02)},  # a dip at batch 1
        "3": {"serial": _arm(50, 0.25, 0.012), "unseen": _arm(50, 0.25, 0.03)},  # a tie
        "6": {"serial": _arm(90, 0.5, 0.02), "unseen": _arm(48, 0.45, 0.04)},
        "4": {"serial": _arm(60, 0.3, 0.015), "unseen": _arm(47, 0.35, 0.03)},
    }
    cross = widths.crossover(table)
    assert (cross["steps"], cross["seconds_per_answer"]) == (4, {"1": 6, "64": None})
    assert cross["below"] == {
        "steps": [4, 6, 10],
        "seconds_per_answer": {"1": [2, 6, 10], "64": []},
    }
    words = widths.crossover_words(cross, [2, 3, 4, 6, 10])
    assert words == [
        "unseen takes fewer sequential steps than serial from 4 deals on",
        "unseen answers sooner than serial at batch 1 from 6 deals on",
        "unseen never answers sooner than serial at batch 64 (2 to 10 deals)",
    ]
    table["10"]["unseen"]["mean_sequential_steps"] = 200  # above at the widest: no crossover
    cross = widths.crossover(table)
    assert cross["steps"] is None and cross["below"]["steps"] == [4, 6]
    assert widths.crossover_words(cross, [2, 3, 4, 6, 10])[0] == (
        "unseen takes fewer sequential steps than serial at 4, 6 deals, but not at 10 deals"
    )


def test_the_default_models_are_each_arms_last_rl_stage_of_the_controls_study(tmp_path):
    """Stage 3 where it finished, else Stage 2; a stage without its run card is not finished."""
    seed0 = tmp_path / "unseen" / "seed0"
    for stage in ("s2", "s3"):
        (seed0 / f"grpo-tiny-unseen-{stage}-alternating-seed0").mkdir(parents=True)
    (seed0 / "grpo-tiny-unseen-s2-alternating-seed0" / "run_card.json").write_text("{}")
    assert widths.last_stage(tmp_path, "unseen").name.endswith("s2-alternating-seed0")
    (seed0 / "grpo-tiny-unseen-s3-alternating-seed0" / "run_card.json").write_text("{}")
    assert widths.last_stage(tmp_path, "unseen").name.endswith("s3-alternating-seed0")
    assert widths.last_stage(tmp_path, "serial") is None


def test_each_arm_is_timed_in_its_own_mode_and_model_at_batch_1_and_64(monkeypatch):
    """Bug caught: the timer runs another arm's model or decode mode, another batch size than the
    one the seconds are filed under, or other problems. Each call's seconds here encode its model
    and batch; the serial arm decodes one stream, the unseen one forked paths laid out by its
    plan, both on the same 64 problems of the width."""
    from pr1lib.experiments import StudyRun

    code, calls = {"serial-model": 1000.0, "unseen-model": 2000.0}, []

    def fake_answer(model, tok, prompts, cfg, batch):
        calls.append((model, cfg.mode, batch, tuple(prompts)))
        if model == "unseen-model":
            assert (cfg.header_style, cfg.num_paths, cfg.path_headers) == ("plan", 10, True)
        parts = {"seconds": {}, "total": 0.0, "steps": {}, "seconds_per_step": {}}
        return {"seconds": (code[model] + batch) * len(prompts), "texts": [], "breakdown": parts}

    monkeypatch.setattr("pr1lib.evaluation.latency.answer", fake_answer)
    run = StudyRun("smoke", None, [0])
    cfgs = {arm: widths.judge(run, 4, arm, 64) for arm in widths.ARMS}
    loaded = {"serial": ("serial-model", None), "unseen": ("unseen-model", None)}
    out = widths.seconds(loaded, cfgs, 64, 2)
    assert out["median"] == {
        "1": {"serial": 1001.0, "unseen": 2001.0},
        "64": {"serial": 1064.0, "unseen": 2064.0},
    }
    modes = {(model, mode) for model, mode, _, _ in calls}
    assert modes == {("serial-model", "seen"), ("unseen-model", "forked")}
    assert len(calls) == 2 * 2 * 2 and len({c[3] for c in calls}) == 1  # the same problems
    assert len(calls[0][3]) == 64 and cfgs["unseen"].benchmark == "planworld-w4"


def test_each_arm_is_evaluated_with_its_own_model_mode_and_width(monkeypatch):
    """Bug caught: an arm scored with the other's model or decode mode, or on another width's
    problems. Each fake evaluation's accuracy encodes its model and width; the rows must file
    them where they came from, with the interval over problems around them."""
    from pr1lib.experiments import StudyRun

    def fake_stage(model, tok, cfg):
        width = int(cfg.benchmark.removeprefix("planworld-w").replace("planworld-hard", "10"))
        acc = {"S": 0.1, "U": 0.5}[model] + width / 100
        assert cfg.mode == {"S": "seen", "U": "forked"}[model] and (cfg.n, cfg.k) == (3, 2)
        metrics = {"accuracy": acc, "mean_sequential_steps": 10.0 * width, "n": 3, "k": 2}
        metrics["per_problem"] = {"accuracy": [acc] * 3}
        return {**metrics, "greedy": {"accuracy": acc}}, []

    monkeypatch.setattr("pr1lib.evaluation.evaluate.evaluate_stage", fake_stage)
    monkeypatch.setattr(widths, "load_for_eval", lambda path, profile, say: (path, None))
    arms = {"serial": 1.0, "unseen": 0.5}
    monkeypatch.setattr(
        widths, "seconds", lambda *a: {"median": {"1": arms}, "spread": {"1": arms}}
    )
    run = StudyRun("smoke", None, [0], options={"n": 3, "k": 2})
    table = widths.sweep(run, {"serial": "S", "unseen": "U"}, [2, 10])
    assert {w: (r["serial"]["accuracy"], r["unseen"]["accuracy"]) for w, r in table.items()} == {
        "2": (0.12, 0.52),
        "10": (0.2, 0.6),
    }
    assert table["10"]["unseen"]["tier"] == "planworld-hard"
    assert table["2"]["serial"]["interval"] == {"low": 0.12, "high": 0.12}
    assert table["2"]["unseen"]["seconds_per_answer"] == {"1": 0.5}


def test_a_smoke_sweep_writes_a_card_with_the_keys_other_checks_read(tmp_path, monkeypatch, capsys):
    """Two widths, random models, a few short samples: the card's ``numbers`` carry ``widths``
    (per width, per arm: accuracy, interval, greedy, steps, paths, seconds at both batch sizes)
    and ``crossover``."""
    from pr1lib.store import cards

    monkeypatch.setattr(cards, "RESULTS", tmp_path / "results")
    argv = ["study", "widths", "--profile", "smoke", "--unseen", SMOKE, "--serial", SMOKE]
    argv += ["--widths", "4", "2", "--n", "2", "--k", "1", "--timed", "2", "--repeats", "1"]
    argv += ["--set", "max_completion_length=12", "--set", "max_path_length=6"]
    assert main([*argv, "--card", "widths-smoke"]) == 0
    numbers = json.loads((tmp_path / "results" / "widths-smoke.json").read_text())["numbers"]
    assert sorted(numbers["widths"], key=int) == ["2", "4"]
    keys = {"accuracy", "interval", "greedy", "mean_sequential_steps", "mean_paths"}
    for width, row in numbers["widths"].items():
        assert set(row) == {"serial", "unseen"}
        for arm in row.values():
            assert keys <= set(arm) and set(arm["seconds_per_answer"]) == {"1", "2"}
            assert arm["tier"] == f"planworld-w{width}" and arm["n"] == 2
    assert set(numbers["crossover"]) == {"steps", "seconds_per_answer", "below"}
    assert numbers["models"] == {"serial": SMOKE, "unseen": SMOKE}
    assert (numbers["timed"], numbers["repeats"], numbers["threads"]) == (2, 1, 1)


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--widths", "5"], "invalid choice: 5"),
        (["--unseen", "/no/such/model"], "model folder /no/such/model does not exist"),
        (["--serial", SMOKE], "no finished RL stage of arm 'unseen'"),
        ([], "no finished RL stage of arm 'serial'"),
        (["--world", "tinyworld"], "study widths sweeps planworld's widths"),
        (["--seeds", "0", "1"], "study widths takes one seed"),
    ],
)
def test_bad_input_is_one_line_before_anything_is_written(
    argv, needle, tmp_path, monkeypatch, capsys
):
    """An unknown width, a missing model (given, or the controls study's arm not yet run), another
    world, several seeds: exit 2, one line naming it, no card and nothing under the runs."""
    from pr1lib.store import cards

    monkeypatch.setattr(cards, "RESULTS", tmp_path / "results")
    monkeypatch.setenv("PR1_RUNS_DIR", str(tmp_path / "runs"))
    before = snapshot(tmp_path)
    try:
        code = main(["study", "widths", "--profile", "smoke", *argv, "--card", "w"])
    except SystemExit as stop:  # argparse refuses the value itself
        code = stop.code
    out = capsys.readouterr()
    lines = [line for line in (out.out + out.err).splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and needle in lines[0], lines
    assert snapshot(tmp_path) == before


def test_a_model_trained_with_hidden_plans_is_swept_and_split_with_them(tmp_path, monkeypatch):
    """Bug caught: the width sweep and the controls study's split measure decoded an unseen model
    trained with hidden plans with its plans in view, a context its paths never saw in training;
    the serial model, which reads every token, is decoded as it is."""
    import json

    from pr1lib.experiments import StudyRun, split

    hidden = tmp_path / "hidden"
    hidden.mkdir()
    saved = {"type": "GRPOStageConfig", "variant": "unseen", "hide_plan": True}
    (hidden / "config.json").write_text(json.dumps(saved))
    seen = {}

    def fake_stage(model, tok, cfg):
        seen[model] = cfg.hide_plan
        metrics = {"accuracy": 0.5, "mean_sequential_steps": 1.0, "n": 1, "k": 1}
        return {**metrics, "per_problem": {"accuracy": [0.5]}, "greedy": {"accuracy": 0.5}}, []

    monkeypatch.setattr("pr1lib.evaluation.evaluate.evaluate_stage", fake_stage)
    monkeypatch.setattr(widths, "load_for_eval", lambda path, profile, say: (path, None))
    one = {"serial": 1.0, "unseen": 1.0}
    monkeypatch.setattr(widths, "seconds", lambda *a: {"median": {"1": one}, "spread": {"1": one}})
    run = StudyRun("smoke", None, [0], options={"n": 1, "k": 1})
    widths.sweep(run, {"serial": "S", "unseen": str(hidden)}, [2])
    assert (seen["S"], seen[str(hidden)]) == (False, True)

    layouts = []
    monkeypatch.setattr(split, "forced_split", lambda *a, **layout: layouts.append(layout) or {})
    monkeypatch.setattr(
        "pr1lib.evaluation.evaluate.load_for_eval", lambda model, profile, say: (None, None)
    )
    split.measure_split("smoke", "planworld", "unseen", str(hidden), tmp_path / "u", n=2)
    split.measure_split("smoke", "planworld", "plain", str(hidden), tmp_path / "p", n=2)
    assert [x.get("hide_plan", False) for x in layouts] == [True, True, False, False]

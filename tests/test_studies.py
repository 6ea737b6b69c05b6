"""Multi-run studies on the smoke profile, with the expensive runs faked where only the
plumbing is under test: the reward ablation's table and cache, the curriculum's reuse of finished
stages, the unseen Stage-2 study's cache, sampled accuracy kept beside the model, and run
folders claimed only by the run that began them."""

from __future__ import annotations

import json

import pytest

from pr1lib.cli.main import main
from pr1lib.experiments import ablation, curriculum, unseen_stage2
from pr1lib.experiments.ablation import ARMS, ablation_table, table4_verdict
from pr1lib.experiments.curriculum import seeds_summary
from pr1lib.store.folders import FolderError
from pr1lib.training.runs import claim_run_dir, start_id


@pytest.mark.slow
def test_cli_prints_the_ablation_table_and_reuses_its_cache(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PR1_RUNS_DIR", str(tmp_path / "runs"))
    argv = ["grpo", "--profile", "smoke", "--out", str(tmp_path / "abl"), "--set", "max_steps=1"]
    assert main(argv) == 0
    first = capsys.readouterr().out.strip().splitlines()
    result = json.loads(first[-1])
    assert [r["arm"] for r in result["ablation"]] == list(ARMS)
    assert any(line.startswith("arm") and "paper_parallel_ratio_%" in line for line in first)
    assert result["variant"] == "unseen"  # Table 4 is the unseen variant's ablation
    cached = ablation.load_ablation("smoke", out=tmp_path / "abl")
    assert {tuple(r["before"]) + tuple(r["after"]) for r in cached} == {("hard", "hard")}
    monkeypatch.setattr(
        ablation, "run_grpo", lambda *a, **k: pytest.fail("the cached ablation was retrained")
    )
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == result
    # plain `grpo --profile P`: prints the cached table whatever its config
    assert main(argv[:5]) == 0
    out = capsys.readouterr().out
    assert (
        "cached results" in out
        and json.loads(out.strip().splitlines()[-1])["ablation"] == result["ablation"]
    )


def test_unseen_stage2_effect_reuses_its_cache_only_for_the_same_start_and_overrides(
    tmp_path, monkeypatch
):
    calls = []

    def fake_curriculum(
        profile, variant, init, seed, out, keep_stage2=False, overwrite=False, **overrides
    ):
        calls.append((str(init), keep_stage2, overrides))
        stage = {"stage": 3, "reward": "accuracy", "steps": 1, "after": {}, "train": {}}
        return {
            "stages": [stage],
            "sft": {"hard": {"accuracy": 0.1}},
            "final": {"hard": {"accuracy": 0.2}},
        }

    monkeypatch.setattr(unseen_stage2, "run_curriculum", fake_curriculum)
    first = unseen_stage2.unseen_stage2_effect("smoke", "runs/a", out=tmp_path, max_steps=2)
    assert unseen_stage2.unseen_stage2_effect("smoke", "runs/a", out=tmp_path, max_steps=2) == first
    assert len(calls) == 2
    # another start: rerun
    unseen_stage2.unseen_stage2_effect("smoke", "runs/b", out=tmp_path, max_steps=2)
    unseen_stage2.unseen_stage2_effect("smoke", "runs/b", out=tmp_path, max_steps=3)  # other sets
    assert [c[0] for c in calls] == ["runs/a", "runs/a", "runs/b", "runs/b", "runs/b", "runs/b"]
    assert [c[1] for c in calls[:2]] == [False, True] and calls[-1][2] == {"max_steps": 3}


def test_cli_runs_the_unseen_stage2_study_at_notebook_size_and_cards_its_rows(
    tmp_path, capsys, monkeypatch
):
    """``grpo --unseen-stage2 --notebook`` hands notebook 06's sizes to every stage it trains, and
    the card it writes is what the notebook's cell finds with ``results.committed``."""
    from pr1lib.config import GRPOStageConfig
    from pr1lib.store import cards as results

    seen_cfgs = []
    metrics = {
        t: {"accuracy": 0.5, "parallel_ratio": 0.5, "greedy": {"accuracy": 0.5}}
        for t in ("easy", "hard")
    }

    def fake_curriculum(
        profile, variant, init, seed, out, keep_stage2=False, overwrite=False, **overrides
    ):
        seen_cfgs.append(GRPOStageConfig.for_stage(3, profile, variant=variant, **overrides))
        return {"stages": [], "sft": metrics, "final": metrics}

    monkeypatch.setattr(unseen_stage2, "run_curriculum", fake_curriculum)
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    argv = [
        "grpo",
        "--profile",
        "tiny",
        "--unseen-stage2",
        "--notebook",
        "--out",
        str(tmp_path / "u"),
        "--card",
        "u-study",
    ]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [r["recipe"] for r in out["rows"]] == list(unseen_stage2.ARMS.values())
    assert {c.per_device_train_batch_size for c in seen_cfgs} == {32}  # the notebook's size
    assert {c.max_steps for c in seen_cfgs} == {30}
    assert results.committed("u-study", profile="tiny", seed=0)["numbers"] == out
    assert results.committed("u-study", profile="tiny", seed=1) is None  # another seed: rerun


def test_curriculum_reuses_a_finished_stage_only_with_the_same_config_and_start(
    tmp_path, monkeypatch, capsys
):
    """A rerun (e.g. `--seeds 0 1 2` after seed 0 ran alone) neither retrains nor re-evaluates a
    stage whose run card matches; another start or config trains it again."""
    calls = []

    def fake_run(cfg, init, out, before=None, preflight=True, overwrite=False):
        calls.append((cfg.stage, str(init)))
        (out / "merged").mkdir(parents=True, exist_ok=True)
        # new weights, new stamp
        (out / "merged" / "model.safetensors").write_text(f"trained from {init}")
        result = {
            "stage": cfg.stage,
            "init": str(init),
            "start": start_id(init),
            "steps": cfg.max_steps,
            "run_dir": str(out),
            "before": before or {"hard": {"accuracy": 0.1}},
            "after": {"hard": {"accuracy": 0.2}},
        }
        (out / "run_card.json").write_text(
            json.dumps({**result, "config": cfg.to_dict()}, default=str)
        )
        return type("Run", (), {"result": result, "run_dir": out})()

    monkeypatch.setattr(curriculum, "run_grpo", fake_run)
    first = curriculum.run_curriculum("smoke", "seen", "runs/a", 0, tmp_path)
    assert [c[0] for c in calls] == [2, 3]
    monkeypatch.setenv("PR1_RUNS_DIR", str(tmp_path))
    capsys.readouterr()
    again = curriculum.run_curriculum("smoke", "seen", "runs/a", 0, tmp_path)
    assert len(calls) == 2 and again["final"] == first["final"]  # both stages reused
    said = capsys.readouterr().out  # a notebook shows it: paths as the repository names them
    assert "reusing the finished run $PR1_RUNS_DIR/" in said and str(tmp_path) not in said
    # another start: Stage 2 retrains, so Stage 3 too
    curriculum.run_curriculum("smoke", "seen", "runs/b", 0, tmp_path)
    assert [c[0] for c in calls[2:]] == [2, 3]
    curriculum.run_curriculum("smoke", "seen", "runs/b", 0, tmp_path, max_steps=2)  # another config
    assert [c[0] for c in calls[4:]] == [2, 3]


def test_a_run_folder_begun_from_another_start_is_refused_or_moved_aside(tmp_path):
    start = tmp_path / "sft"
    (start / "merged").mkdir(parents=True)
    (start / "merged" / "model.safetensors").write_bytes(b"v1")
    run = tmp_path / "run"
    claim_run_dir(run, start)
    (run / "trainer" / "checkpoint-2").mkdir(parents=True)
    claim_run_dir(run, start)  # the same start: a resume keeps the checkpoint
    assert (run / "trainer" / "checkpoint-2").is_dir() and not (tmp_path / "run.prev").exists()
    before = start_id(start)
    (start / "merged" / "model.safetensors").write_bytes(b"v2, retrained in place")
    assert start_id(start) != before
    with pytest.raises(FolderError, match="holds a run begun from another start"):
        claim_run_dir(run, start)  # same path, other weights: never continued, never lost
    assert (run / "trainer" / "checkpoint-2").is_dir() and not (tmp_path / "run.prev").exists()
    (tmp_path / "run.prev").mkdir()  # a user's own folder there: kept, the run goes to .prev-2
    claim_run_dir(run, start, overwrite=True)
    assert (tmp_path / "run.prev-2" / "trainer" / "checkpoint-2").is_dir() and not (
        run / "trainer"
    ).exists()
    assert (tmp_path / "run.prev").is_dir()
    legacy = tmp_path / "legacy"
    (legacy / "trainer" / "checkpoint-5").mkdir(parents=True)  # checkpoints without a start mark
    with pytest.raises(FolderError, match="unknown start"):
        claim_run_dir(legacy, start)
    claim_run_dir(legacy, start, overwrite=True)
    assert (tmp_path / "legacy.prev" / "trainer" / "checkpoint-5").is_dir()


def test_seeds_summary_reports_protocol_and_greedy_gains():
    def run(sft, final, g_sft, g_final):
        def at(a, g):
            return {"hard": {"accuracy": a, "greedy": {"accuracy": g}}}

        return {"sft": at(sft, g_sft), "final": at(final, g_final)}

    out = seeds_summary([run(0.06, 0.09, 0.2, 0.19), run(0.06, 0.08, 0.2, 0.18)])
    assert out["improved_seeds"] == 2 and out["gain_mean"] == pytest.approx(0.025)
    assert out["greedy"]["improved_seeds"] == 0
    assert out["greedy"]["gain_mean"] == pytest.approx(-0.015)


def _arm(arm, ratios, accuracy=0.5):
    """An ablation result whose held-out parallel share per problem is ``ratios``."""
    after = {
        "parallel_ratio": sum(ratios) / len(ratios),
        "accuracy": accuracy,
        "greedy": {"parallel_ratio": 0.0, "accuracy": accuracy},
        "per_problem": {"parallel": list(ratios), "accuracy": [accuracy] * len(ratios)},
    }
    return {
        "arm": arm,
        "reward": ARMS[arm],
        "steps": 5,
        "data": "tinygsm-hard",
        "before": {"hard": after},
        "after": {"hard": after},
        "train": {"parallel_ratio": 0.5},
    }


def test_ablation_table_puts_each_arm_beside_the_papers_row():
    rows = ablation_table([_arm(a, [0.5] * 4) for a in ARMS])
    assert [r["arm"] for r in rows] == list(ARMS)
    assert [r["paper_parallel_ratio_%"] for r in rows] == [13.6, 63.0, 80.3, None]
    assert rows[2]["reward"] == "tiered" and rows[0]["greedy_parallel_ratio_%"] == 0.0


def test_table4_verdict_needs_gaps_beyond_the_bootstrap_interval():
    spread = [0.0, 0.1, 0.2, 0.1, 0.0, 0.1, 0.2, 0.1] * 5  # 40 problems
    clear = [
        _arm("accuracy", spread),
        _arm("alternating", [r + 0.4 for r in spread]),
        _arm("parallel", [r + 0.7 for r in spread], accuracy=0.4),
    ]
    verdict = table4_verdict(clear)
    assert verdict["reproduced"] is True and verdict["gaps"]["accuracy<alternating"]["low"] > 0
    noisy = [_arm("accuracy", spread), _arm("alternating", spread[::-1]), clear[2]]
    assert table4_verdict(noisy)["order_beyond_noise"] is False  # 3.0 % < 3.6 % is not an order
    costly = [clear[0], _arm("alternating", [r + 0.4 for r in spread], accuracy=0.3), clear[2]]
    assert table4_verdict(costly)["alternating_accuracy_at_least_parallel"] is False
    assert table4_verdict(clear[:2])["reproduced"] is None  # an arm missing: no verdict


def test_table4_verdict_is_given_under_both_readings_of_parallel_only():
    """The tiered arm as "parallel only" is an assumption: with a structure arm whose blocks do
    not rise above alternating's, the other reading's verdict differs and both are reported."""
    spread = [0.0, 0.1, 0.2, 0.1, 0.0, 0.1, 0.2, 0.1] * 5
    arms = [
        _arm("accuracy", spread),
        _arm("alternating", [r + 0.4 for r in spread]),
        _arm("parallel", [r + 0.7 for r in spread], accuracy=0.4),
        _arm("structure", [r + 0.4 for r in spread[::-1]], accuracy=0.4),
    ]
    readings = table4_verdict(arms)["readings"]
    assert readings == {"tiered (assumed)": True, "structure (format only)": False}
    assert set(table4_verdict(arms[:3])["readings"]) == {"tiered (assumed)"}


def test_dose_response_runs_one_arm_per_dose_and_bonus(tmp_path):
    """Two arms in smoke from the shipped TinyWorld SFT: one row each, with the arm's knobs and
    the held-out easy tier's numbers; the runs' configs carry the dose and the bonus."""
    import json

    from pr1lib.experiments.dose import dose_response

    rows = dose_response("smoke", seed=0, out=tmp_path, arms=[(0, 0.2), (10, 0.5)])
    assert [(r["tiered_steps"], r["bonus"]) for r in rows] == [(0, 0.2), (10, 0.5)]
    assert all(0 <= r["parallel_ratio"] <= 1 and 0 <= r["accuracy"] <= 1 for r in rows)
    cfg = json.loads((tmp_path / "tiered10-b0.5" / "config.json").read_text())
    assert (cfg["reward"], cfg["parallel_steps"], cfg["tiered_bonus"]) == ("alternating", 10, 0.5)
    assert cfg["data"] == "tinyworld-easy"


def test_controls_arms_share_problems_and_steps_and_the_table_compares_them(tmp_path, monkeypatch):
    """Two arms of the parallel-vs-serial study on the smoke profile: the serial arm trains its own
    cold start (the world's SFT with the tags taken out) and plain RL; the seen arm starts from the
    shipped SFT. Both run Stage 2 then Stage 3, the table pairs them problem by problem."""
    from pr1lib.experiments import controls
    from pr1lib.notebook.reports import controls_bars, controls_figure, controls_frame

    monkeypatch.setenv("PR1_RUNS_DIR", str(tmp_path / "runs"))
    serial = controls.run_arm("smoke", "tinyworld", "serial", [0], out=tmp_path)
    seen = controls.run_arm("smoke", "tinyworld", "seen", [0], out=tmp_path)
    assert serial["start"] == str(tmp_path / "serial" / "sft") and seen["start"].endswith("sft")
    sft_card = json.loads((tmp_path / "serial" / "sft" / "run_card.json").read_text())
    assert sft_card["config"]["trace_style"] == "serial"
    _assert_trained_as_recorded(tmp_path, "serial", "plain")
    stages = sorted(p.name for p in (tmp_path / "serial" / "seed0").iterdir())
    assert [s.split("-")[2:5] for s in stages] == [["plain", "s2", "accuracy"]] + [
        ["plain", "s3", "accuracy"]
    ]
    table = controls.controls_table(tmp_path, [0], arms=("seen", "serial"))
    assert [r["arm"] for r in table["rows"]] == ["seen", "serial"]
    contrast = table["contrasts"]["seen-serial"]
    assert contrast["low"] <= contrast["diff"] <= contrast["high"]
    assert all(r["mean_sequential_steps"] <= r["mean_length"] for r in table["rows"])
    for row in table["rows"]:  # the mean over problems is the seeds' mean, inside its interval
        assert row["interval"]["mean"] == pytest.approx(row["accuracy"], abs=1e-3)
        assert row["interval"]["low"] <= row["accuracy"] <= row["interval"]["high"]
        assert 0 <= row["start"] <= 1
    figure = controls_figure(table)
    assert [t.name for t in figure.data] == ["seen", "serial"]
    assert controls.verdict(table)[0].startswith("seen vs serial: accuracy ")
    bars = controls_bars(table)
    assert list(bars.data[1].y) == [r["accuracy"] for r in table["rows"]]
    assert list(controls_frame(table)["arm"]) == ["seen", "serial"]
    with pytest.raises(ValueError, match="study controls --arm plain --seeds 0"):
        controls.controls_table(tmp_path, [0], arms=("plain",))


def _assert_trained_as_recorded(root, arm: str, variant: str, world: str = "tinyworld") -> None:
    """What an arm trained, read from what it wrote rather than from its config: its SFT rows (a
    serial arm's carry no tag, yet hold the search), the weights its SFT started from (the world's
    base, by content hash) and those each RL stage started from (the stage before, the first one
    the arm's own SFT)."""
    from pr1lib import worlds
    from pr1lib.data.sftdata import load_rows
    from pr1lib.format.grammar import TAG_RE
    from pr1lib.training.runs import start_id

    sft = root / arm / "sft"
    rows = load_rows(sft)
    assert rows and not any(TAG_RE.search(r["completion"]) for r in rows)
    assert any(r["completion"].count("check:") > 1 for r in rows)  # searches, not only guesses
    card = json.loads((sft / "run_card.json").read_text())
    assert card["start"] == start_id(worlds.get(world).init("plain"))
    start = sft
    for stage in sorted((root / arm / "seed0").glob(f"grpo-*-{variant}-s*")):
        assert json.loads((stage / "run_card.json").read_text())["start"] == start_id(start)
        start = stage


def test_a_contrast_keeps_its_sign_on_data_where_it_is_known(tmp_path):
    """The table's contrast ``a-b`` is a minus b: arm ``seen`` right on every problem, ``serial``
    on half of them, gives +0.5 with an interval above zero (and the reverse order would not)."""
    from pr1lib.experiments import controls

    for arm, right in (("seen", [1.0] * 40), ("serial", [1.0, 0.0] * 20)):
        for stage, when in (("s2", "before"), ("s3", "after")):
            folder = tmp_path / arm / "seed0" / f"grpo-tiny-x-{stage}-accuracy-seed0"
            folder.mkdir(parents=True)
            hard = {
                "accuracy": sum(right) / len(right),
                "pass_at_k": 1.0,
                "parallel_ratio": 0.0,
                "mean_length": 10.0,
                "mean_sequential_steps": 10.0,
                "greedy": {"accuracy": 0.5},
                "per_problem": {"accuracy": right},
            }
            card = {"before": {"hard": hard}, "after": {"hard": hard}}
            (folder / "run_card.json").write_text(json.dumps(card))
    table = controls.controls_table(tmp_path, [0], arms=("seen", "serial"))
    contrast = table["contrasts"]["seen-serial"]
    assert contrast["diff"] == pytest.approx(0.5) and contrast["low"] > 0


def test_the_command_line_offers_exactly_the_control_arms():
    from pr1lib.cli.parser import STUDY_FLAGS
    from pr1lib.experiments.controls import ARMS

    assert sorted(STUDY_FLAGS["arm"][1]["choices"]) == sorted([*ARMS, "all", "switch"])


def test_the_controls_card_sums_each_arms_wall_time_over_resumed_runs_and_pools_split_rates(
    tmp_path,
):
    """An arm interrupted and resumed counts both runs' seconds; the table pools the forced split
    rates of an arm's RL ends (and of its SFTs) by their block counts."""
    from pr1lib.experiments import add_wall, controls, wall_times

    (tmp_path / "unseen").mkdir()
    add_wall(tmp_path / "unseen", 100.0)
    add_wall(tmp_path / "unseen", 50.5)
    (tmp_path / "unseen" / "sft").mkdir()
    (tmp_path / "unseen" / "sft" / "run_card.json").write_text(json.dumps({"seconds": 30.0}))
    (tmp_path / "unseen" / "seed0" / "s3").mkdir(parents=True)
    (tmp_path / "unseen" / "seed0" / "s3" / "run_card.json").write_text('{"seconds": 12.5}')
    assert wall_times(tmp_path, ["unseen", "plain"]) == {
        "unseen": 150.5,
        "plain": None,
        "total": 150.5,
        "runs": {"unseen": 42.5, "plain": 0.0, "total": 42.5},
    }
    kept = {
        str(tmp_path / "unseen" / "sft"): {"split_rate": 0.9, "n_blocks": 100},
        str(tmp_path / "unseen" / "seed0" / "x"): {"split_rate": 1.0, "n_blocks": 100},
        str(tmp_path / "unseen" / "seed1" / "x"): {"split_rate": 0.5, "n_blocks": 300},
    }
    (tmp_path / "unseen" / "splits.json").write_text(json.dumps(kept))
    columns = controls.split_columns(tmp_path / "unseen", tmp_path / "unseen")
    assert columns == {
        "split_rate": 0.625,
        "n_blocks": 400,
        "split_rate_sft": 0.9,
        "n_blocks_sft": 100,
        "splits": {
            "seed0": {"t1": 1.0, "greedy": None, "accuracy": None},
            "seed1": {"t1": 0.5, "greedy": None, "accuracy": None},
        },
        "splits_sft": {"sft": {"t1": 0.9, "greedy": None, "accuracy": None}},
    }


def test_a_kept_split_is_reused_only_for_the_same_rollout_mode(tmp_path):
    """splits.json keeps one forced split per model: reused for the same number of blocks and
    the mode the variant samples with, measured again (here: the model is loaded) otherwise."""
    from pr1lib.experiments import controls

    model = str(tmp_path / "no-such-model")
    kept = {"model": model, "n_asked": 5, "mode": "forked", "split_rate": 0.8}
    (tmp_path / "splits.json").write_text(json.dumps({model: kept}))
    assert controls.measure_split("tiny", "wideworld", "unseen", model, tmp_path, n=5) == kept
    with pytest.raises(Exception):  # seen samples as one stream: not this entry, so it loads
        controls.measure_split("tiny", "wideworld", "seen", model, tmp_path, n=5)


def test_the_verdict_names_both_arms_of_a_contrast_whose_arm_has_a_hyphen():
    """``unseen-s3-serial`` is unseen-s3 against serial, not unseen against s3-serial."""
    from pr1lib.experiments import controls

    table = {"rows": [], "contrasts": {"unseen-s3-serial": {"diff": 0.1, "low": 0.05, "high": 0.2}}}
    assert controls.verdict(table)[0].startswith("unseen-s3 vs serial: accuracy +10.0 points")

"""The controls arms that go on from another arm's RL (PlanWorld's grader switch, docs/planworld.md,
regime 13): which weights each run starts from, with which config, and what the table reads as
the arm's start and end. Each test names the bug it would catch."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from _probes import run_cli

from pr1lib.config import GRPOStageConfig
from pr1lib.experiments import controls, curriculum

WORLD = "planworld"


def _run_arm(tmp_path, monkeypatch, arm: str) -> tuple[list[dict], dict]:
    """``run_arm`` of ``arm`` for seed 0 with training faked: each run's config, start and folder,
    and the arm's result. Every run scores a different accuracy (0.1, 0.2, ...) after training."""
    trained: list[dict] = []

    def fake_grpo(cfg, init, out, before=None, **kw):
        trained.append({"cfg": cfg, "init": str(init), "out": str(out)})
        after = {"hard": {"accuracy": len(trained) / 10}}
        return SimpleNamespace(
            result={
                "before": before or {"hard": {"accuracy": 0.0}},
                "after": after,
                "run_dir": str(out),
            }
        )

    monkeypatch.setattr(curriculum, "run_grpo", fake_grpo)
    monkeypatch.setattr(curriculum, "finished_run", lambda *a: None)
    monkeypatch.setattr(curriculum, "follow_hidden_plans", lambda cfg, init: cfg)
    monkeypatch.setattr(controls, "cold_start", lambda *a: "cold")
    monkeypatch.setattr(controls, "arm_splits", lambda *a: None)
    return trained, controls.run_arm("smoke", WORLD, arm, [0], out=tmp_path)


@pytest.mark.parametrize(
    "arm, variant, grader",
    [
        ("unseen-s3-honest", "unseen", "honest"),
        ("unseen-s3-checked", "unseen", "checked"),
        ("serial-s3-honest", "plain", "honest"),
    ],
)
def test_an_arm_that_goes_on_trains_from_the_end_of_the_arm_it_names(
    tmp_path, monkeypatch, arm, variant, grader
):
    """Bug: the second run starts from the cold start (or another arm's end), takes the first
    run's grader or learning rate, or writes into the first arm's folder; the arm's start is then
    the first run's end, not its cold start."""
    spec = controls.ARMS[arm]
    trained, result = _run_arm(tmp_path, monkeypatch, arm)
    first, last = trained
    steps = [GRPOStageConfig.for_stage(s, "smoke", variant=variant, world=WORLD) for s in (2, 3)]
    assert first["init"] == "cold" and first["cfg"].stage == 3
    assert first["cfg"].max_steps == sum(c.max_steps for c in steps)
    assert (
        first["cfg"].grader == steps[1].grader
        and first["cfg"].learning_rate == steps[1].learning_rate
    )
    assert first["out"].startswith(str(tmp_path / spec.rl_of / "seed0"))
    assert last["init"] == first["out"] and last["out"].startswith(str(tmp_path / arm / "seed0"))
    assert (last["cfg"].stage, last["cfg"].variant, last["cfg"].grader) == (3, variant, grader)
    assert (last["cfg"].learning_rate, last["cfg"].max_steps) == (5e-5, 150)
    assert result["runs"][0]["start"]["accuracy"] == 0.0  # the cold start, not the first run's end
    assert result["runs"][0]["end"]["accuracy"] == 0.2  # the second run's


def test_the_honest_steps_and_their_checked_control_differ_in_the_grader_only():
    """Bug: the control gets another learning rate or step count than the arm it controls for."""
    honest, checked = (controls.ARMS[a] for a in ("unseen-s3-honest", "unseen-s3-checked"))
    assert {k for k in honest.then if honest.then[k] != checked.then.get(k)} == {"grader"}
    assert (honest.rl_of, honest.variant) == (checked.rl_of, checked.variant)
    assert controls.ARMS["serial-s3-honest"].then == honest.then
    assert not set(controls.ALL) & {"unseen-s3-honest", "unseen-s3-checked", "serial-s3-honest"}


def _card(root, arm: str, before: float, after: float, start: str) -> None:
    folder = root / arm / "seed0" / f"grpo-tiny-{arm}-s3-alternating-seed0"
    folder.mkdir(parents=True)
    hard = {
        k: {
            "accuracy": v,
            "pass_at_k": 1.0,
            "parallel_ratio": 1.0,
            "mean_length": 10.0,
            "mean_sequential_steps": 10.0,
            "greedy": {"accuracy": v},
            "per_problem": {"accuracy": [1.0] * int(40 * v) + [0.0] * (40 - int(40 * v))},
        }
        for k, v in (("before", before), ("after", after))
    }
    card = {"start": start, "before": {"hard": hard["before"]}, "after": {"hard": hard["after"]}}
    (folder / "run_card.json").write_text(json.dumps(card))


def test_the_table_reads_a_going_on_arms_start_from_its_cold_start(tmp_path):
    """Bug: the table reads the second run's ``before`` (the first run's end) as the arm's start,
    which hides what both runs together gained; the contrast against the serial arm that went on
    the same way is drawn."""
    _card(tmp_path, "unseen-s3", 0.25, 0.5, f"{tmp_path}/unseen/sft-s2#a")
    _card(tmp_path, "unseen-s3-honest", 0.5, 0.75, f"{tmp_path}/unseen-s3/seed0/grpo#b")
    _card(tmp_path, "serial-s3", 0.0, 0.5, f"{tmp_path}/serial/sft#c")
    _card(tmp_path, "serial-s3-honest", 0.5, 0.5, f"{tmp_path}/serial-s3/seed0/grpo#d")
    table = controls.controls_table(tmp_path, [0])
    rows = {r["arm"]: r for r in table["rows"]}
    honest = rows["unseen-s3-honest"]
    assert (honest["start"], honest["accuracy"]) == (0.25, 0.75)
    assert honest["per_seed"] == [{"sft_seed": 2, "seed": 0, "start": 0.25, "accuracy": 0.75}]
    assert rows["serial-s3-honest"]["start"] == 0.0
    assert table["contrasts"]["unseen-s3-honest-serial-s3-honest"]["diff"] == pytest.approx(0.25)


@pytest.mark.parametrize("arm", ["switch", "unseen-s3-honest", "serial-s3-honest"])
def test_the_switch_arms_are_refused_in_one_line_where_paths_check_no_deal(arm, tmp_path, capsys):
    """Bug: a world without deal letters trains under a grader that cannot read its answers."""
    out = tmp_path / "controls"
    argv = ("study", "controls", "--profile", "smoke", "--world", "tinyworld", "--arm", arm)
    code, lines = run_cli(capsys, *argv, "--seeds", "0", "--out", out)
    assert code == 2 and len(lines) == 1 and "use --world planworld" in lines[0]
    assert not out.exists()


@pytest.mark.parametrize("arm", ["unseen-s3", "unseen-s3-honest"])
def test_a_cold_starts_split_rate_is_kept_where_the_table_reads_it(tmp_path, monkeypatch, arm):
    """Bug: an arm that shares another's cold starts (``sft_of``) measured their forced split into
    its own folder, where the table never reads a cold start's rate, and every such arm measured
    them again; the ends' rates stay with the arm."""
    kept: list[tuple[str, str]] = []

    def measure(profile, world, variant, model, folder, **layout):
        kept.append((model, str(folder)))
        return {}

    monkeypatch.setattr(controls, "measure_split", measure)
    spec = controls.arm_spec(WORLD, arm)
    runs = [{"start": "cold-a", "end": "end-a"}, {"start": "cold-a", "end": "end-b"}]
    controls.arm_splits("smoke", WORLD, spec, runs, tmp_path, arm)
    assert kept == [
        ("cold-a", str(tmp_path / "unseen")),
        ("end-a", str(tmp_path / arm)),
        ("end-b", str(tmp_path / arm)),
    ]

"""Nothing lost, nothing silently wrong (issue 39): the data-loss cases and the silently wrong
answers, each a probe (a command, its exit code, its one line, what is left on disk), named after
the case it guards. The slow ones train or evaluate the smoke model for real."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _probes import Probe, check, model_copy, quiet, run_folder, same, snapshot, user_files

from pr1lib.cli.main import main
from pr1lib.training.runs import start_id


@pytest.fixture(autouse=True)
def _quiet(tmp_path, monkeypatch):
    quiet(monkeypatch, tmp_path)


# ----------------------------------------------------------------------------- what the probes find
def grpo_from(tmp: Path, start: str = "sft0") -> None:
    """Two SFT runs (other weights) and a GRPO run ``G`` begun from ``sft0``."""
    run_folder(tmp / "sft0", "seed 0")
    run_folder(tmp / "sft1", "seed 1")
    g = run_folder(tmp / "G", "grpo")
    (g / "trainer" / "checkpoint-1").mkdir(parents=True)
    (g / "start.json").write_text(json.dumps({"start": start_id(tmp / start)}))


def retrained_in_place(tmp: Path) -> None:
    grpo_from(tmp)
    config = tmp / "sft0" / "merged" / "config.json"
    config.write_text(config.read_text().replace("seed 0", "seed 0, retrained"))


def prev_taken(tmp: Path) -> None:
    from pr1lib.config import ColdStartConfig
    from pr1lib.store.folders import claim

    with claim(tmp / "cs", "coldstart", ColdStartConfig.for_profile("smoke", source="dapo")):
        (tmp / "cs" / "traces.jsonl").write_text('{"id": "a"}\n')
    user_files(tmp / "cs.prev")


def committed_card(tmp: Path) -> None:
    (tmp / "results").mkdir()
    (tmp / "results" / "sft-tiny.json").write_text('{"name": "sft-tiny"}\n')


def finished_sft(tmp: Path) -> None:
    from pr1lib.config import SFTStageConfig
    from pr1lib.store.folders import claim

    with claim(tmp / "s", "sft", SFTStageConfig.for_profile("smoke")):
        run_folder(tmp / "s", "an SFT")


def moved_to_prev_2(tmp: Path, before: dict) -> None:
    same("cs.prev")(tmp, before)  # the user's own folder, byte for byte
    old = {k[len("cs/") :]: v for k, v in before.items() if k.startswith("cs/")}
    assert snapshot(tmp / "cs.prev-2")["traces.jsonl"] == old["traces.jsonl"]


STAGE = ("grpo", "--stage", "2", "--steps", "1")
LOSS = [
    Probe(  # case 1: a run begun from another start was moved to .prev, the next one deleted it
        "loss-1-grpo-other-start",
        (*STAGE, "--init", "{tmp}/sft1", "--out", "{tmp}/G"),
        "{tmp}/G holds a run begun from another start ({tmp}/sft0#",
        setup=grpo_from,
    ),
    Probe(  # case 1: an SFT retrained in place is another start
        "loss-1-sft-retrained-in-place",
        (*STAGE, "--init", "{tmp}/sft0", "--out", "{tmp}/G"),
        "pass --overwrite to start over (the old run moves to G.prev",
        setup=retrained_in_place,
    ),
    Probe(  # case 1: --resume never continues another start's run
        "loss-1-resume-other-start",
        (*STAGE, "--init", "{tmp}/sft1", "--out", "{tmp}/G", "--resume"),
        "holds a run begun from another start",
        setup=grpo_from,
    ),
    Probe(  # case 2: --overwrite deleted whatever <out>.prev held
        "loss-2-overwrite-keeps-prev",
        (
            "coldstart",
            "--source",
            "tinygsm-easy",
            "--limit",
            "2",
            "--out",
            "{tmp}/cs",
            "--overwrite",
        ),
        "note: moved {tmp}/cs to {tmp}/cs.prev-2: --overwrite starts this run over",
        code=0,
        setup=prev_taken,
        left=moved_to_prev_2,
    ),
    *[  # case 3: the start folder as --out (--overwrite moved the model away)
        Probe(
            f"loss-3-init-is-out{'-merged' if merged else ''}",
            (*STAGE, "--init", "{tmp}/G" + merged, "--out", "{tmp}/G", "--overwrite"),
            f"--out {{tmp}}/G would {'hold' if merged else 'be'} the --init {{tmp}}/G{merged}",
            setup=grpo_from,
        )
        for merged in ("", "/merged")
    ],
    Probe(
        "loss-3-sft-model-is-out",
        ("sft", "--model", "{tmp}/sft0", "--out", "{tmp}/sft0", "--overwrite"),
        "--out {tmp}/sft0 would be the --model {tmp}/sft0",
        setup=grpo_from,
    ),
    Probe(  # case 4: --card overwrote a committed card
        "loss-4-card-exists",
        ("eval", "--card", "sft-tiny", "--out", "{tmp}/e"),
        "--card sft-tiny: {tmp}/results/sft-tiny.json exists",
        setup=committed_card,
    ),
    Probe(  # case 4: a bad card name came after the whole run
        "loss-4-card-name-first",
        ("sft", "--card", "My Card", "--out", "{tmp}/s"),
        "--card 'My Card': use lower-case letters",
    ),
    Probe(
        "loss-4-overwrite-card-alone",
        ("eval", "--overwrite-card", "--out", "{tmp}/e"),
        "--overwrite-card goes with --card NAME",
    ),
    *[  # case 5: eval, bench, tour and export-verl wrote into a folder of the user's files
        Probe(
            f"loss-5-foreign-{argv[0]}",
            (*argv, "--out", "{tmp}/mine"),
            "{tmp}/mine holds files that are not a pr1 run",
            setup=lambda t: user_files(t / "mine"),
        )
        for argv in (
            ("eval", "--n", "1", "--k", "1"),
            ("bench", "rollout", "--quick"),
            ("tour", "--only", "01"),
            ("export-verl", "--source", "tinygsm-easy", "--limit", "2"),
        )
    ],
    Probe(  # retraining over a finished run
        "loss-sft-finished-run",
        ("sft", "--out", "{tmp}/s"),
        "{tmp}/s holds a finished sft run (run_card.json): pick another --out, or pass --overwrite",
        setup=finished_sft,
    ),
    Probe(
        "loss-sft-finished-run-resume",
        ("sft", "--out", "{tmp}/s", "--resume"),
        "holds a finished sft run",
        setup=finished_sft,
    ),
]


@pytest.mark.parametrize("probe", LOSS, ids=lambda p: p.id)
def test_nothing_is_lost(probe, tmp_path, capsys, monkeypatch):
    check(probe, tmp_path, capsys, monkeypatch)


# ----------------------------------------------------------------------------- silently wrong
WRONG = [
    Probe(  # several study flags: one silently won
        "wrong-two-studies",
        ("grpo", "--dose-response", "--ablation"),
        "choose one of --stage, --ablation, --dose-response, --unseen-stage2",
    ),
    Probe(
        "wrong-stage-and-study",
        ("grpo", "--stage", "2", "--unseen-stage2"),
        "choose one of --stage",
    ),
    Probe(
        "wrong-study-reward",
        ("grpo", "--dose-response", "--reward", "tiered"),
        "study dose takes no --reward",
    ),
    Probe(
        "wrong-study-variant",
        ("grpo", "--unseen-stage2", "--variant", "seen"),
        "study unseen-stage2 takes no --variant",
    ),
    Probe("wrong-stage-refresh", (*STAGE, "--refresh"), "--refresh reruns a study's finished"),
    *[  # blockcost accepted and ignored them
        Probe(f"wrong-blockcost-{flag}", ("blockcost", *flag.split()), "unrecognized arguments")
        for flag in ("--out x", "--overwrite", "--resume")
    ],
    Probe(  # --set seed=5 ran seed 0; given two ways, neither wins
        "wrong-seed-two-ways",
        (*STAGE, "--set", "seed=5", "--seed", "3"),
        "seeds given two ways (--seed 3, --set seed 5): give one",
    ),
    Probe(
        "wrong-flag-and-set",
        ("eval", "--k", "2", "--set", "k=3"),
        "k given two ways (--k 2, --set k=3): give one",
    ),
    Probe(
        "wrong-steps-and-set",
        (*STAGE, "--set", "max_steps=4"),
        "max_steps given two ways (--steps 1, --set max_steps=4): give one",
    ),
    Probe(
        "wrong-teacher-flag",
        ("coldstart", "--base-url", "http://x/v1"),
        "--base-url is for --teacher openai (the teacher here is rule)",
    ),
    Probe(
        "wrong-bench-flag",
        ("bench", "rollout", "--model", "data/tiny-base"),
        "bench rollout takes no --model (it is for bench grpo or all)",
    ),
    Probe(
        "wrong-export-reward-mode",
        ("export-verl", "--coldstart", "{tmp}/x", "--reward-mode", "tiered"),
        "--reward-mode sets the RL sets' reward",
    ),
    Probe(
        "wrong-overwrite-and-resume",
        ("sft", "--overwrite", "--resume"),
        "choose --overwrite (start over) or --resume (write into it), not both",
    ),
]


@pytest.mark.parametrize("probe", WRONG, ids=lambda p: p.id)
def test_nothing_is_silently_wrong(probe, tmp_path, capsys, monkeypatch):
    check(probe, tmp_path, capsys, monkeypatch)


def test_a_study_passes_the_set_seed_and_refuses_what_it_sets_itself(tmp_path, monkeypatch):
    from pr1lib.experiments import ablation, dose

    seen = []

    def fake_grpo(cfg, init, out, **kwargs):
        seen.append(cfg.seed)
        raise KeyboardInterrupt  # enough: the first arm's config is known

    monkeypatch.setattr(ablation, "run_grpo", fake_grpo)
    assert main(["grpo", "--ablation", "--set", "seed=3", "--out", str(tmp_path / "a")]) == 130
    assert seen == [3]
    monkeypatch.setattr(dose, "run_grpo", fake_grpo)
    assert main(["grpo", "--dose-response", "--set", "window=5"]) == 2
    assert main(["study", "dose", "--set", "tiered_bonus=0.5"]) == 2
    assert main(["study", "ablation", "--set", "parallel_steps=11"]) == 2  # > window
    assert seen == [3]


# ----------------------------------------------------------------------------- eval by content
def last_json(capsys, *argv) -> dict:
    """The JSON object a command printed last on stdout (it exits 0)."""
    assert main([str(a) for a in argv]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_eval_never_reads_another_models_rows(tmp_path, capsys):
    """Two different models both at ``.../m/base``: the second gets its own rows (the results
    file is keyed by the model's content), and a copy of the first reads the first's."""
    a, b = model_copy(tmp_path / "a" / "m" / "base"), tmp_path / "b" / "m" / "base"
    model_copy(b, "other weights")
    weights = bytearray((b / "model.safetensors").read_bytes())
    weights[-64:] = bytes(64)  # other values in the last tensor, same shapes
    (b / "model.safetensors").write_bytes(bytes(weights))
    out = tmp_path / "e"
    argv = ["eval", "--n", "2", "--k", "1", "--json", "--out", out]
    first = last_json(capsys, *argv, "--model", a)
    second = last_json(capsys, *argv, "--model", b)
    assert first["results"] != second["results"] and first["model"] != second["model"]
    c = tmp_path / "c" / "m" / "base"
    shutil.copytree(a, c)
    again = last_json(capsys, *argv, "--model", c)
    assert again["results"] == first["results"]  # the same content: the same rows


def test_a_resumed_eval_makes_the_rows_of_an_uninterrupted_one(tmp_path, capsys):
    argv = ["eval", "--n", "5", "--k", "2", "--json"]  # the random smoke model: every draw differs
    argv += ["--set", "batch_size=2"]
    whole = last_json(capsys, *argv, "--out", tmp_path / "whole")
    path = Path(whole["results"])
    lines = path.read_text().splitlines(keepends=True)
    cut = tmp_path / "cut" / path.name
    cut.parent.mkdir()
    (cut.parent / path.with_suffix(".config.json").name).write_bytes(
        path.with_suffix(".config.json").read_bytes()
    )
    cut.write_text("".join(lines[:3]) + lines[3][:20])  # stopped in the middle of batch 2
    resumed = last_json(capsys, *argv, "--out", tmp_path / "cut", "--resume")
    rows = lambda p: {json.loads(x)["id"]: json.loads(x) for x in Path(p).read_text().splitlines()}  # noqa: E731
    assert rows(resumed["results"]) == rows(whole["results"])


# ----------------------------------------------------------------------------- trained for real
@pytest.mark.slow
def test_grpo_set_seed_trains_that_seed(tmp_path, capsys):
    """``grpo --set seed=5`` trains seed 5: its weights are those of ``--seeds 5``."""
    from safetensors.torch import load_file

    common = ["grpo", "--stage", "2", "--steps", "1", "--set", "eval_n=1", "--set", "eval_k=1"]
    assert main([*common, "--set", "seed=5", "--out", str(tmp_path / "a")]) == 0
    assert main([*common, "--seeds", "5", "--out", str(tmp_path / "b")]) == 0
    assert main([*common, "--out", str(tmp_path / "c")]) == 0
    capsys.readouterr()
    a, b, c = (load_file(tmp_path / x / "merged" / "model.safetensors") for x in "abc")
    assert json.loads((tmp_path / "a" / "run_card.json").read_text())["seed"] == 5
    assert all((a[k] == b[k]).all() for k in a)
    assert any((a[k] != c[k]).any() for k in a)  # seed 0 trains other weights


def test_bench_latency_takes_threads_and_bench_grpo_does_not():
    """``bench latency --threads 2`` reaches the benchmark (its script times on N threads); a
    benchmark that sets its own threads still refuses the flag in one line."""
    from pr1lib.cli.flags import check_flags
    from pr1lib.cli.main import build_parser

    check_flags(build_parser().parse_args(["bench", "latency", "--threads", "2"]))
    with pytest.raises(ValueError, match="bench grpo takes no --threads"):
        check_flags(build_parser().parse_args(["bench", "grpo", "--threads", "2"]))

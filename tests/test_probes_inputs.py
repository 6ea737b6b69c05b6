"""Corrupt inputs named, never a traceback (issue 39): damaged model folders in every command that
loads one, wrongly typed data rows, damaged checkpoints, settings the fields allow alone but not
together, and the one error boundary (a bad input is one line and exit 2, before torch loads; a
bug is a traceback and where to report it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _probes import Probe, check, model_copy, quiet, refused_before_torch, run_cli

from pr1lib.store.paths import REPO_ROOT


@pytest.fixture(autouse=True)
def _quiet(tmp_path, monkeypatch):
    quiet(monkeypatch, tmp_path)


# ----------------------------------------------------------------------------- damaged models
def truncated(tmp: Path) -> None:
    weights = model_copy(tmp / "bad") / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])


def empty_weights(tmp: Path) -> None:
    (model_copy(tmp / "bad") / "model.safetensors").write_bytes(b"")


def config_list(tmp: Path) -> None:
    (model_copy(tmp / "bad") / "config.json").write_text("[]")


def other_shapes(tmp: Path) -> None:
    config = model_copy(tmp / "bad") / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "hidden_size": 256}))


def fewer_layers(tmp: Path) -> None:
    config = model_copy(tmp / "bad") / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "num_hidden_layers": 2}))


DAMAGE = {
    "truncated": (truncated, "{tmp}/bad/model.safetensors is damaged: its tensors need"),
    "empty": (empty_weights, "{tmp}/bad/model.safetensors is damaged: it holds 0 bytes"),
    "config-list": (
        config_list,
        "{tmp}/bad/config.json is not a model config: it holds a JSON list",
    ),
    "shapes": (
        other_shapes,
        "tensor model.embed_tokens.weight has shape [512, 128] but config.json says [512, 256]",
    ),
    "layers": (fewer_layers, "the weights hold 4 layers but config.json says 2"),
}
LOADERS = {
    "eval": ("eval", "--model", "{tmp}/bad", "--out", "{tmp}/e"),
    "sft": ("sft", "--model", "{tmp}/bad", "--out", "{tmp}/s"),
    "grpo": ("grpo", "--stage", "2", "--init", "{tmp}/bad", "--out", "{tmp}/g"),
    "bench": ("bench", "grpo", "--model", "{tmp}/bad", "--quick"),
    "study": ("study", "ablation", "--init", "{tmp}/bad", "--out", "{tmp}/a"),
    "blockcost": ("blockcost", "--model", "{tmp}/bad", "--n", "1"),
    "hf-teacher": (
        "coldstart",
        *("--source", "tinygsm-easy", "--limit", "1", "--teacher", "hf", "--model", "{tmp}/bad"),
    ),
}
MODELS = [
    Probe(f"model-{damage}-{command}", argv, needle, setup=setup)
    for damage, (setup, needle) in DAMAGE.items()
    for command, argv in LOADERS.items()
]


@pytest.mark.parametrize("probe", MODELS, ids=lambda p: p.id)
def test_a_damaged_model_is_named(probe, tmp_path, capsys, monkeypatch):
    check(probe, tmp_path, capsys, monkeypatch)


# ----------------------------------------------------------------------------- wrongly typed rows
def rows(relative: str, *lines: dict | str):
    def write(tmp: Path) -> None:
        path = tmp / "d" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{x if isinstance(x, str) else json.dumps(x)}\n" for x in lines))

    return write


GOOD = {"question": "Tom has 2 apples and buys 3. How many?", "answer": "2+3=5\n#### 5"}
DAPO = "dapo/dapo_math_17k.jsonl"
BAD_ROWS = {
    "question-number": ("gsm8k", {**GOOD, "question": 123}, 'field "question" must be non-empty'),
    "answer-null": ("gsm8k", {**GOOD, "answer": None}, 'field "answer" must be non-empty text'),
    "answer-no-final": ("gsm8k", {**GOOD, "answer": "5"}, 'field "answer" has no "#### N" line'),
    "dapo-answer-null": (
        "dapo",
        {"problem": "Find x.", "answer": None},
        'field "answer" must be the gold answer (text or a number), got None',
    ),
    "dapo-prompt-string": (
        "dapo",
        {"prompt": "Find x.", "reward_model": {"ground_truth": "3"}},
        'field "prompt" must be a chat list of messages with "content"',
    ),
    "dapo-prompt-empty": (
        "dapo",
        {"prompt": [], "reward_model": {"ground_truth": "3"}},
        'field "prompt" must be a chat list',
    ),
    "dapo-truth-bool": (
        "dapo",
        {"prompt": [{"content": "Find x."}], "reward_model": {"ground_truth": True}},
        'field "reward_model.ground_truth" must be the gold answer',
    ),
}
FILES = {"gsm8k": "gsm8k/train.jsonl", "dapo": DAPO}
DATA = [
    Probe(
        f"rows-{name}-{command}",
        argv(source),
        f"{{tmp}}/d/{FILES[source]} line 2: {needle}",
        setup=rows(
            FILES[source], GOOD if source == "gsm8k" else {"problem": "p", "answer": 1}, bad
        ),
    )
    for name, (source, bad, needle) in BAD_ROWS.items()
    for command, argv in (
        (
            "coldstart",
            lambda s: ("coldstart", "--source", s, "--data-path", "{tmp}/d", "--out", "{tmp}/c"),
        ),
        (
            "export-verl",
            lambda s: ("export-verl", "--source", s, "--data-dir", "{tmp}/d", "--out", "{tmp}/v"),
        ),
    )
]


@pytest.mark.parametrize("probe", DATA, ids=lambda p: p.id)
def test_a_wrongly_typed_row_is_named_by_file_line_and_field(probe, tmp_path, capsys, monkeypatch):
    check(probe, tmp_path, capsys, monkeypatch)


def test_export_writes_nothing_when_a_later_set_is_bad(tmp_path, capsys):
    rows(DAPO, {"problem": "Find x.", "answer": None})(tmp_path)
    argv = ("export-verl", "--source", "tinygsm-easy", "--source", "dapo", "--limit", "2")
    code, lines = run_cli(capsys, *argv, "--data-dir", tmp_path / "d", "--out", tmp_path / "v")
    assert code == 2 and len(lines) == 1 and "line 1" in lines[0]
    assert not (tmp_path / "v").exists()  # the first set was not written either


# ----------------------------------------------------------------------------- settings, folders
def damaged_state(tmp: Path) -> None:
    from pr1lib.config import PretrainConfig
    from pr1lib.store.folders import claim

    with claim(tmp / "pt", "pretrain-tiny", PretrainConfig.for_profile("smoke")):
        (tmp / "pt" / "checkpoint").mkdir()
        (tmp / "pt" / "checkpoint" / "state.pt").write_bytes(b"PK\x03\x04 cut short")


SETTINGS = [
    Probe(
        "set-parallel-steps-over-window",
        ("grpo", "--stage", "2", "--set", "parallel_steps=11"),
        "parallel_steps=11 counts tiered steps of each window: it must be at most window=10",
    ),
    Probe(
        "set-window-in-dose",
        ("grpo", "--dose-response", "--set", "window=5"),
        "study dose sets window itself (per arm or phase): leave --set window out",
    ),
    Probe(
        "set-variant-in-curriculum",
        ("grpo", "--stage", "all", "--set", "variant=unseen"),
        "study curriculum sets variant itself (per arm or phase): give --variant",
    ),
    Probe(
        "set-max-length-1",
        ("sft", "--set", "max_length=1"),
        "max_length must be a whole number from 32 (no prompt and completion is shorter)",
    ),
    Probe("set-reward-unknown", ("grpo", "--stage", "2", "--set", "reward=nope"), "reward must be"),
    Probe(
        "blockcost-set-type",
        ("blockcost", "--set", "temperature=hot"),
        "--set temperature=hot: temperature must be a number, got 'hot'",
    ),
    Probe(
        "blockcost-set-range",
        ("blockcost", "--set", "max_blocks=-1"),
        "max_blocks must be a whole number 0 or more, got -1",
    ),
    Probe(
        "export-bad-style",
        ("export-verl", "--source", "tinygsm-easy", "--prompt-style", "v9", "--out", "{tmp}/v"),
        "--prompt-style 'v9': choose from v3, baseline, tiny",
    ),
    Probe(
        "coldstart-data-path-for-a-world",
        ("coldstart", "--source", "tinygsm-easy", "--data-path", "{tmp}/d"),
        "--data-path is where gsm8k and dapo are read from: tinygsm-easy is generated",
    ),
    Probe(
        "pretrain-damaged-state",
        ("pretrain-tiny", "--out", "{tmp}/pt", "--no-progress"),
        "{tmp}/pt/checkpoint/state.pt is damaged",
        setup=damaged_state,
    ),
]


def finished_pretrain(tmp: Path) -> None:
    from pr1lib.config import PretrainConfig
    from pr1lib.store.folders import claim

    with claim(tmp / "pt", "pretrain-tiny", PretrainConfig.for_profile("smoke")):
        model_copy(tmp / "pt" / "model")
        (tmp / "pt" / "model" / "model.safetensors").rename(tmp / "pt" / "model.safetensors")


def binary_rows(tmp: Path) -> None:
    (tmp / "d" / "gsm8k").mkdir(parents=True)
    (tmp / "d" / "gsm8k" / "train.jsonl").write_bytes(json.dumps(GOOD).encode() + b"\n\x80\xff\n")


def grpo_run(tmp: Path) -> None:
    model_copy(tmp / "sft" / "merged")


# the strongest of the fresh probes of the closing note
SETTINGS += [
    Probe(
        "data-not-utf8",
        ("coldstart", "--source", "gsm8k", "--data-path", "{tmp}/d", "--out", "{tmp}/c"),
        "{tmp}/d/gsm8k/train.jsonl line 2: not UTF-8 text",
        setup=binary_rows,
    ),
    Probe(
        "out-is-a-file",
        ("eval", "--out", "{tmp}/notes.txt"),
        "{tmp}/notes.txt is a file, not a folder: pick another --out",
        setup=lambda t: (t / "notes.txt").write_text("mine"),
    ),
    Probe(
        "out-inside-the-init-model",
        ("grpo", "--stage", "2", "--init", "{tmp}/sft", "--out", "{tmp}/sft/merged", "--overwrite"),
        "--out {tmp}/sft/merged would lie inside the model of the --init {tmp}/sft",
        setup=grpo_run,
    ),
    Probe(
        "openai-without-url",
        ("coldstart", "--source", "tinygsm-easy", "--teacher", "openai", "--model", "m"),
        "--teacher openai needs --base-url and --model",
        env={"OPENAI_BASE_URL": ""},
    ),
    Probe("abbreviated-flag", ("grpo", "--abl"), "unrecognized arguments: --abl"),
    Probe("set-nan", ("sft", "--set", "learning_rate=nan"), "learning_rate must be a number"),
    Probe(
        "pretrain-finished",
        ("pretrain-tiny", "--out", "{tmp}/pt"),
        "{tmp}/pt holds a finished pretrain-tiny run (model.safetensors)",
        setup=finished_pretrain,
    ),
]


@pytest.mark.parametrize("probe", SETTINGS, ids=lambda p: p.id)
def test_settings_are_checked_together(probe, tmp_path, capsys, monkeypatch):
    check(probe, tmp_path, capsys, monkeypatch)


# ----------------------------------------------------------------------------- checkpoints
def checkpoint(folder: Path, step: int, damage: str = "") -> Path:
    """A trainer checkpoint with whole files (``damage``: which one is cut short or missing)."""
    import torch

    ckpt = folder / f"checkpoint-{step}"
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    (ckpt / "adapter_model.safetensors").write_bytes(
        (REPO_ROOT / "data" / "tiny-base" / "model.safetensors").read_bytes()
    )
    for name in ("optimizer.pt", "scheduler.pt"):
        torch.save({"step": step}, ckpt / name)
    if damage == "trainer_state.json":
        (ckpt / damage).unlink()  # a save cut before its last file
    elif damage:
        (ckpt / damage).write_bytes((ckpt / damage).read_bytes()[:40])
    return ckpt


@pytest.mark.parametrize(
    "damage", ["optimizer.pt", "scheduler.pt", "adapter_model.safetensors", "trainer_state.json"]
)
def test_a_damaged_checkpoint_falls_back_to_the_one_before(tmp_path, capsys, damage):
    from pr1lib.training.runs import resumable_checkpoint

    good = checkpoint(tmp_path, 2)
    bad = checkpoint(tmp_path, 4, damage)
    before = {p.name: p.read_bytes() for p in bad.iterdir()}
    assert resumable_checkpoint(tmp_path) == good
    kept = tmp_path / "checkpoint-4.damaged"
    assert {p.name: p.read_bytes() for p in kept.iterdir()} == before  # kept, not deleted
    note = capsys.readouterr().out.strip()
    assert note.startswith(f"note: {bad} cannot be resumed from (") and note.endswith(
        "kept as checkpoint-4.damaged; resuming from checkpoint-2"
    )
    assert resumable_checkpoint(tmp_path) == good and capsys.readouterr().out == ""


@pytest.mark.slow
def test_grpo_resumes_from_the_checkpoint_before_a_damaged_one(tmp_path, capsys):
    from pr1lib.cli.main import main

    argv = ["grpo", "--stage", "2", "--out", str(tmp_path / "g")]
    argv += ["--set", "save_steps=1", "--set", "eval_n=1", "--set", "eval_k=1"]
    assert main([*argv, "--steps", "2"]) == 0
    optimizer = tmp_path / "g" / "trainer" / "checkpoint-2" / "optimizer.pt"
    optimizer.write_bytes(optimizer.read_bytes()[:100])
    capsys.readouterr()
    assert main([*argv, "--steps", "3"]) == 0
    out = capsys.readouterr().out
    assert "cannot be resumed from (its optimizer.pt is damaged" in out
    assert "resuming from checkpoint-1" in out
    card = json.loads((tmp_path / "g" / "run_card.json").read_text())
    assert card["steps"] == 3 and (tmp_path / "g" / "trainer" / "checkpoint-2.damaged").is_dir()


# ----------------------------------------------------------------------------- the boundary
def test_a_bug_is_a_traceback_and_where_to_report_it(monkeypatch, capsys):
    from pr1lib.cli import measure as commands_measure
    from pr1lib.cli.main import main

    def broken(args):
        raise TypeError("an internal mistake")

    monkeypatch.setattr(commands_measure, "_eval", broken)
    assert main(["eval"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "an internal mistake" in err
    assert err.strip().splitlines()[-1] == (
        "error: this is a bug in pr1lib (TypeError), not a mistake in the input: please report "
        "it at https://github.com/pr1-tutorial/pr1/issues with the command and the traceback above"
    )


def test_an_interrupted_sft_says_a_rerun_starts_again(tmp_path, monkeypatch):
    from pr1lib.cli import main as cli
    from pr1lib.store import folders

    monkeypatch.setattr(folders, "HELD", [tmp_path])
    assert cli.interrupted("sft") == (
        f"interrupted: sft keeps no checkpoint; rerun the same command to start again (in "
        f"{tmp_path})"
    )
    assert (
        cli.interrupted("grpo") == f"interrupted: rerun the same command to resume from {tmp_path}"
    )


def test_every_input_check_comes_before_torch_loads(tmp_path):
    """A typo is reported before torch loads (in seconds, not the 7-13 s torch takes)."""
    config_list(tmp_path)
    rows(DAPO, {"problem": "Find x.", "answer": None})(tmp_path)
    probes = [
        ["grpo", "--stage", "3", "--set", "nope=1"],
        ["grpo", "--stage", "2", "--set", "parallel_steps=11"],
        ["grpo", "--stage", "2", "--init", str(tmp_path / "bad")],
        ["grpo", "--dose-response", "--set", "window=5"],
        ["study", "curriculum", "--set", "variant=plain"],
        ["sft", "--set", "nope=1"],
        ["sft", "--set", "max_length=1"],
        ["eval", "--set", "nope=1"],
        ["eval", "--model", str(tmp_path / "bad")],
        ["coldstart", "--set", "nope=1"],
        ["coldstart", "--source", "dapo", "--data-path", str(tmp_path / "d")],
        ["pretrain-tiny", "--set", "nope=1"],
        ["blockcost", "--set", "nope=1"],
        ["tour", "--only", "01", "--set", "FOO=1"],
        ["bench", "rollout", "--steps", "3"],
        ["export-verl", "--source", "dapo", "--data-dir", str(tmp_path / "d")],
        ["sft", "--card", "Bad Name"],
        ["coldstart", "--source", "tinygsm-easy", "--teacher", "openai", "--model", "m"],
    ]
    refused_before_torch(probes, tmp_path)

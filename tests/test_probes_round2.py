"""Nothing lost, round 2 (issue 46): each case the hostile-user audit found, and the fresh probes of
the same kinds, as a probe named after it (a command, its exit code, its one line, what is left
on disk) or a call of a library function a notebook makes. Committed files are never moved or
written; paid teacher answers survive Ctrl-C (``test_teacher_faults.py``); NaN is never a right
answer; a data set never ends empty in silence; every config value is checked before a folder is
claimed; a full disk is one line and the run resumes; the library refuses what the CLI refuses."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _probes import Probe, check, model_copy, quiet, refused_before_torch, run_cli, snapshot

from pr1lib.cli.main import main
from pr1lib.store.paths import REPO_ROOT


@pytest.fixture(autouse=True)
def _quiet(tmp_path, monkeypatch):
    quiet(monkeypatch, tmp_path)


# ----------------------------------------------------------------------------- committed files
def repo_listing() -> dict[str, int]:
    """Every committed folder's files and sizes, and whether any ``.prev`` copy appeared."""
    found = {}
    for name in ("results", "data", "notebooks"):
        for path in (REPO_ROOT / name).rglob("*"):
            if path.is_file():
                found[str(path.relative_to(REPO_ROOT))] = path.stat().st_size
    found.update({p.name: -1 for p in REPO_ROOT.glob("*.prev*")})
    return found


COMMITTED_OUTS = {
    "results": ("results", "lies in the repository's results/"),
    "results-new-subfolder": ("results/my-eval", "lies in the repository's results/"),
    "data-model": ("data/tiny-base", "lies in the repository's data/"),
    "notebooks": ("notebooks", "lies in the repository's notebooks/"),
    "repository": (".", "holds the repository"),
    "docs-tracked": ("docs", "holds files git tracks"),
    "above-the-repository": ("..", "holds the repository"),
}


@pytest.mark.parametrize("overwrite", [True, False], ids=["overwrite", "plain"])
@pytest.mark.parametrize("name", COMMITTED_OUTS)
def test_an_out_holding_committed_files_is_refused_and_nothing_moves(
    name, overwrite, capsys, monkeypatch
):
    """The audit's data loss: ``eval --out results --overwrite`` moved 71 committed cards aside.
    Refused with one line, with or without ``--overwrite``, which the line never suggests."""
    relative, needle = COMMITTED_OUTS[name]
    monkeypatch.chdir(REPO_ROOT)
    before = repo_listing()
    argv = ["eval", "--n", "1", "--k", "1", "--out", relative, *(["--overwrite"] * overwrite)]
    code, lines = run_cli(capsys, *argv)
    assert code == 2 and len(lines) == 1 and needle in lines[0], lines
    assert "--overwrite" not in lines[0] and "Traceback" not in lines[0]
    assert repo_listing() == before


def git_checkout(tmp: Path) -> None:
    """A git work tree at ``tmp/repo`` with one committed file in ``sub/``."""
    (tmp / "repo" / "sub").mkdir(parents=True)
    (tmp / "repo" / "sub" / "notes.md").write_text("committed\n")
    for cmd in (
        ["init", "-q"],
        ["add", "sub/notes.md"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one file"],
    ):
        subprocess.run(["git", "-C", str(tmp / "repo"), *cmd], check=True, capture_output=True)


def dangling(tmp: Path) -> None:
    (tmp / "link").symlink_to(tmp / "nowhere")


def working_folder(tmp: Path) -> None:
    (tmp / "work").mkdir()
    (tmp / "work" / "notes.txt").write_text("my notes\n")


OUTS = [
    Probe(
        "out-tracked-folder-of-another-checkout",
        ("eval", "--out", "{tmp}/repo/sub", "--overwrite"),
        "{tmp}/repo/sub holds files git tracks (notes.md); a run never moves or writes over",
        setup=git_checkout,
    ),
    Probe(
        "out-is-a-git-checkout",
        ("coldstart", "--source", "tinygsm-easy", "--out", "{tmp}/repo", "--overwrite"),
        "{tmp}/repo is a git checkout (committed files)",
        setup=git_checkout,
    ),
    Probe("out-empty", ("coldstart", "--out", ""), "--out is empty: name a folder"),
    Probe("out-empty-eval", ("eval", "--out", " "), "--out is empty: name a folder"),
    Probe(
        "out-dangling-link",
        ("coldstart", "--source", "tinygsm-easy", "--limit", "2", "--out", "{tmp}/link"),
        "{tmp}/link is a link to {tmp}/nowhere, which does not exist",
        setup=dangling,
    ),
    Probe(
        "out-not-utf8",
        ("eval", "--out", os.fsdecode(b"{tmp}/e\xff")),
        "is not UTF-8 text",
    ),
]


@pytest.mark.parametrize("probe", OUTS, ids=lambda p: p.id)
def test_an_out_that_cannot_be_a_run_folder_is_named(probe, tmp_path, capsys, monkeypatch):
    check(probe, tmp_path, capsys, monkeypatch)


def test_out_dot_overwrite_never_moves_the_working_folder(tmp_path, capsys, monkeypatch):
    """``--out . --overwrite`` said "has an empty name"; the folder one works in is never moved
    aside, and the refusal without the flag does not suggest it."""
    working_folder(tmp_path)
    monkeypatch.chdir(tmp_path / "work")
    before = snapshot(tmp_path)
    for extra, needle in (
        (["--overwrite"], "holds the folder you are working in"),
        ([], "start over in another folder (this one holds the folder you are working in"),
    ):
        code, lines = run_cli(capsys, "eval", "--out", ".", *extra)
        assert code == 2 and len(lines) == 1 and needle in lines[0], lines
        assert snapshot(tmp_path) == before


# ----------------------------------------------------------------------------- data rows and sets
def rows(relative: str, *lines: str):
    def write(tmp: Path) -> None:
        path = tmp / "d" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{line}\n" for line in lines))

    return write


GSM8K = "gsm8k/train.jsonl"
DAPO = "dapo/dapo_math_17k.jsonl"
GOOD_GSM8K = json.dumps(
    {"question": "Tom has 2 pens and buys 3. How many?", "answer": "2+3=5\n#### 5"}
)
GOOD_DAPO = json.dumps({"problem": "Find x.", "answer": "3"})
NON_FINITE = {
    "dapo-answer-nan": (DAPO, GOOD_DAPO, '{"problem": "Find y.", "answer": NaN}', "got nan"),
    "dapo-answer-text-inf": (DAPO, GOOD_DAPO, '{"problem": "Find y.", "answer": "-inf"}', "'-inf'"),
    "dapo-truth-infinity": (
        DAPO,
        GOOD_DAPO,
        '{"prompt": [{"content": "Find y."}], "reward_model": {"ground_truth": Infinity}}',
        "got inf",
    ),
    "gsm8k-final-nan": (
        GSM8K,
        GOOD_GSM8K,
        json.dumps({"question": "q?", "answer": "1+1=2\n#### NaN"}),
        'must end in a finite "#### N", got "#### NaN"',
    ),
}
DATA = [
    Probe(
        f"rows-{name}-{command}",
        (
            *(
                ("coldstart", "--source", relative.split("/")[0], "--data-path", "{tmp}/d")
                if command == "coldstart"
                else ("export-verl", "--source", relative.split("/")[0], "--data-dir", "{tmp}/d")
            ),
            "--out",
            "{tmp}/o",
        ),
        f"{{tmp}}/d/{relative} line 2: ",
        setup=rows(relative, good, bad),
        left=None,
    )
    for name, (relative, good, bad, _) in NON_FINITE.items()
    for command in ("coldstart", "export-verl")
]


@pytest.mark.parametrize("probe", DATA, ids=lambda p: p.id)
def test_a_non_finite_gold_is_refused_by_file_line_and_field(probe, tmp_path, capsys, monkeypatch):
    lines = check(probe, tmp_path, capsys, monkeypatch)
    name = probe.id.split("-", 1)[1].rsplit("-", 1)[0].removesuffix("-export")
    assert "finite" in lines[0] and NON_FINITE[name][3] in lines[0]


def saved_set(folder: Path, n: int, typed: bool = True) -> Path:
    """A cold-start-shaped data set of ``n`` rows saved with ``save_to_disk`` in
    ``folder/dataset``."""
    from datasets import Dataset, Features, Value

    columns = ("id", "prompt", "completion", "question", "answer", "source", "teacher")
    values = {c: [f"{c} {i}" for i in range(n)] for c in columns}
    features = Features({c: Value("string") for c in columns}) if typed else None
    Dataset.from_dict(values, features=features).save_to_disk(str(folder / "dataset"))
    return folder


def truncated_set(tmp: Path) -> None:
    arrow = next((saved_set(tmp / "cut", 40) / "dataset").glob("*.arrow"))
    arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])


NO_BLOCK = json.dumps({"question": "Tom has 5 pens. How many?", "answer": "He has 5.\n#### 5"})
SETS = [
    Probe(
        "coldstart-dapo-with-the-rule-teacher",
        ("coldstart", "--source", "dapo", "--data-path", "{tmp}/d", "--out", "{tmp}/c"),
        "--source dapo: dapo has no worked solutions (answers only), so the rule teacher",
        setup=rows(DAPO, GOOD_DAPO, GOOD_DAPO.replace("x", "z")),
    ),
    Probe(
        "coldstart-tinygsm-plus-dapo-with-the-rule-teacher",
        (
            "coldstart",
            "--set",
            "source=tinygsm-easy+dapo",
            "--data-path",
            "{tmp}/d",
            "--limit",
            "4",
        ),
        "--source tinygsm-easy+dapo: dapo has no worked solutions",
        setup=rows(DAPO, GOOD_DAPO),
    ),
    Probe(
        "sft-data-0-rows",
        ("sft", "--data", "{tmp}/e0"),
        "{tmp}/e0 holds 0 rows: nothing to train on",
        setup=lambda t: saved_set(t / "e0", 0),
    ),
    Probe(
        "sft-data-0-rows-untyped",
        ("sft", "--data", "{tmp}/e0"),
        "holds 0 rows",
        setup=lambda t: saved_set(t / "e0", 0, typed=False),
    ),
    Probe(
        "sft-data-truncated-arrow",
        ("sft", "--data", "{tmp}/cut"),
        "{tmp}/cut/dataset/data-00000-of-00001.arrow is damaged or missing (a write cut short?",
        setup=truncated_set,
    ),
    Probe(
        "export-coldstart-truncated-arrow",
        ("export-verl", "--coldstart", "{tmp}/cut", "--out", "{tmp}/v"),
        "{tmp}/cut/dataset/data-00000-of-00001.arrow is damaged or missing",
        setup=truncated_set,
    ),
    Probe(
        "export-data-dir-missing",
        ("export-verl", "--source", "gsm8k", "--data-dir", "{tmp}/nowhere", "--out", "{tmp}/v"),
        "--data-dir {tmp}/nowhere does not exist: give the folder holding gsm8k/ and dapo/",
    ),
    Probe(
        "export-data-dir-without-the-file",
        ("export-verl", "--source", "gsm8k", "--data-dir", "{tmp}/d0", "--out", "{tmp}/v"),
        "gsm8k (train) is not in {tmp}/d0: put the file at {tmp}/d0/gsm8k/train.jsonl",
        setup=lambda t: (t / "d0").mkdir(),
    ),
    Probe(
        "coldstart-data-path-missing",
        ("coldstart", "--source", "gsm8k", "--data-path", "{tmp}/nowhere.jsonl"),
        "--data-path {tmp}/nowhere.jsonl does not exist",
    ),
]


@pytest.mark.parametrize("probe", SETS, ids=lambda p: p.id)
def test_an_empty_or_damaged_set_is_refused_before_anything_is_written(
    probe, tmp_path, capsys, monkeypatch
):
    lines = check(probe, tmp_path, capsys, monkeypatch)
    assert "path=" not in lines[0] and "data_path" not in lines[0]  # never a Python argument


def test_a_set_the_filter_empties_is_an_error_naming_the_filter(tmp_path, capsys):
    """Every trace rejected for one reason: exit 2, the reason named, the traces and the rejected
    rows kept for a look, and no empty set saved for a later stage to train on."""
    rows(GSM8K, NO_BLOCK, NO_BLOCK.replace("Tom", "Ann"))(tmp_path)
    argv = (
        "coldstart",
        "--source",
        "gsm8k",
        "--data-path",
        tmp_path / "d",
        "--out",
        tmp_path / "c",
    )
    code, lines = run_cli(capsys, *argv)
    out = tmp_path / "c"
    assert code == 2 and "Traceback" not in "".join(lines)
    assert lines[-1] == (
        f"error: the data set is empty: every one of the 2 problems was rejected, 2 without a "
        f"<Parallel> block (no_block); no set was saved (the traces are kept in "
        f"{out / 'traces.jsonl'}, each rejected row with its reason in {out / 'rejected.jsonl'})"
    )
    assert len((out / "rejected.jsonl").read_text().splitlines()) == 2
    assert not (out / "dataset").exists() and not (out / "train.jsonl").exists()
    code, lines = run_cli(capsys, "sft", "--data", out)  # no later stage takes it
    assert code == 2 and "is not a saved data set" in lines[0]


def test_pr1_data_dir_naming_a_file_is_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "notes.txt").write_text("not a folder\n")
    monkeypatch.setenv("PR1_DATA_DIR", str(tmp_path / "notes.txt"))
    code, lines = run_cli(capsys, "coldstart", "--source", "gsm8k", "--out", tmp_path / "c")
    assert code == 2 and lines == [
        f"error: PR1_DATA_DIR={tmp_path / 'notes.txt'} is a file: it names the folder holding "
        "gsm8k/ and dapo/ (to read one file, pass it as --data-path)"
    ]
    assert not (tmp_path / "c").exists()


def test_a_limit_reads_no_further_than_it_needs(tmp_path):
    """``--limit 10`` of a 50k-row file parsed the whole file: rows past the limit are never
    read (a broken line there goes unnoticed), and the whole file is still checked without one."""
    from pr1lib.data.sources import load_source
    from pr1lib.store.jsonl import JsonlError

    rows(GSM8K, *[GOOD_GSM8K.replace("Tom", f"Tom{i}") for i in range(3)], "{not json")(tmp_path)
    assert [r["question"][:4] for r in load_source("gsm8k", limit=2, path=tmp_path / "d")] == [
        "Tom0",
        "Tom1",
    ]
    with pytest.raises(JsonlError, match="train.jsonl line 4: not valid JSON"):
        load_source("gsm8k", path=tmp_path / "d")


# ----------------------------------------------------------------------------- configs first
SET = ("--out", "{tmp}/run")
CONFIGS = [
    Probe(
        "grpo-lr-scheduler",
        ("grpo", "--stage", "3", "--set", "lr_scheduler_type=bogus", *SET),
        "lr_scheduler_type must be one of ('linear', 'cosine'",
    ),
    Probe(
        "grpo-lr-scheduler-needs-a-metric",
        ("grpo", "--stage", "3", "--set", "lr_scheduler_type=reduce_lr_on_plateau", *SET),
        "lr_scheduler_type must be one of",
    ),
    Probe(
        "grpo-loss-type",
        ("grpo", "--stage", "3", "--set", "loss_type=bogus", *SET),
        "loss_type must be one of ('grpo', 'dr_grpo', 'dapo'",
    ),
    Probe(
        "grpo-scale-rewards",
        ("grpo", "--stage", "3", "--set", "scale_rewards=yes", *SET),
        "scale_rewards must be one of ('group', 'batch', 'none')",
    ),
    Probe(
        "grpo-data",
        ("grpo", "--stage", "3", "--set", "data=bogus", *SET),
        "data: 'bogus' is not one of gsm8k, dapo, tinygsm-easy",
    ),
    Probe(
        "grpo-data-twice",
        ("grpo", "--stage", "3", "--set", "data=gsm8k+gsm8k", *SET),
        "data: 'gsm8k+gsm8k' is not one of",
    ),
    Probe(
        "grpo-extra-reward-mode",
        ("grpo", "--stage", "3", "--set", "extra_rewards=(('nope', 1.0),)", *SET),
        "extra_rewards: unknown reward mode 'nope'",
    ),
    Probe(
        "grpo-extra-reward-infinite-weight",
        ("grpo", "--stage", "3", "--set", "extra_rewards=(('structure', 1e999),)", *SET),
        "extra_rewards: the weight of 'structure' must be a finite number, got inf",
    ),
    Probe(
        "grpo-extra-reward-not-a-pair",
        ("grpo", "--stage", "3", "--set", "extra_rewards=(('structure',),)", *SET),
        "extra_rewards: each term is a (mode, weight) pair",
    ),
    Probe(
        "grpo-tiered-bonus-negative",
        ("grpo", "--stage", "3", "--set", "tiered_bonus=-5", *SET),
        "tiered_bonus must be a number 0 or more, got -5.0",
    ),
    Probe(
        "grpo-seed-past-numpy",
        ("grpo", "--stage", "3", "--seed", "99999999999", *SET),
        "must be a whole number from 0 to 4294967295",
    ),
    Probe(
        "grpo-seeds-past-numpy",
        ("grpo", "--stage", "3", "--seeds", "0", "4294967296", *SET),
        "must be a whole number from 0 to 4294967295",
    ),
    Probe(
        "coldstart-seed-past-numpy",
        ("coldstart", "--source", "tinygsm-easy", "--seed", "4294967296", *SET),
        "must be a whole number from 0 to 4294967295",
    ),
    Probe(
        "sft-lr-scheduler",
        ("sft", "--set", "lr_scheduler_type=bogus", *SET),
        "lr_scheduler_type must be one of",
    ),
    Probe("sft-source", ("sft", "--set", "source=bogus", *SET), "source: 'bogus' is not one of"),
    Probe(
        "coldstart-prompt-style",
        ("coldstart", "--set", "prompt_style=bogus", *SET),
        "prompt_style must be one of ('v3', 'baseline', 'tiny')",
    ),
    Probe(
        "coldstart-source-set",
        ("coldstart", "--set", "source=bogus", *SET),
        "source: 'bogus' is not one of",
    ),
    Probe(
        "eval-prompt-style",
        ("eval", "--set", "prompt_style=bogus", *SET),
        "prompt_style must be one of",
    ),
    Probe(
        "eval-benchmark-set", ("eval", "--set", "benchmark=bogus", *SET), "benchmark must be one of"
    ),
    Probe(
        "pretrain-heads-3",
        ("pretrain-tiny", "--set", "num_heads=3", *SET),
        "hidden_size=128 must be a multiple of num_heads=3",
    ),
    Probe(
        "pretrain-kv-heads-3",
        ("pretrain-tiny", "--set", "num_kv_heads=3", *SET),
        "num_heads=4 must be a multiple of num_kv_heads=3",
    ),
    Probe(
        "pretrain-odd-head-dim",
        ("pretrain-tiny", "--set", "hidden_size=100", *SET),
        "hidden_size // num_heads = 25 must be even",
    ),
    Probe(
        "pretrain-vocab-10",
        ("pretrain-tiny", "--set", "vocab_size=10", *SET),
        "vocab_size=10 must be at least 257",
    ),
    Probe(
        "pretrain-positions-8",
        ("pretrain-tiny", "--set", "max_position_embeddings=8", *SET),
        "max_position_embeddings=8 must be at least max_new_tokens + 128 = 176",
    ),
]


@pytest.mark.parametrize("probe", CONFIGS, ids=lambda p: p.id)
def test_every_config_value_is_checked_before_the_folder_is_claimed(
    probe, tmp_path, capsys, monkeypatch
):
    """The audit's errors after writes: these failed after the run folder was claimed (and two
    then refused the corrected rerun as another config). Now one line, and no folder."""
    check(probe, tmp_path, capsys, monkeypatch)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_vocabulary_the_text_cannot_fill_is_refused_before_a_file_is_written(tmp_path, capsys):
    """``vocab_size=5000``: TinyGSM's text stops at 584 tokens; the config would record 5000."""
    code, lines = run_cli(
        capsys, "pretrain-tiny", "--set", "vocab_size=5000", "--out", tmp_path / "pt"
    )
    assert code == 2 and lines[-1].startswith(
        "error: vocab_size=5000: the tokenizer trained on tinygsm's text stops at 584 tokens"
    )
    assert not (tmp_path / "pt").exists()


# ----------------------------------------------------------------------------- variants
def seen_sft(tmp: Path) -> None:
    """A finished SFT run folder whose config says seen."""
    model_copy(tmp / "sft" / "merged")
    config = {"type": "SFTStageConfig", "variant": "seen", "seed": 0}
    (tmp / "sft" / "config.json").write_text(json.dumps(config))


VARIANTS = [
    Probe(
        "grpo-unseen-from-a-seen-sft",
        ("grpo", "--stage", "3", "--variant", "unseen", "--init", "{tmp}/sft", "--out", "{tmp}/g"),
        "--init {tmp}/sft was trained as the seen variant (its config says so), but this stage "
        "trains the unseen one",
        setup=seen_sft,
    ),
    Probe(
        "grpo-unseen-from-a-seen-sft-merged",
        ("grpo", "--stage", "3", "--variant", "unseen", "--init", "{tmp}/sft/merged"),
        "was trained as the seen variant",
        setup=seen_sft,
    ),
    Probe(
        "study-ablation-from-a-seen-sft",
        ("study", "ablation", "--init", "{tmp}/sft", "--out", "{tmp}/a"),
        "--init {tmp}/sft was trained as the seen variant",
        setup=seen_sft,
    ),
    Probe(
        "grpo-ablation-alias-from-a-seen-sft",
        ("grpo", "--ablation", "--init", "{tmp}/sft", "--out", "{tmp}/a"),
        "was trained as the seen variant",
        setup=seen_sft,
    ),
    Probe(
        "grpo-seen-from-the-shipped-unseen-sft",
        ("grpo", "--stage", "3", "--variant", "seen", "--init", "data/tinyworld-sft-unseen"),
        "--init data/tinyworld-sft-unseen was trained as the unseen variant",
    ),
    Probe(
        "study-curriculum-seen-from-the-shipped-unseen-sft",
        ("study", "curriculum", "--init", "data/tinyworld-sft-unseen", "--out", "{tmp}/c"),
        "was trained as the unseen variant",
    ),
]


@pytest.mark.parametrize("probe", VARIANTS, ids=lambda p: p.id)
def test_a_start_of_the_other_variant_is_refused_unless_meant(probe, tmp_path, capsys, monkeypatch):
    lines = check(probe, tmp_path, capsys, monkeypatch)
    assert "--cross-variant" in lines[0]


def test_cross_variant_lets_the_stage_start_and_reaches_the_run(tmp_path, capsys, monkeypatch):
    from pr1lib.training import grpo
    from pr1lib.training.runs import Run

    seen_sft(tmp_path)
    got = {}

    def fake(cfg, init, out, dashboard=None, **kwargs):
        got.update(variant=cfg.variant, init=init, cross=kwargs.get("cross_variant"))
        return Run({}, Path(out), None, None)

    monkeypatch.setattr(grpo, "run_grpo", fake)
    argv = ("grpo", "--stage", "3", "--variant", "unseen", "--init", tmp_path / "sft")
    code, _ = run_cli(capsys, *argv, "--cross-variant", "--out", tmp_path / "g")
    assert code == 0 and got == {"variant": "unseen", "init": str(tmp_path / "sft"), "cross": True}


@pytest.mark.slow
def test_a_cross_variant_run_says_so_in_its_card(tmp_path, capsys):
    seen_sft(tmp_path)
    argv = ["grpo", "--stage", "3", "--variant", "unseen", "--init", str(tmp_path / "sft")]
    argv += ["--cross-variant", "--steps", "1", "--out", str(tmp_path / "g")]
    argv += ["--set", "eval_n=1", "--set", "eval_k=1", "--set", "save_steps=1"]
    assert main(argv) == 0
    card = json.loads((tmp_path / "g" / "run_card.json").read_text())
    assert card["variant"] == "unseen" and card["init_variant"] == "seen"


# ----------------------------------------------------------------------------- teachers and files
def named_badly(tmp: Path) -> None:
    model_copy(Path(os.fsdecode(bytes(tmp) + b"/m\xff")))


def eval_run_with_a_rowless_line(tmp: Path) -> None:
    from pr1lib.store.folders import claim

    with claim(tmp / "e", "eval"):
        (tmp / "e" / "random-tiny-qwen3__tinygsm-easy__seen.jsonl").write_text('{"id": "x"}\n')


OPENAI = ("coldstart", "--source", "tinygsm-easy", "--teacher", "openai", "--model", "m")
MISC = [
    Probe(
        "base-url-not-a-url",
        (*OPENAI, "--base-url", "not a url", "--out", "{tmp}/c"),
        "base_url: 'not a url' is not an http(s) URL such as http://127.0.0.1:8000/v1",
    ),
    Probe(
        "base-url-ftp",
        (*OPENAI, "--base-url", "ftp://127.0.0.1/v1", "--out", "{tmp}/c"),
        "is not an http(s) URL",
    ),
    Probe(
        "base-url-port-0",
        (*OPENAI, "--base-url", "http://127.0.0.1:0/v1", "--out", "{tmp}/c"),
        "is not an http(s) URL",
    ),
    Probe(
        "base-url-from-the-environment",
        (*OPENAI, "--out", "{tmp}/c"),
        "OPENAI_BASE_URL: 'localhost:8000' is not an http(s) URL",
        env={"OPENAI_BASE_URL": "localhost:8000"},
    ),
    Probe(
        "model-name-not-utf8",
        ("eval", "--model", os.fsdecode(b"{tmp}/m\xff"), "--out", "{tmp}/e"),
        "has a name that is not UTF-8 text (transformers and safetensors open folders by UTF-8",
        setup=named_badly,
    ),
    Probe(
        "results-row-without-k",
        ("eval", "--json", "--n", "1", "--k", "1", "--out", "{tmp}/e"),
        "random-tiny-qwen3__tinygsm-easy__seen.jsonl line 1 has no 'k' field; delete that line",
        setup=eval_run_with_a_rowless_line,
    ),
]


@pytest.mark.parametrize("probe", MISC, ids=lambda p: p.id)
def test_an_unclear_input_gets_a_clear_line(probe, tmp_path, capsys, monkeypatch):
    check(probe, tmp_path, capsys, monkeypatch)


def test_a_card_that_cannot_be_written_is_refused_before_the_eval(tmp_path, capsys, monkeypatch):
    """A read-only ``results/`` with ``--card`` failed only after the whole evaluation ran."""
    from pr1lib.evaluation import evaluate
    from pr1lib.store import cards as results

    (tmp_path / "results").mkdir()
    real = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: real(p, mode) and Path(p) != tmp_path / "results"
    )
    monkeypatch.setattr(evaluate, "run_eval", lambda *a, **k: pytest.fail("the eval ran"))
    code, lines = run_cli(capsys, "eval", "--card", "mine", "--out", tmp_path / "e")
    assert code == 2 and lines == [
        f"error: --card mine: {results.RESULTS} cannot be written (read-only?), so the card "
        "would be lost after the run: make it writable, or leave --card out"
    ]
    assert not (tmp_path / "e").exists()


def test_make_repo_url_with_an_ampersand_fails_with_the_error(tmp_path):
    """``make repo-url URL=...&...`` ran the URL's tail as a second shell command and exited 0."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    twins = {p: p.read_bytes() for p in (REPO_ROOT / "notebooks").glob("*.ipynb")}
    done = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", "repo-url", "URL=https://github.com/o/n&x=1"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "error: not a GitHub repository URL: 'https://github.com/o/n&x=1'" in done.stderr
    assert {p: p.read_bytes() for p in twins} == twins


# ----------------------------------------------------------------------------- NaN never pays
def test_a_non_finite_gold_never_pays():
    """``accuracy_reward(['Final Answer: nan'], [nan])`` and verl's score returned 1.0."""
    from pr1lib.rewards.functions import accuracy_reward, parallel_correct_reward, tiered_reward
    from pr1lib.training.verl import compute_score

    block = "<Parallel><Path>a</Path><Path>b</Path></Parallel><Summary>s</Summary>\n"
    for gold, said in ((math.nan, "nan"), (math.inf, "inf"), ("nan", "nan"), ("-inf", "-inf")):
        text = f"Final Answer: {said}"
        assert accuracy_reward([text], [gold]) == [-1.0]
        assert tiered_reward([block + text], [gold]) == [-1.0]
        assert parallel_correct_reward([block + text], [gold]) == [-1.0]
        for grader in ("project", "official"):
            for source in ("pr1/dapo", "pr1/gsm8k"):
                assert compute_score(source, text, gold, grader=grader) == -1.0
    assert accuracy_reward(["Final Answer: 5"], [5.0]) == [1.0]  # a finite float still pays


# ----------------------------------------------------------------------------- the library's calls
def _library_calls():
    from pr1lib.data import sources as data
    from pr1lib.notebook import panel as widgets
    from pr1lib.rewards import functions as rewards
    from pr1lib.rewards import graders

    completion, gold = ["Final Answer: 1"], ["1"]
    return {
        "tiered-bonus-nan": lambda: rewards.tiered_reward(completion, gold, bonus=math.nan),
        "tiered-bonus-negative": lambda: rewards.tiered_reward(completion, gold, bonus=-5),
        "tiered-bonus-text": lambda: rewards.tiered_reward(completion, gold, bonus="0.5"),
        "score-bonus-inf": lambda: rewards.score(completion[0], "1", "tiered", bonus=math.inf),
        "alternating-window-text": lambda: rewards.alternating_reward(window="10"),
        "alternating-window-0": lambda: rewards.alternating_reward(window=0),
        "mode-at-negative-step": lambda: rewards.mode_at(-1),
        "graded-unknown-mode": lambda: rewards.GradedReward("nope", "project"),
        "mode-range-unknown": lambda: rewards.mode_range("nope"),
        "official-unknown-style": lambda: graders.official_correct(completion[0], "1", "zz"),
        "load-source-limit-negative": lambda: data.load_source("tinygsm-easy", limit=-5),
        "load-source-limit-0": lambda: data.load_source("tinygsm-easy", limit=0),
        "load-source-limit-float": lambda: data.load_source("tinygsm-easy", limit=2.5),
        "load-world-n-negative": lambda: data.load_world("tinyworld-easy", -1),
        "panel-state-reward": lambda: widgets.PanelState(reward="garbage"),
        "panel-state-tiered-over-window": lambda: widgets.PanelState(window=4, parallel_steps=6),
        "panel-state-window-0": lambda: widgets.PanelState(window=0),
        "panel-state-steps-float": lambda: widgets.PanelState(steps=2.5),
        "panel-state-bonus-nan": lambda: widgets.PanelState(tiered_bonus=math.nan),
        "panel-state-weight-negative": lambda: widgets.PanelState(structure_weight=-1.0),
        "panel-session-text": lambda: widgets.ControlPanel(session="x"),
        "panel-state-text": lambda: widgets.ControlPanel(state="x"),
        "panel-dose-text": lambda: widgets.ControlPanel(dose="x"),
    }


CALLS = sorted(
    [
        "tiered-bonus-nan", "tiered-bonus-negative", "tiered-bonus-text", "score-bonus-inf",
        "alternating-window-text", "alternating-window-0", "mode-at-negative-step",
        "graded-unknown-mode", "mode-range-unknown", "official-unknown-style",
        "load-source-limit-negative", "load-source-limit-0", "load-source-limit-float",
        "load-world-n-negative", "panel-state-reward", "panel-state-tiered-over-window",
        "panel-state-window-0", "panel-state-steps-float", "panel-state-bonus-nan",
        "panel-state-weight-negative", "panel-session-text", "panel-state-text", "panel-dose-text",
    ]
)  # fmt: skip


@pytest.mark.parametrize("case", CALLS)
def test_a_library_call_refuses_a_bad_argument_with_a_sentence(case):
    """What a notebook or a tinkerer calls refuses what the command line refuses: a ValueError
    whose message is one sentence naming the argument, never an internal error or a clamp."""
    calls = _library_calls()
    assert sorted(calls) == CALLS
    with pytest.raises(ValueError) as caught:
        calls[case]()
    message = str(caught.value)
    assert "\n" not in message and len(message) < 300
    assert any(word in message for word in ("must", "unknown", "choose", "need")), message


def test_the_panel_shows_a_knob_past_its_slider_instead_of_clamping_it():
    """``ControlPanel(PanelState(window=50, parallel_steps=30))`` showed 20 and 20."""
    from pr1lib.notebook.panel import ControlPanel, PanelState

    state = PanelState(window=50, parallel_steps=30, steps=300, tiered_bonus=2.5)
    assert ControlPanel(state=state).state == state


# ----------------------------------------------------------------------------- a full disk
def full_after(calls: int):
    """A ``free_bytes`` that reports the real free space ``calls`` times, then 1000 bytes."""
    from pr1lib.store import disk

    real, seen = disk.free_bytes, []

    def free(folder):
        seen.append(folder)
        return real(folder) if len(seen) <= calls else 1000

    return free


def test_a_full_disk_in_pretrain_is_one_line_and_the_rerun_resumes(tmp_path, capsys, monkeypatch):
    from pr1lib.store import disk

    out, argv = tmp_path / "pt", ["pretrain-tiny", "--no-progress", "--out", str(tmp_path / "pt")]
    argv += ["--set", "eval_n=1"]
    monkeypatch.setattr(disk, "free_bytes", full_after(1))  # the checkpoint at step 5 fits
    code, lines = run_cli(capsys, *argv)
    assert code == 2 and "Traceback" not in "".join(lines)
    assert lines[-1].startswith(f"error: no space left for {out}: saving needs about ")
    assert lines[-1].endswith(
        "and its disk has 1.0 kB free; free some space (or pick another --out), then rerun "
        "the same command to resume"
    )
    assert (out / "checkpoint" / "state.pt").is_file() and not (out / "model.safetensors").exists()
    monkeypatch.undo()
    quiet(monkeypatch, tmp_path)
    code, lines = run_cli(capsys, *argv)
    assert code == 0 and (out / "model.safetensors").is_file()
    assert not (out / "checkpoint").exists()


def test_a_write_that_finds_no_room_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    """torch's own words for a full disk (``inline_container.cc ... unexpected pos``) become the
    one line; the checkpoint before stays whole."""
    import torch

    from pr1lib.store.disk import DiskFull
    from pr1lib.training.pretrain import _save_checkpoint

    _save_checkpoint(tmp_path, {"step": 1, "w": torch.zeros(3)})
    kept = (tmp_path / "state.pt").read_bytes()

    def cut(obj, path):
        Path(path).write_bytes(b"PK\x03\x04 half")
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 576 vs 470")

    monkeypatch.setattr(torch, "save", cut)
    with pytest.raises(DiskFull, match=f"no space left for {tmp_path}: saving needs about"):
        _save_checkpoint(tmp_path, {"step": 2, "w": torch.zeros(3)})
    assert (tmp_path / "state.pt").read_bytes() == kept
    assert not (tmp_path / "state.pt.tmp").exists()


@pytest.mark.slow
def test_a_full_disk_in_grpo_is_one_line_and_the_run_resumes(tmp_path, capsys, monkeypatch):
    from pr1lib.store import disk

    out = tmp_path / "g"
    argv = ["grpo", "--stage", "2", "--steps", "2", "--out", str(out), "--set", "save_steps=1"]
    argv += ["--set", "eval_n=1", "--set", "eval_k=1"]
    monkeypatch.setattr(disk, "free_bytes", full_after(1))  # checkpoint-1 fits, checkpoint-2 not
    code, lines = run_cli(capsys, *argv)
    assert code == 2 and "Traceback" not in "".join(lines)
    assert lines[-1].startswith(f"error: no space left for {out / 'trainer'}: saving needs about ")
    assert (out / "trainer" / "checkpoint-1").is_dir()
    assert not (out / "trainer" / "checkpoint-2").exists()
    monkeypatch.undo()
    quiet(monkeypatch, tmp_path)
    code, lines = run_cli(capsys, *argv)
    assert code == 0 and json.loads((out / "run_card.json").read_text())["steps"] == 2


@pytest.mark.slow
def test_a_full_disk_in_sft_is_one_line_before_the_weights_are_saved(tmp_path, capsys, monkeypatch):
    from pr1lib.store import disk

    out = tmp_path / "s"
    monkeypatch.setattr(disk, "free_bytes", full_after(0))
    code, lines = run_cli(capsys, "sft", "--no-eval", "--out", out)
    assert code == 2 and "Traceback" not in "".join(lines)
    assert lines[-1].startswith(f"error: no space left for {out}: saving needs about ")
    assert not (out / "merged").exists() and not (out / "run_card.json").exists()


# ----------------------------------------------------------------------------- before torch


def test_every_new_refusal_comes_before_torch_loads(tmp_path):
    """The flags the audit found refused late (coldstart's --out took 5-10 s, after torch and
    the data) are refused before torch loads."""
    seen_sft(tmp_path)
    dangling(tmp_path)
    probes = [
        ["coldstart", "--out", ""],
        ["coldstart", "--source", "tinygsm-easy", "--out", str(tmp_path / "link")],
        ["coldstart", "--out", str(REPO_ROOT / "results"), "--overwrite"],
        ["eval", "--out", str(REPO_ROOT / "results"), "--overwrite"],
        ["pretrain-tiny", "--out", str(REPO_ROOT / "data" / "tiny-base"), "--overwrite"],
        ["coldstart", "--teacher", "openai", "--model", "m", "--base-url", "not a url"],
        ["grpo", "--stage", "3", "--set", "lr_scheduler_type=bogus"],
        ["grpo", "--stage", "3", "--set", "loss_type=bogus"],
        ["grpo", "--stage", "3", "--seed", "99999999999"],
        ["pretrain-tiny", "--set", "num_heads=3"],
        ["sft", "--data", str(tmp_path / "nowhere")],
        ["grpo", "--stage", "3", "--variant", "unseen", "--init", str(tmp_path / "sft")],
        ["study", "ablation", "--init", str(tmp_path / "sft")],
        ["export-verl", "--source", "gsm8k", "--data-dir", str(tmp_path / "nowhere")],
    ]
    refused_before_torch(probes, tmp_path)


# ----------------------------------------------------------------------------- fresh probes
def test_overwrite_never_moves_the_home_folder(tmp_path, capsys, monkeypatch):
    """``eval --out ~ --overwrite`` moved the home folder (and the Python in it) aside."""
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    (home / ".config" / "notes").write_text("mine\n")
    monkeypatch.setenv("HOME", str(home))
    before = snapshot(tmp_path)
    code, lines = run_cli(capsys, "eval", "--out", home, "--overwrite")
    assert code == 2 and lines == [
        f"error: {home} holds your home folder ({home}), so it is never moved aside: pick "
        "another --out"
    ]
    assert snapshot(tmp_path) == before


def test_system_folders_are_never_moved_aside():
    from pr1lib.store.folders import never_moved

    assert never_moved(Path("/tmp")) == "is a top-level folder of the system"
    assert never_moved(Path("/")) is not None
    assert never_moved(Path(sys.prefix)).startswith("holds the Python that runs this command")
    assert never_moved(Path("/no/such/run")) is None


def huge_number_row(tmp: Path) -> None:
    rows(DAPO, GOOD_DAPO, '{"problem": "Find y.", "answer": ' + "9" * 5000 + "}")(tmp)


def traces_folder(tmp: Path) -> None:
    from pr1lib.config import ColdStartConfig
    from pr1lib.store.folders import claim

    config = ColdStartConfig.for_profile("smoke", source="tinygsm-easy", limit=2)
    with claim(tmp / "c", "coldstart", config):
        (tmp / "c" / "traces.jsonl").mkdir()


def numeric_trace(tmp: Path) -> None:
    """A cached trace whose text is a number (a hand-edited or foreign cache)."""
    from pr1lib.config import ColdStartConfig
    from pr1lib.data.sources import load_source
    from pr1lib.store.folders import claim
    from pr1lib.worlds import find_source

    config = ColdStartConfig.for_profile("smoke", source="tinygsm-easy", limit=2)
    name = find_source("tinygsm-easy")[0].rule_teacher(seed=0).name
    with claim(tmp / "c", "coldstart", config):
        rows = [{"id": p["id"], "teacher": name, "text": 5, "error": None} for p in
                load_source("tinygsm-easy", limit=2)]  # fmt: skip
        (tmp / "c" / "traces.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


FRESH = [
    Probe(
        "out-under-a-file",
        ("eval", "--out", "{tmp}/notes.txt/sub"),
        "{tmp}/notes.txt/sub lies under {tmp}/notes.txt, which is a file",
        setup=lambda t: (t / "notes.txt").write_text("mine\n"),
    ),
    Probe(
        "out-that-cannot-be-made",
        ("coldstart", "--source", "tinygsm-easy", "--limit", "2", "--out", "/proc/pr1-run"),
        "cannot make the folder /proc/pr1-run (",
    ),
    Probe(
        "runs-dir-is-a-file",
        ("coldstart", "--source", "tinygsm-easy", "--limit", "2"),
        "lies under {tmp}/notes.txt, which is a file",
        setup=lambda t: (t / "notes.txt").write_text("mine\n"),
        env={"PR1_RUNS_DIR": "{tmp}/notes.txt"},
    ),
    Probe(
        "row-with-a-5000-digit-number",
        ("coldstart", "--source", "dapo", "--data-path", "{tmp}/d", "--out", "{tmp}/c"),
        "{tmp}/d/dapo/dapo_math_17k.jsonl line 2: not valid JSON (Exceeds the limit",
        setup=huge_number_row,
    ),
    Probe(
        "trace-text-is-a-number",
        ("coldstart", "--source", "tinygsm-easy", "--limit", "2", "--out", "{tmp}/c"),
        "{tmp}/c/traces.jsonl line 1: not a cached trace",
        setup=numeric_trace,
    ),
    Probe(
        "grpo-seeds-repeated",
        ("grpo", "--stage", "3", "--seeds", "0", "0", "--out", "{tmp}/g"),
        "--seeds repeats seed 0: give each seed once",
    ),
    Probe(
        "export-source-twice",
        ("export-verl", "--source", "tinygsm-easy", "--source", "tinygsm-easy", "--out", "{tmp}/v"),
        "--source tinygsm-easy is given twice",
    ),
    Probe(
        "pretrain-eval-n-0",
        ("pretrain-tiny", "--set", "eval_n=0", "--out", "{tmp}/p"),
        "eval_n must be a whole number from 1 to 100,000",
    ),
    Probe(
        "grpo-train-n-below-one-batch",
        ("grpo", "--stage", "3", "--set", "train_n=1", "--out", "{tmp}/g"),
        "train_n=1 problems make no optimizer step: one takes per_device_train_batch_size / "
        "num_generations = 2 prompts",
    ),
    Probe(
        "trace-cache-is-a-folder",
        ("coldstart", "--source", "tinygsm-easy", "--limit", "2", "--out", "{tmp}/c"),
        "{tmp}/c/traces.jsonl is a folder, not a JSON Lines file",
        setup=traces_folder,
    ),
]


@pytest.mark.parametrize("probe", FRESH, ids=lambda p: p.id)
def test_a_fresh_probe_gets_one_line(probe, tmp_path, capsys, monkeypatch):
    for key, value in probe.env.items():  # the table's {tmp} in the environment too
        monkeypatch.setenv(key, value.replace("{tmp}", str(tmp_path)))
    check(probe.__class__(**{**probe.__dict__, "env": {}}), tmp_path, capsys, monkeypatch)


def test_an_empty_runs_dir_is_the_default_not_the_working_folder(monkeypatch):
    from pr1lib.store.paths import runs_dir

    monkeypatch.setenv("PR1_RUNS_DIR", "")
    assert runs_dir() == REPO_ROOT / "runs"


def test_a_branch_git_would_refuse_is_refused_before_a_file_is_read(tmp_path):
    from pr1lib.store.publish import set_repo_url

    with pytest.raises(ValueError, match="--branch 'a b' is not a git branch name"):
        set_repo_url("https://github.com/o/n", root=tmp_path, branch="a b")


def test_a_tour_with_a_relative_out_gives_the_kernels_absolute_folders(tmp_path, monkeypatch):
    """``tour --out notebooks`` from another folder: the kernels (working in notebooks/) wrote
    the headlines into the repository's notebooks/notebooks/."""
    from pr1lib.notebook import tour

    seen = {}

    def fake(profile, out, only, seed, params):
        out.mkdir(parents=True, exist_ok=True)
        seen.update(
            out=out,
            tour=os.environ["PR1_TOUR_DIR"],
            runs=os.environ["PR1_RUNS_DIR"],
        )
        return []

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PR1_RUNS_DIR", "my-runs")
    monkeypatch.setattr(tour, "run_notebooks", fake)
    tour.run_tour("smoke", Path("t"))
    assert seen == {
        "out": tmp_path / "t",
        "tour": str(tmp_path / "t"),
        "runs": str(tmp_path / "my-runs"),
    }
    assert os.environ["PR1_RUNS_DIR"] == "my-runs" and "PR1_TOUR_DIR" not in os.environ


def test_an_sft_smaller_than_its_sources_builds_from_the_parts_it_has(tmp_path):
    """``sft --set train_n=1`` on two sources failed after writing (a 0-problem part)."""
    from pr1lib.config import SFTStageConfig
    from pr1lib.training.sft import build_coldstart

    cfg = SFTStageConfig.for_profile("smoke", train_n=1)
    assert "+" in cfg.source and len(build_coldstart(cfg, "tiny", tmp_path / "cs")) == 1


def test_a_set_every_trace_of_is_too_long_names_that_filter(tmp_path, capsys):
    argv = ("coldstart", "--source", "tinygsm-easy", "--limit", "3", "--set", "max_tokens=1")
    code, lines = run_cli(capsys, *argv, "--out", tmp_path / "c")
    assert code == 2 and lines[-1].startswith(
        "error: the data set is empty: every one of the 3 problems was rejected, 3 over "
        "max_tokens (too_long); no set was saved"
    )


def test_more_library_calls_refuse_or_compare_by_value():
    from pr1lib.data import sources as data
    from pr1lib.format.grammar import answers_match
    from pr1lib.training.verl import compute_score
    from pr1lib.worlds import tasks
    from pr1lib.worlds.tinyworld import generate

    for call in (
        lambda: compute_score("pr1/dapo", "Final Answer: 3", "3", {"global_steps": "x"},
                              mode="alternating"),
        lambda: compute_score("pr1/dapo", "Final Answer: 3", "3", {"global_steps": -3},
                              mode="alternating"),
        lambda: tasks.generate(-1),
        lambda: generate(-1),
        lambda: data.source_shares("tinygsm-easy+tinygsm-hard", -3),
    ):  # fmt: skip
        with pytest.raises(ValueError, match="must be"):
            call()
    assert answers_match("3", 3) and answers_match("2.5", 2.5) and not answers_match("3", 4)
    assert compute_score("pr1/gsm8k", "Final Answer: 12", 12) == 1.0

"""Nothing silently wrong, round 3 (issue 53): each finding of the audit, and the fresh probes of
the same kinds, as a probe named after it (a command, its exit code, its one line, what is left on
disk) or a call of the library function a notebook makes. A model is decoded as its card says; a
cross-world start is refused by every command that trains; a config refuses what its fields
together cannot do; a card is read strictly; a study never writes an empty card; a size beyond
the data or memory is refused with its limit; a notebook's scaffold follows an SFT retrained
since; JupyterLab leaves the committed twins alone. Every flag's bad value: test_probes_flags.py.
"""

from __future__ import annotations

import io
import json
import types
from contextlib import redirect_stderr
from pathlib import Path

import pytest
from _probes import Probe, check, quiet, run_cli

from pr1lib.store.paths import REPO_ROOT


@pytest.fixture(autouse=True)
def _quiet(tmp_path, monkeypatch):
    quiet(monkeypatch, tmp_path)


# ----------------------------------------------------------------------------- decoded as trained
def test_eval_takes_the_rollout_mode_and_world_from_the_models_card(capsys):
    """The audit's case: ``eval --data wideworld-hard --model data/wideworld-sft-unseen`` decoded
    the unseen model as one stream. Its card says unseen (forked) and WideWorld."""
    from pr1lib.cli.measure import as_trained

    chosen = as_trained(str(REPO_ROOT / "data/wideworld-sft-unseen"), "tiny", {})
    assert chosen == {"mode": "forked", "benchmark": "wideworld-easy"}
    assert capsys.readouterr().err == ""  # nothing told otherwise: no note
    as_trained(str(REPO_ROOT / "data/wideworld-sft-unseen"), "tiny", {"mode": "seen"})
    note = capsys.readouterr().err.strip().splitlines()
    assert len(note) == 1 and "trained as the unseen variant (decoded forked)" in note[0]
    assert "decoded seen as asked" in note[0] and str(REPO_ROOT) not in note[0]


def test_an_unseen_model_is_measured_forked_unless_told(tmp_path, capsys):
    """The real run (tiny sizes, 8 problems): forked as its card says answers every one; with
    ``--mode seen`` one line says the flag overrode the card and the numbers are the stream's."""
    argv = ["eval", "--profile", "tiny", "--data", "wideworld-hard", "--n", "8", "--k", "1"]
    argv += ["--model", "data/wideworld-sft-unseen", "--json"]
    code, lines = run_cli(capsys, *argv, "--out", tmp_path / "a")
    forked = json.loads(next(line for line in lines if line.startswith("{")))
    assert code == 0 and forked["mode"] == "forked" and forked["accuracy"] >= 0.75
    code, lines = run_cli(capsys, *argv, "--mode", "seen", "--out", tmp_path / "b")
    seen = json.loads(next(line for line in lines if line.startswith("{")))
    assert code == 0 and seen["mode"] == "seen"
    assert any("decoded seen as asked" in line for line in lines)
    assert seen["accuracy"] < forked["accuracy"]


def test_study_split_reads_the_models_variant_and_world():
    """``study split --model M``: the variant and world come from M's card unless given."""
    from pr1lib.cli.rl import _decode_as_trained

    options = {"model": "data/wideworld-sft-unseen", "variant": None}
    world = _decode_as_trained(options, None, ("seen", "unseen"))
    assert (world, options["variant"]) == ("wideworld", "unseen")


def test_a_world_refuses_a_misspelt_variant_or_stage():
    """A world's presets keyed by a misspelt variant were its defaults in silence (``{}``)."""
    from pr1lib import worlds
    from pr1lib.config import VARIANTS

    assert worlds.VARIANTS == VARIANTS
    world = worlds.get("wideworld")
    for call in (
        lambda: world.grpo_presets("unsen"),
        lambda: world.sft_overrides("unsen"),
        lambda: world.init("unsen"),
        lambda: world.rollout("unsen"),
        lambda: world.notebook_sizes(4, "tiny"),
    ):
        with pytest.raises(ValueError, match="unsen|stages are 2 and 3"):
            call()


def test_sample_facts_refuses_a_misspelt_benchmark():
    from pr1lib.evaluation.searchstats import sample_facts

    assert sample_facts("gsm8k", "q", "Final Answer: 3") == {}
    with pytest.raises(ValueError, match="unknown benchmark 'wideworld-hrd'"):
        sample_facts("wideworld-hrd", "q", "Final Answer: 3")


# ----------------------------------------------------------------------------- the probes
def world_rows(tmp: Path, source: str) -> None:
    """A saved cold-start set at ``tmp/cs`` whose rows are ``source``'s problems."""
    from datasets import Dataset

    row = {"question": "1+1?", "completion": "Final Answer: 2", "answer": "2", "source": source}
    Dataset.from_list([row, {**row, "question": "2+2?"}]).save_to_disk(str(tmp / "cs" / "dataset"))


def gsm8k_test_file(tmp: Path) -> None:
    """A GSM8K test file of three problems at ``$PR1_DATA_DIR/gsm8k/test.jsonl``."""
    folder = tmp / "no-data" / "gsm8k"
    folder.mkdir(parents=True)
    rows = [{"question": f"{i}+1?", "answer": f"{i}+1=<<{i}+1={i + 1}>>{i + 1}\n#### {i + 1}"}
            for i in range(3)]  # fmt: skip
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


PROBES = [
    # the audit's tracebacks after writes
    Probe(
        "eval-wideworld-num-paths-26",
        ("eval", "--data", "wideworld-hard", "--set", "num_paths=26", "--out", "{tmp}/e"),
        "num_paths=26: letter headers name at most 25 paths",
    ),
    Probe(
        "grpo-wideworld-num-paths-26",
        (
            "grpo",
            "--world",
            "wideworld",
            "--stage",
            "3",
            "--set",
            "num_paths=26",
            "--out",
            "{tmp}/g",
        ),
        "num_paths=26: letter headers name at most 25 paths",
    ),
    Probe(
        "study-split-variant-plain",
        ("study", "split", "--variant", "plain"),
        "study split forces a block, which the plain variant never writes",
    ),
    Probe(
        "study-blockcost-variant-plain",
        ("study", "blockcost", "--variant", "plain"),
        "give --variant seen or unseen",
    ),
    # the audit's silent acceptances
    Probe(
        "sft-wideworld-from-tinyworld-base",
        ("sft", "--world", "wideworld", "--model", "data/tinyworld-base", "--out", "{tmp}/s"),
        "data/tinyworld-base was trained on TinyWorld problems, but this stage trains on wideworld",
    ),
    Probe(
        "sft-tinyworld-from-wideworld-base",
        ("sft", "--world", "tinyworld", "--model", "data/wideworld-base", "--out", "{tmp}/s"),
        "data/wideworld-base was trained on WideWorld problems",
    ),
    Probe(
        "sft-wideworld-on-gsm8k-rows",
        ("sft", "--world", "wideworld", "--data", "{tmp}/cs", "--out", "{tmp}/s"),
        "holds gsm8k rows, but --world wideworld trains on WideWorld problems",
        setup=lambda tmp: world_rows(tmp, "gsm8k"),
    ),
    Probe(
        "sft-tinyworld-rows-from-wideworld-model",
        ("sft", "--data", "{tmp}/cs", "--model", "data/wideworld-sft-unseen", "--out", "{tmp}/s"),
        "was trained on WideWorld problems, but this stage trains on tinyworld-easy",
        setup=lambda tmp: world_rows(tmp, "tinyworld-easy"),
    ),
    Probe(
        "sft-tinyworld-rows-on-the-profiles-tinygsm-base",
        ("sft", "--profile", "tiny", "--data", "{tmp}/cs", "--out", "{tmp}/s"),
        "data/tiny-base was trained on TinyGSM problems, but this stage trains on tinyworld-easy "
        "(TinyWorld): start from a TinyWorld model (--world tinyworld starts from its base",
        setup=lambda tmp: world_rows(tmp, "tinyworld-easy"),
    ),
    Probe(
        "controls-without-arm-writes-no-empty-card",
        ("study", "controls", "--world", "wideworld", "--out", "{tmp}/c", "--card", "x"),
        "study controls has nothing to report (its table has no rows): run an arm first",
    ),
    Probe(
        "eval-n-hundred-million",
        ("eval", "--n", "100000000", "--out", "{tmp}/e"),
        "from 0 to 100000 (the most problems a world generates per request)",
    ),
    Probe(
        "coldstart-limit-999999999",
        ("coldstart", "--source", "tinyworld-easy", "--limit", "999999999", "--out", "{tmp}/c"),
        "from 1 to 100000",
    ),
    Probe(
        "eval-n-beyond-a-real-benchmark",
        ("eval", "--data", "gsm8k", "--n", "5", "--out", "{tmp}/e"),
        "--n 5: gsm8k holds 3 problems (give --n 3 or fewer)",
        setup=gsm8k_test_file,
    ),
    Probe(
        "sft-set-train-n-beyond-a-world",
        ("sft", "--set", "train_n=200000", "--out", "{tmp}/s"),
        "train_n must be a whole number from 1 to 100,000",
    ),
    Probe(
        "eval-set-max-completion-length-huge",
        ("eval", "--set", "max_completion_length=1000000000", "--out", "{tmp}/e"),
        "max_completion_length must be a whole number from 1 to 131,072",
    ),
    Probe("eval-k-huge", ("eval", "--k", "100000000"), "from 1 to 1024 (samples per problem)"),
    Probe("bench-threads-a-million", ("bench", "rollout", "--threads", "1000000"), "--threads"),
    Probe("tour-seed-beyond-numpy", ("tour", "--seed", str(2**32)), "4294967295"),
    # the empty choose-from list and refusals naming a flag the command does not take
    Probe("study-split-takes-no-set", ("study", "split", "--set", "x=1"), "takes no --set (x=1)"),
]


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
def test_probe(probe, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    check(probe, tmp_path, capsys, monkeypatch)


def test_an_empty_choose_from_list_is_never_printed(tmp_path, capsys):
    """Every study's --set refusal names what it takes, or says it takes none."""
    from pr1lib.experiments import STUDIES

    for name, study in STUDIES.items():
        code, lines = run_cli(capsys, "study", name, "--set", "nope_key=1")
        assert code == 2 and len(lines) == 1, (name, lines)
        assert not lines[0].rstrip().endswith("choose from"), (name, lines)
        if study.sets == {}:
            assert "takes no --set" in lines[0], (name, lines)


@pytest.mark.parametrize("flag", ["--n", "--repeats", "--threads"])
def test_latency_benchmark_refuses_zero(flag):
    """``benchmarks/latency.py --n 0`` (and ``--repeats 0``, ``--threads 0``) crashed; the bench
    command refused them. Now the script's own parser does: one line, exit 2, before torch works."""
    import importlib.util

    path = REPO_ROOT / "benchmarks" / "latency.py"
    spec = importlib.util.spec_from_file_location("probe_latency", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    err = io.StringIO()
    with redirect_stderr(err), pytest.raises(SystemExit) as stop:
        module.main([flag, "0"])
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    assert stop.value.code == 2 and len(lines) == 1 and f"argument {flag}" in lines[0]


# ----------------------------------------------------------------------------- cards read strictly
@pytest.mark.parametrize(
    "text,words",
    [
        ('{"name": "x", "numbers": null}', 'holds no numbers ("numbers": null)'),
        ('{"name": "x", "numbers": {}}', 'holds no numbers ("numbers": {})'),
        ("", "is empty"),
        ('{"name": "x", "numb', "is damaged: not valid JSON"),
        ("[1, 2]", "holds no numbers"),
    ],
    ids=["null", "empty-numbers", "empty-file", "cut-short", "a-list"],
)
def test_a_damaged_card_is_one_line_naming_it_never_no_card(text, words, tmp_path):
    """A card with ``"numbers": null`` read as no card: a notebook measured again for an hour in
    silence. Now ``committed`` (and so ``committed_or``) names the file and what is wrong."""
    from pr1lib.store import cards

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.json").write_text(text)
    computed = []
    with pytest.raises(ValueError) as err:
        cards.committed_or("x", lambda: computed.append(1), profile="tiny")
    assert words in str(err.value) and "x.json" in str(err.value) and "\n" not in str(err.value)
    assert "git checkout -- " in str(err.value) and computed == []


def test_a_committed_card_still_reads(tmp_path, monkeypatch):
    from pr1lib.store import cards

    monkeypatch.setattr(cards, "RESULTS", REPO_ROOT / "results")
    assert cards.committed("tinyworld-controls")["numbers"]["rows"]
    assert cards.committed("tinyworld-controls", profile="no-such-profile") is None


@pytest.mark.parametrize(
    "name",
    ["card.json", "run_card.json"],
)
def test_a_damaged_model_card_names_its_file(name, tmp_path):
    """A model folder whose card is cut short: one line naming it, not a JSONDecodeError."""
    from pr1lib.training.starts import start_world

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / name).write_text('{"config": ')
    with pytest.raises(ValueError, match=f"{name} is damaged \\(not valid JSON"):
        start_world(tmp_path / "m")


# ----------------------------------------------------------------------------- notebooks recompute
def fake_phases(calls: list):
    """A stand-in for ``run_grpo``: records the call, makes the folder, returns a finished run."""

    def run_grpo(cfg, init, out, **kwargs):
        calls.append((str(init), Path(out).name, kwargs.get("follow")))
        Path(out).mkdir(parents=True, exist_ok=True)
        held = {"hard": {"accuracy": 0.5, "parallel_ratio": 0.5}}
        result = {"reward": cfg.reward, "before": held, "after": held, "seconds": 1.0}
        return types.SimpleNamespace(result=result, rows=[{"step": 1}], run_dir=Path(out))

    return run_grpo


def test_a_notebooks_scaffold_follows_an_sft_retrained_since(tmp_path, monkeypatch, capsys):
    """The audit's stranded notebook: notebook 04 retrained its SFT in place, and notebook 07's
    scaffold stopped at ``FolderError: ... pass --refresh`` (a flag a notebook user cannot pass).
    With ``follow`` (notebook 07's call) the old scaffold moves aside with one line naming no
    machine path, and it trains again; the command line still refuses and names its flag."""
    from pr1lib.experiments import midtraining
    from pr1lib.store.folders import FolderError

    calls: list = []
    monkeypatch.setattr(midtraining, "run_grpo", fake_phases(calls))
    out = tmp_path / "runs" / "scaffold"
    common = dict(switch_step=1, total_steps=2, world="tinyworld", out=out)
    midtraining.mid_training("smoke", "org/sft-a", **common, follow=True)
    capsys.readouterr()
    with pytest.raises(FolderError, match="pass --refresh"):
        midtraining.mid_training("smoke", "org/sft-b", **common)
    again = midtraining.mid_training("smoke", "org/sft-b", **common, follow=True)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
    assert len(lines) == 1 and "moved $PR1_RUNS_DIR/scaffold to scaffold.prev" in lines[0]
    assert "begun from org/sft-a" in lines[0] and str(tmp_path) not in lines[0]
    assert again["init"] == "org/sft-b" and (tmp_path / "runs" / "scaffold.prev").is_dir()
    assert [c[0] for c in calls] == ["org/sft-a", str(out / "alternating"), "org/sft-b"] + [
        str(out / "alternating")
    ]
    assert all(c[2] is True for c in calls)  # each phase follows its own start too


def test_a_damaged_scaffold_cache_is_one_line_naming_it(tmp_path):
    from pr1lib.experiments import midtraining

    out = tmp_path / "scaffold"
    out.mkdir()
    (out / "mid_training.json").write_text('{"key": ')
    with pytest.raises(ValueError, match="mid_training.json is damaged"):
        midtraining.mid_training("smoke", "org/x", 1, 2, world="tinyworld", out=out)


def test_notebooks_04_and_07_print_no_machine_path():
    """The two prints the audit saw (04 section 3's data folder, 07 section 6's start) go
    through ``shown``."""
    nb04 = (REPO_ROOT / "notebooks" / "04_sft_lora.py").read_text()
    nb07 = (REPO_ROOT / "notebooks" / "07_evaluation.py").read_text()
    assert "{shown(DATA) if DATA else 'the rule teacher'}" in nb04
    assert "shown(scaffold_init) if scaffold_init else" in nb07
    assert "follow=True" in nb07


# ----------------------------------------------------------------------------- the committed twins
def test_jupyterlab_from_the_venv_never_autosaves():
    """JupyterLab's autosave rewrote notebook 06's committed outputs with a half-run state. The
    venv's JupyterLab (make venv, make lab, Binder) defaults autosave to off; the README says how
    to bring the committed outputs back."""
    settings = REPO_ROOT / "tools" / "jupyter" / "labconfig" / "default_setting_overrides.json"
    assert json.loads(settings.read_text()) == {
        "@jupyterlab/docmanager-extension:plugin": {"autosave": False}
    }
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert "lab: $(STAMP) $(LABCONFIG)" in makefile
    assert "etc/jupyter/labconfig" in makefile
    assert "etc/jupyter/labconfig" in (REPO_ROOT / "binder" / "postBuild").read_text()
    readme = (REPO_ROOT / "README.md").read_text()
    assert "never autosaves; `git checkout notebooks` restores" in readme

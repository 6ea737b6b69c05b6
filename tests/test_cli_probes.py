"""Every bad input gets one clear line and loses nothing (issue 21).

Each probe runs one command in-process through ``pr1lib.cli.main.main`` (stdout and stderr captured)
on the smoke profile and checks: the exit code (2 for a bad input, 0 where the input is valid),
exactly one line naming what to fix, no traceback, and every file under the test's folder byte
for byte as before. Ctrl-C and the offline hub miss run in a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest
from _probes import run_cli, snapshot

import pr1lib.cli.pipeline  # noqa: F401 - heavy imports (and their log lines) before any capture
from pr1lib.cli.main import main
from pr1lib.store.paths import REPO_ROOT

GSM8K_ROW = {"question": "Tom has 2 apples and buys 3. How many?", "answer": "2+3=5\n#### 5"}


# ----------------------------------------------------------------------------- what a probe sees
@pytest.fixture(autouse=True)
def quiet_env(tmp_path, monkeypatch):
    """Smoke sizes, runs and data inside the test's folder, never the hub."""
    monkeypatch.setenv("PR1_PROFILE", "smoke")
    monkeypatch.setenv("PR1_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("PR1_DATA_DIR", str(tmp_path / "no-data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("PR1_TRACEBACK", raising=False)


# ----------------------------------------------------------------------------- folders to probe
def jsonl(tmp: Path, *lines: str) -> None:
    (tmp / "bad.jsonl").write_text("".join(f"{line}\n" for line in lines))


def coldstart_run(tmp: Path, name: str = "cs") -> None:
    """A finished (tiny) cold-start run in ``tmp/name``."""
    assert (
        main(["coldstart", "--source", "tinygsm-easy", "--limit", "3", "--out", str(tmp / name)])
        == 0
    )


def foreign(tmp: Path) -> None:
    (tmp / "mine").mkdir()
    (tmp / "mine" / "notes.txt").write_text("my notes\n")


def sft_run(tmp: Path) -> None:
    (tmp / "sftrun").mkdir()
    (tmp / "sftrun" / "config.json").write_text(json.dumps({"type": "SFTStageConfig", "seed": 0}))


def folders(tmp: Path) -> None:
    (tmp / "empty").mkdir()
    (tmp / "junk").mkdir()
    (tmp / "junk" / "readme.txt").write_text("not a data set\n")


@dataclass
class Probe:
    id: str
    argv: tuple[str, ...]
    needle: str  # in the one line printed
    code: int = 2
    setup: Callable[[Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)


ROW, ROW2 = json.dumps(GSM8K_ROW), json.dumps({"question": "no answer here"})
TINY = ("--source", "tinygsm-easy", "--limit", "2")
PROBES = [
    *[
        Probe(f"unknown-key-{c}", (c, *extra, "--set", "nope=1"), "unknown key 'nope'")
        for c, *extra in (
            ("coldstart",),
            ("sft",),
            ("grpo", "--stage", "3"),
            ("eval",),
            ("pretrain-tiny",),
        )
    ],
    Probe("set-name-is-model", ("sft", "--set", "name=/models/x"), "goes in --model DIR"),
    Probe("blockcost-unknown-set", ("blockcost", "--set", "nope=1"), "blockcost --set nope"),
    Probe("blockcost-unknown-data", ("blockcost", "--data", "zz"), "--data 'zz': choose from"),
    Probe(
        "set-limit-abc",
        ("coldstart", "--set", "limit=abc"),
        "--set limit=abc: limit must be None or a whole number, got 'abc'",
    ),
    Probe(
        "set-temperature-hot",
        ("coldstart", "--set", "temperature=hot"),
        "temperature must be a number, got 'hot'",
    ),
    Probe("set-bool", ("sft", "--set", "use_lora=maybe"), "use_lora must be True or False"),
    Probe(
        "batch-size-0",
        ("coldstart", "--set", "batch_size=0"),
        "batch_size must be a whole number above 0, got 0",
    ),
    Probe("set-profile", ("eval", "--set", "profile=paper"), "profile is set with --profile"),
    Probe("eval-n-negative", ("eval", "--n", "-3"), "argument --n: must be a whole number from 0"),
    Probe("eval-k-0", ("eval", "--k", "0"), "argument --k: must be a whole number from 1"),
    Probe("eval-set-k-0", ("eval", "--set", "k=0"), "k must be a whole number from 1 to 1024"),
    Probe("coldstart-limit-negative", ("coldstart", "--limit", "-7470"), "argument --limit"),
    Probe("grpo-steps-negative", ("grpo", "--stage", "3", "--steps", "-1"), "argument --steps"),
    Probe("bench-threads-0", ("bench", "rollout", "--threads", "0"), "argument --threads"),
    *[
        Probe(
            f"unknown-profile-{argv[0]}",
            argv,
            "unknown profile 'laptop'",
            env={"PR1_PROFILE": "laptop"},
        )
        for argv in (
            ("tour",),
            ("pretrain-tiny",),
            ("coldstart",),
            ("sft",),
            ("grpo", "--stage", "3"),
            ("eval",),
            ("bench", "rollout"),
            ("export-verl", "--source", "tinygsm-easy"),
        )
    ],
    *[
        Probe(
            f"model-missing-{c}",
            (c, "--model", "/missing/model/path"),
            "model folder /missing/model/path does not exist",
        )
        for c in ("sft", "grpo", "eval")
    ],
    Probe(
        "model-empty",
        ("eval", "--model", "{tmp}/empty"),
        "is not a model folder: it has no config.json and no tokenizer files",
        setup=folders,
    ),
    Probe(
        "grpo-model-and-init",
        ("grpo", "--stage", "3", "--model", "a/b", "--init", "c/d"),
        "give --model or --init, not both",
    ),
    Probe("data-missing", ("sft", "--data", "{tmp}/nope"), "--data {tmp}/nope does not exist"),
    Probe("data-empty", ("sft", "--data", "{tmp}/empty"), "is empty", setup=folders),
    Probe(
        "data-not-a-set", ("sft", "--data", "{tmp}/junk"), "is not a saved data set", setup=folders
    ),
    *[
        Probe(
            f"jsonl-{name}",
            (
                "coldstart",
                "--source",
                "gsm8k",
                "--data-path",
                "{tmp}/bad.jsonl",
                "--out",
                "{tmp}/out",
            ),
            needle,
            setup=lambda t, ls=lines: jsonl(t, *ls),
        )
        for name, lines, needle in (
            ("malformed", (ROW, '{"question": "x", '), "bad.jsonl line 2: not valid JSON"),
            ("not-an-object", (ROW, "[1, 2]"), "bad.jsonl line 2: not a JSON object (got list)"),
            ("missing-field", (ROW, ROW2), 'bad.jsonl line 2: no "answer" field'),
            ("empty", (), "bad.jsonl is empty"),
        )
    ],
    Probe(
        "dapo-test-split",
        ("coldstart", "--source", "dapo", "--split", "test"),
        "dapo has no 'test' split",
    ),
    Probe("export-nothing", ("export-verl", "--out", "{tmp}/v"), "nothing to export"),
    Probe(
        "export-coldstart-missing",
        ("export-verl", "--coldstart", "{tmp}/nope", "--out", "{tmp}/v"),
        "--coldstart {tmp}/nope does not exist",
    ),
    Probe(
        "out-other-config",
        ("coldstart", "--source", "tinygsm-hard", "--limit", "3", "--out", "{tmp}/cs"),
        "holds another coldstart run (source='tinygsm-easy', not 'tinygsm-hard')",
        setup=coldstart_run,
    ),
    Probe(
        "out-other-command",
        ("coldstart", *TINY, "--out", "{tmp}/sftrun"),
        "holds a sft run, not a coldstart one",
        setup=sft_run,
    ),
    Probe(
        "out-foreign-files",
        ("coldstart", *TINY, "--out", "{tmp}/mine"),
        "not a pr1 run",
        setup=foreign,
    ),
    Probe(
        "sft-out-is-data",
        ("sft", "--data", "{tmp}/cs", "--out", "{tmp}/cs"),
        "would be the --data",
        setup=coldstart_run,
    ),
    Probe(
        "tour-only-nothing",
        ("tour", "--only", "zz", "--out", "{tmp}/t"),
        "--only zz matches no notebook",
    ),
    Probe(
        "tour-unknown-parameter",
        ("tour", "--only", "00", "--set", "FOO=1"),
        "declare no parameter 'FOO'",
    ),
    Probe("tour-profile-by-set", ("tour", "--set", "PROFILE=tiny"), "PROFILE comes from --profile"),
    Probe("bad-choice", ("coldstart", "--teacher", "llm"), "argument --teacher: invalid choice"),
]


@pytest.mark.parametrize("probe", PROBES, ids=lambda p: p.id)
def test_probe(probe, tmp_path, capsys, monkeypatch):
    if probe.setup:
        probe.setup(tmp_path)
        capsys.readouterr()
    for key, value in probe.env.items():
        monkeypatch.setenv(key, value)
    before = snapshot(tmp_path)
    code, lines = run_cli(capsys, *(a.replace("{tmp}", str(tmp_path)) for a in probe.argv))
    assert code == probe.code, lines
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    assert probe.needle.replace("{tmp}", str(tmp_path)) in lines[0]
    assert "error:" in lines[0]
    assert snapshot(tmp_path) == before


# ----------------------------------------------------------------------------- valid inputs
def test_eval_n_0_still_means_every_problem(tmp_path, capsys, monkeypatch):
    from pr1lib.evaluation import evaluate
    from pr1lib.notebook import reports

    seen = {}
    monkeypatch.setattr(evaluate, "load_for_eval", lambda *a, **k: (None, None))
    monkeypatch.setattr(reports, "write_eval_outputs", lambda *a, **k: {})

    def fake_run_eval(model, tokenizer, config, **kwargs):
        seen["n"] = config.n
        return {"accuracy": 0.0}

    monkeypatch.setattr(evaluate, "run_eval", fake_run_eval)
    assert main(["eval", "--n", "0", "--json", "--out", str(tmp_path / "e")]) == 0
    assert seen == {"n": None} and json.loads(capsys.readouterr().out) == {"accuracy": 0.0}


def test_model_flag_reaches_the_stage_model_config(tmp_path, monkeypatch):
    from pr1lib.training import grpo, sft
    from pr1lib.training.runs import Run

    seen = {}

    def fake_sft(cfg, data, out, evaluate=True, before=None, model_cfg=None):
        seen["sft"] = model_cfg
        return Run({"before": None}, Path(out), None, None)

    def fake_grpo(cfg, init, out, dashboard=None, **kwargs):
        seen["grpo"] = init
        return Run({}, Path(out), None, None)

    monkeypatch.setattr(sft, "run_sft", fake_sft)
    monkeypatch.setattr(grpo, "run_grpo", fake_grpo)
    assert main(["sft", "--model", "data/tiny-base", "--out", str(tmp_path / "s")]) == 0
    assert seen["sft"].name.endswith("data/tiny-base") and not seen["sft"].random_init
    assert (
        main(["grpo", "--stage", "3", "--model", "data/tiny-base", "--out", str(tmp_path / "g")])
        == 0
    )
    assert seen["grpo"] == "data/tiny-base"


def test_tour_passes_set_to_the_notebooks_that_declare_it():
    from pr1lib.notebook.tour import notebook_parameters, select_notebooks

    assert notebook_parameters(select_notebooks(["06"]), ["init=runs/x"]) == {"INIT": "runs/x"}


def test_results_file_damage_is_reported_or_named(tmp_path, capsys):
    from pr1lib.evaluation.evaluate import evaluate_records
    from pr1lib.store.jsonl import JsonlError

    path, records = tmp_path / "r.jsonl", [{"id": "a", "question": "1+1?", "answer": "2"}]
    path.write_text('{"id": "b", "k": 1}\n{"id": "c", "k"')  # a torn last line
    evaluate_records(
        records,
        lambda prompts, k: [["Final Answer: 2"]] * len(prompts),
        1,
        "tinygsm-easy",
        str,
        path,
        progress=False,
    )
    assert capsys.readouterr().err.strip() == (
        f"note: {path}: dropped 1 unreadable line(s) (a write cut short); their rows are made again"
    )
    path.write_text('{"id": "b", "k": 1}\n[1, 2]\n')
    with pytest.raises(JsonlError, match=f"{path} line 2 is not a row of this file"):
        evaluate_records(records, None, 1, "tinygsm-easy", str, path, progress=False)


def test_rerun_with_more_problems_resumes_the_same_folder(tmp_path, capsys):
    coldstart_run(tmp_path)
    traces = (tmp_path / "cs" / "traces.jsonl").read_bytes()
    code = main(
        ["coldstart", "--source", "tinygsm-easy", "--limit", "5", "--out", str(tmp_path / "cs")]
    )
    assert code == 0 and json.loads(capsys.readouterr().out.splitlines()[-1])["total"] == 5
    assert (tmp_path / "cs" / "traces.jsonl").read_bytes().startswith(traces)  # nothing lost


def test_resume_and_overwrite_say_otherwise(tmp_path, capsys):
    coldstart_run(tmp_path)
    argv = ("coldstart", "--source", "tinygsm-hard", "--limit", "3", "--out", tmp_path / "cs")
    code, _ = run_cli(capsys, *argv, "--resume")
    assert code == 0 and (tmp_path / "cs" / "traces.jsonl").read_text().count("tinygsm-easy") == 3
    before = snapshot(tmp_path / "cs")
    code, lines = run_cli(capsys, *argv, "--overwrite")
    assert code == 0 and snapshot(tmp_path / "cs.prev") == before
    assert "tinygsm-easy" not in (tmp_path / "cs" / "traces.jsonl").read_text()


# ----------------------------------------------------------------------------- subprocesses
def _python(code: str, env: dict[str, str] | None = None, **kwargs) -> subprocess.Popen:
    full = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PR1_PROFILE": "smoke", **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-c", code],
        env=full,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,
    )


SLOW_BENCH = """
import os, signal, sys, time
from pathlib import Path
import pr1lib.cli.bench as bench
from pr1lib.cli.main import main
# a shell that starts jobs in the background (nohup, `&`) makes them ignore SIGINT, and children
# inherit that: restore Python's Ctrl-C so the probe means the same wherever the suite runs
signal.signal(signal.SIGINT, signal.default_int_handler)
bench.BENCH_DIR = Path(sys.argv[1])
sys.exit(main(["bench", "rollout", "--out", sys.argv[2]]))
"""
ROLLOUT = """
import os, time
def run(*args):
    with open(os.path.join(os.environ["OUT"], "partial.json"), "w") as f:
        f.write("{}")
    print("ready", flush=True)
    time.sleep(60)
"""


def _slow_bench(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """A ``bench`` run that holds its --out folder until stopped (it prints ``ready``)."""
    (tmp_path / "fake").mkdir(exist_ok=True)
    (tmp_path / "fake" / "rollout.py").write_text(ROLLOUT)
    out = tmp_path / "bench"
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_BENCH, str(tmp_path / "fake"), str(out)],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "OUT": str(out)},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    return proc, out


def test_ctrl_c_is_one_line_and_exit_130(tmp_path):
    proc, out = _slow_bench(tmp_path)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last == (
        f"interrupted: bench keeps no checkpoint; rerun the same command to start again (in {out})"
    )
    assert sorted(p.name for p in out.iterdir()) == ["partial.json", "pr1-run.json"]  # lock gone


def test_a_second_run_on_a_busy_folder_gets_one_line(tmp_path, capsys):
    proc, out = _slow_bench(tmp_path)
    try:
        before = snapshot(out)
        code, lines = run_cli(capsys, "bench", "rollout", "--out", out)
        assert code == 2 and len(lines) == 1
        assert lines[0] == (
            f"error: {out} is in use by another run (pid {proc.pid}): wait for it "
            "to finish, stop it, or pick another --out"
        )
        assert snapshot(out) == before
    finally:
        proc.kill()
        proc.communicate()


def test_offline_hub_miss_is_one_line_not_chained_tracebacks(tmp_path):
    proc = _python(
        "import sys\nfrom pr1lib.cli.main import main\n"
        "sys.exit(main(['eval', '--model', 'pr1-nobody/no-such-model-xyz', '--out', "
        f"{str(tmp_path / 'e')!r}]))",
        env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")},
    )
    out, err = proc.communicate(timeout=120)
    ours = [line for line in (out + err).splitlines() if "error" in line.lower()]
    assert proc.returncode == 2 and "Traceback" not in err and len(ours) == 1, err
    assert "pr1-nobody/no-such-model-xyz" in ours[0] and "--model DIR" in ours[0]
    assert not (tmp_path / "e").exists()

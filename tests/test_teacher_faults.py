"""The OpenAI-compatible teacher against a fault-injecting loopback server, through the cold-start
pipeline: every finished trace is kept, failures are counted per kind, a rerun asks only for the
missing ones, a trickle is cut at the deadline, a dead server stops the run early with one line,
and bad command-line input gets one line and a non-zero exit, never a traceback.

Run: .venv/bin/python -m pytest tests/test_teacher_faults.py -q -p no:cacheprovider
"""

from __future__ import annotations

import io
import json
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from pr1lib.cli import main as cli
from pr1lib.cli import pipeline as commands
from pr1lib.config import ColdStartConfig
from pr1lib.data import coldstart
from pr1lib.data.chat_teacher import OpenAITeacher
from pr1lib.data.sources import load_source
from pr1lib.data.standin import StandInServer, closed_port
from pr1lib.worlds.teachers import RuleTeacher

# problem index -> the faults its requests meet, in order (one retry is allowed below)
PLAN = {
    0: ["429"],
    1: ["500"],
    2: ["truncated"],
    3: ["bad_status"],  # each recovered by the retry
    4: ["malformed"],  # not retried: a 200 that is not a completion
    5: ["surrogate"],  # a success whose content is not writable as UTF-8
    6: ["trickle"],  # cut at the deadline
    7: ["429", "429"],
    8: ["500", "500"],
    9: ["truncated", "truncated"],  # the retry fails too
}  # 10: no fault
FAILED = {4: "bad_response", 6: "deadline", 7: "rate_limited", 8: "server_error", 9: "protocol"}


@pytest.fixture(scope="module")
def problems():
    return load_source("tinygsm-easy", limit=11)


def _teacher(server, **kwargs) -> OpenAITeacher:
    kwargs = {"timeout": 1.0, "deadline": 1.5, "max_retries": 1, "concurrency": 4, **kwargs}
    return OpenAITeacher(base_url=server.base_url, model="stand-in", **kwargs)


def _run(server, problems, out):
    config = ColdStartConfig.for_profile(
        "smoke", source="tinygsm-easy", teacher="openai", llm_batch_size=4
    )
    return coldstart.run_coldstart(config, out, problems=problems, teacher=_teacher(server)).result


def _cli(*argv: str) -> tuple[int, str]:
    buffer = io.StringIO()
    with redirect_stdout(buffer), redirect_stderr(buffer):
        try:
            code = cli.main(list(argv))
        except SystemExit as stop:  # argparse refuses the value itself
            code = stop.code
    return code, buffer.getvalue()


def _rows(path: Path) -> list[dict]:
    # strict UTF-8
    return [json.loads(line) for line in path.read_bytes().decode("utf-8").splitlines()]


def test_fault_run_keeps_finished_traces_counts_failures_and_reruns_only_the_missing(
    problems, tmp_path
):
    ids = [p["id"] for p in problems]
    plan = {ids[i]: faults for i, faults in PLAN.items()}
    with StandInServer(problems, plan=plan, trickle_s=0.3, retry_after="0.01") as server:
        first = _run(server, problems, tmp_path)
        # 7 faults retried once, 4 answered once (the trickle is not retried)
        assert server.requests == 18
    assert first["asked"] == 11 and first["teacher_failures"] == {
        kind: 1 for kind in FAILED.values()
    }
    rows = {r["id"]: r for r in _rows(tmp_path / "traces.jsonl")}
    assert set(rows) == set(ids)  # every trace, finished or failed, is written
    for i, problem in enumerate(problems):
        row = rows[problem["id"]]
        if i in FAILED:
            assert (
                row["kind"] == FAILED[i]
                and row["text"] == ""
                and row["error"].startswith(FAILED[i])
            )
        elif i != 5:
            assert (
                row["error"] is None and row["text"] == RuleTeacher().generate([problem])[0]["text"]
            )
    assert rows[ids[5]]["error"] is None and rows[ids[5]]["text"].startswith("\ufffd <Parallel>")

    with StandInServer(problems) as server:  # the same server, healed
        second = _run(server, problems, tmp_path)
    assert sorted(server.asked) == sorted(ids[i] for i in FAILED)  # only the missing ones
    assert (
        second["asked"] == 5
        and second["teacher_failures"] == {}
        and second["rejected"]["teacher_error"] == 0
    )
    # appended; the last row per problem wins
    assert len(_rows(tmp_path / "traces.jsonl")) == 11 + 5


def test_trickle_is_cut_at_the_deadline(problems):
    with StandInServer(problems, faults=["trickle"], trickle_s=0.2) as server:
        start = time.monotonic()
        (trace,) = _teacher(server, timeout=0.8, deadline=1.0).generate(problems[:1])
        seconds = time.monotonic() - start
    # every byte comes within the 0.8 s read timeout, and the whole body would take minutes
    assert trace["kind"] == "deadline" and 1.0 <= seconds < 1.6 and server.requests == 1


def test_dead_server_stops_the_run_early_with_one_line(tmp_path):
    start = time.monotonic()
    code, out = _cli(
        "coldstart",
        "--teacher",
        "openai",
        "--base-url",
        f"http://127.0.0.1:{closed_port()}/v1",
        "--model",
        "m",
        "--source",
        "tinygsm-easy",
        "--limit",
        "40",
        "--max-retries",
        "0",
        "--concurrency",
        "2",
        "--set",
        "max_consecutive_failures=3",
        "--out",
        str(tmp_path),
    )
    assert code == 2 and time.monotonic() - start < 5 and "Traceback" not in out
    last = out.strip().splitlines()[-1]
    assert last.startswith(
        "error: stopped after 3 requests in a row failed (connection 3) at http://127.0.0.1:"
    )
    rows = _rows(tmp_path / "traces.jsonl")
    assert 3 <= len(rows) <= 4 and {r["kind"] for r in rows} == {"connection"}  # 36+ never asked
    assert not (tmp_path / "summary.json").exists()


def test_every_request_failing_exits_non_zero_with_counts(tmp_path):
    code, out = _cli(
        "coldstart",
        "--teacher",
        "openai",
        "--base-url",
        f"http://127.0.0.1:{closed_port()}/v1",
        "--model",
        "m",
        "--source",
        "tinygsm-easy",
        "--limit",
        "2",
        "--max-retries",
        "0",
        "--out",
        str(tmp_path),
    )
    lines = out.strip().splitlines()
    assert code == 3 and "Traceback" not in out
    assert lines[-2] == (
        "error: every one of the 2 teacher requests failed (connection 2); check that the server "
        "answers, then rerun the same command"
    )
    assert json.loads(lines[-1])["teacher_failures"] == {"connection": 2}


def test_cli_flags_reach_the_teacher():
    args = cli.build_parser().parse_args(
        [
            "coldstart",
            "--teacher",
            "openai",
            "--base-url",
            "http://h/v1",
            "--model",
            "m",
            "--timeout",
            "7",
            "--deadline",
            "9",
            "--max-retries",
            "1",
            "--rpm",
            "30",
            "--concurrency",
            "2",
            "--set",
            "max_consecutive_failures=5",
        ]
    )
    config = commands.coldstart_config(args)
    teacher = coldstart.make_teacher(config)
    got = (
        teacher.timeout,
        teacher.deadline,
        teacher.max_retries,
        teacher.requests_per_minute,
        teacher.concurrency,
        teacher.max_consecutive_failures,
    )
    assert got == (7.0, 9.0, 1, 30.0, 2, 5)


@pytest.mark.parametrize(
    "argv, line",
    [
        (
            ["--teacher", "hf"],
            "error: --teacher hf needs --model: a hub id or a local model folder",
        ),
        (
            [
                "--teacher",
                "openai",
                "--base-url",
                "http://h/v1",
                "--model",
                "m",
                "--concurrency",
                "0",
            ],
            "python -m pr1lib coldstart: error: argument --concurrency: must be a whole "
            "number of 1 or more, got '0' (see --help)",
        ),
        (
            [
                "--teacher",
                "openai",
                "--base-url",
                "http://h/v1",
                "--model",
                "m",
                "--deadline",
                "-1",
            ],
            "python -m pr1lib coldstart: error: argument --deadline: must be a number above 0, "
            "got '-1' (see --help)",
        ),
    ],
    ids=["hf-without-model", "concurrency-0", "negative-deadline"],
)
def test_bad_teacher_settings_get_one_line_and_touch_nothing(tmp_path, argv, line):
    code, out = _cli(
        "coldstart", "--source", "tinygsm-easy", "--limit", "2", "--out", str(tmp_path), *argv
    )
    assert code == 2 and out.strip().splitlines()[-1] == line and "Traceback" not in out
    assert list(tmp_path.iterdir()) == []


def test_cache_line_that_is_not_a_trace_is_named_by_file_and_line(tmp_path):
    cache = tmp_path / "traces.jsonl"
    good = json.dumps({"id": "a", "teacher": "rule", "text": "x", "error": None})
    cache.write_text(f"{good}\n{json.dumps({'id': 'b', 'text': 'y'})}\n")
    before = cache.read_bytes()
    code, out = _cli(
        "coldstart", "--source", "tinygsm-easy", "--limit", "2", "--out", str(tmp_path)
    )
    assert code == 2 and "Traceback" not in out and cache.read_bytes() == before
    assert out.strip().splitlines()[-1] == (
        f'error: {cache} line 2: not a cached trace (it needs "id" and '
        f'"teacher", text as "text"); delete that line, or pick another --out'
    )


INTERRUPTED_COLDSTART = """
import signal, sys
from pr1lib.cli.main import main
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background shell may ignore it
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_keeps_every_answer_the_server_sent_and_the_rerun_asks_only_the_rest(
    problems, tmp_path
):
    """A server that answers twice, then hangs: Ctrl-C keeps the two paid answers on disk (each
    written as it arrived, not per batch), says so, and the rerun asks for the other four only."""
    import os
    import signal
    import subprocess
    import sys

    from pr1lib.store.paths import REPO_ROOT

    six, out = problems[:6], tmp_path / "cs"
    ids = [p["id"] for p in six]
    argv = ["coldstart", "--teacher", "openai", "--model", "m", "--source", "tinygsm-easy"]
    argv += ["--limit", "6", "--out", str(out), "--max-retries", "0", "--timeout", "300"]
    argv += ["--deadline", "300", "--concurrency", "4"]
    hang = {i: ["timeout"] for i in ids[2:]}
    with StandInServer(six, plan=hang, hang_s=300) as server:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PR1_PROFILE": "smoke"}
        proc = subprocess.Popen(
            [sys.executable, "-c", INTERRUPTED_COLDSTART, *argv, "--base-url", server.base_url],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        traces, deadline = out / "traces.jsonl", time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if traces.exists() and len(traces.read_bytes().splitlines()) >= 2:
                break
            time.sleep(0.2)
        time.sleep(0.5)  # the hanging requests are in flight
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert err.strip().splitlines()[-1] == (
        f"interrupted: 2 new teacher answer(s) of this run are kept in {out}; rerun the same "
        "command to ask only for the missing ones"
    )
    kept = _rows(traces)
    assert sorted(r["id"] for r in kept) == sorted(ids[:2]) and all(
        r["error"] is None for r in kept
    )

    with StandInServer(six) as server:  # the same server, answering again
        code, text = _cli(*argv, "--base-url", server.base_url)
    assert code == 0, text[-2000:]
    assert sorted(server.asked) == sorted(ids[2:])  # the paid two are never asked again
    assert json.loads(text.strip().splitlines()[-1])["kept"] == 6

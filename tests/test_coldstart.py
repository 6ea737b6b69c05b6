"""pr1lib.data.coldstart: the full-train yield of the rule teacher, resumable generation under real
interrupts, the filter's reasons, the report, and the saved data set feeding SFTTrainer.

Run: .venv/bin/python -m pytest tests/test_coldstart.py -q -p no:cacheprovider -s
(-s shows the yield)
"""

from __future__ import annotations

import io
import json
import math
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from conftest import needs_data

from pr1lib.cli.main import main as cli_main
from pr1lib.config import ColdStartConfig
from pr1lib.data import coldstart
from pr1lib.data.sources import load_source
from pr1lib.data.traces import TraceCache, generate_traces
from pr1lib.store.paths import shared_data_dir
from pr1lib.worlds.teachers import RuleTeacher, make_trace

REPO = Path(__file__).resolve().parent.parent
SHARED = shared_data_dir()
needs_gsm8k = needs_data("gsm8k/train.jsonl")


def _cli(*argv: str) -> tuple[int, dict | None, str]:
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        code = cli_main(list(argv))
    lines = buffer.getvalue().strip().splitlines()
    try:
        return code, json.loads(lines[-1]), buffer.getvalue()
    except (ValueError, IndexError):
        return code, None, buffer.getvalue()


# ----------------------------------------------------------------------------- the done-when check
@needs_gsm8k
def test_rule_teacher_on_the_full_gsm8k_train_split(tmp_path):
    start = time.perf_counter()
    code, result, _ = _cli(
        "coldstart",
        "--teacher",
        "rule",
        "--source",
        "gsm8k",
        "--profile",
        "tiny",
        "--out",
        str(tmp_path / "gsm8k"),
    )
    seconds = time.perf_counter() - start
    print(
        f"\nrule teacher, GSM8K train: kept {result['kept']}/{result['total']} = "
        f"{result['yield']:.2%} "
        f"in {seconds:.1f} s; rejected {result['rejected']}"
    )
    assert code == 0 and result["total"] == 7473
    assert set(result) >= {"total", "kept", "yield", "rejected", "output"}
    assert set(result["rejected"]) == set(coldstart.REASONS)
    assert result["yield"] >= 0.95 and result["kept"] + sum(result["rejected"].values()) == 7473
    assert result["rejected"]["invalid_format"] == 0 and result["rejected"]["wrong_answer"] == 0
    rows = [json.loads(line) for line in open(result["jsonl"])]
    assert len(rows) == result["kept"] and len({r["id"] for r in rows}) == len(rows)


@needs_gsm8k
def test_dapo_with_a_teacher_that_needs_worked_solutions_is_refused(tmp_path, capsys):
    """DAPO has answers only: the rule teacher would keep no row, so the run is refused (exit 2,
    one line) instead of ending with an empty set, and nothing is left in --out."""
    code = cli_main(
        ["coldstart", "--source", "dapo", "--limit", "200", "--out", str(tmp_path / "d")]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [
        "error: --source dapo: dapo has no worked solutions (answers only), so the rule "
        "teacher, which rewrites them, would keep no row: use an LLM teacher (--teacher hf or "
        "openai) for it"
    ]
    assert not (tmp_path / "d").exists()


def test_cli_reports_a_missing_source_clearly(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PR1_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = cli_main(["coldstart", "--source", "gsm8k", "--out", str(tmp_path / "x")])
    out = capsys.readouterr()
    assert code == 2 and out.out == "" and len(out.err.strip().splitlines()) == 1  # on stderr
    assert "PR1_DATA_DIR" in out.err and "load_dataset" in out.err


# ----------------------------------------------------------------------------- resumable generation
class Crashing:
    """The rule teacher, but the process 'dies' after ``after`` records (an injected exception)."""

    def __init__(self, after: int):
        self.inner, self.after, self.name = RuleTeacher(), after, RuleTeacher().name

    def generate(self, problems):
        if self.after < len(problems):
            raise RuntimeError("injected crash")
        self.after -= len(problems)
        return self.inner.generate(problems)


def _cache_ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


def test_injected_crash_then_rerun_has_no_duplicate_and_no_loss(tmp_path):
    problems = load_source("tinygsm-hard", limit=95)
    cache = tmp_path / "traces.jsonl"
    with pytest.raises(RuntimeError, match="injected"):
        generate_traces(Crashing(after=40), problems, cache, batch_size=20)
    assert len(_cache_ids(cache)) == 40  # two whole batches; the one in flight is lost
    traces = generate_traces(RuleTeacher(), problems, cache, batch_size=20)
    ids = _cache_ids(cache)
    assert sorted(ids) == sorted(p["id"] for p in problems) and len(ids) == len(set(ids))
    assert traces == RuleTeacher().generate(problems)


SLOW_RUN = textwrap.dedent("""
    import signal, sys, time
    from pr1lib.data.traces import generate_traces
    from pr1lib.data.sources import load_source
    from pr1lib.worlds.teachers import RuleTeacher

    class Slow(RuleTeacher):
        def generate(self, problems):
            time.sleep(0.1)  # 80 batches: >= 8 s, so a starved poll below cannot miss the middle
            return super().generate(problems)

    # A shell that starts jobs in the background (nohup, `&` without job control) makes them ignore
    # SIGINT, and children inherit that; restore Python's Ctrl-C so the test means the same
    # anywhere.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    generate_traces(Slow(), load_source("tinygsm-easy", limit=400), sys.argv[1], batch_size=5)
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_real_interrupt_then_rerun_completes(tmp_path, sig):
    cache = tmp_path / "traces.jsonl"
    log = (tmp_path / "stderr.txt").open("w")  # a file, not a pipe: a full pipe would stall the run
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_RUN, str(cache)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    deadline = time.monotonic() + 120
    while (
        not cache.exists() or cache.read_text().count("\n") < 30
    ) and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(sig)
    proc.wait(timeout=30)
    log.close()
    lines = cache.read_text().count("\n") if cache.exists() else 0
    err = (tmp_path / "stderr.txt").read_text()[-2000:]
    assert 30 <= lines < 400, f"the run was not stopped mid-way ({lines} lines); its stderr:\n{err}"
    problems = load_source("tinygsm-easy", limit=400)
    traces = generate_traces(RuleTeacher(), problems, cache, batch_size=50)
    ids = _cache_ids(cache)  # every line parses: a torn tail was cut before appending
    assert sorted(ids) == sorted(p["id"] for p in problems) and len(ids) == len(set(ids))
    assert traces == RuleTeacher().generate(problems)


def test_torn_last_line_is_dropped_and_repaired(tmp_path):
    problems = load_source("tinygsm-easy", limit=6)
    cache_path = tmp_path / "t.jsonl"
    generate_traces(RuleTeacher(), problems[:4], cache_path)
    whole = cache_path.read_bytes()
    cache_path.write_bytes(
        whole[: whole.rindex(b"\n", 0, len(whole) - 1) + 1] + whole[-1 - 30 : -1]
    )
    cache = TraceCache(cache_path)
    assert cache.dropped == 1 and len(cache.records) == 3
    generate_traces(RuleTeacher(), problems, cache_path)
    assert _cache_ids(cache_path) == [p["id"] for p in problems[:3]] + [problems[3]["id"]] + [
        p["id"] for p in problems[4:]
    ]


def test_error_traces_are_retried_on_the_next_run(tmp_path):
    problems = load_source("tinygsm-easy", limit=3)
    cache = tmp_path / "t.jsonl"

    class Flaky:
        name = "flaky"

        def generate(self, batch):
            return [make_trace(p, self.name, error="HTTP 429") for p in batch]

    class Fine(Flaky):
        def generate(self, batch):
            return [make_trace(p, self.name, "ok") for p in batch]

    generate_traces(Flaky(), problems, cache)
    assert [t["text"] for t in generate_traces(Fine(), problems, cache)] == ["ok"] * 3
    assert [t["text"] for t in generate_traces(Flaky(), problems, cache)] == ["ok"] * 3


# ----------------------------------------------------------------------------- filter and report
GOOD = (
    "2+3=<<2+3=5>>5\n<Parallel><Path>5*2=<<5*2=10>>10</Path><Path>2*5=<<2*5=10>>10</Path></Parallel>\n"
    "<Summary>Both paths give 10.</Summary>\nFinal Answer: 10"
)


def test_each_rejection_reason_on_a_named_case():
    problem = {"id": "p", "question": "What is (2+3)*2?", "answer": "10", "source": "toy"}
    cases = {
        None: make_trace(problem, "t", GOOD),
        "teacher_error": make_trace(problem, "t", error="HTTP 429"),
        "invalid_format": make_trace(problem, "t", GOOD.replace("</Summary>", "")),
        "no_block": make_trace(problem, "t", "2+3=5, 5*2=10\nFinal Answer: 10"),
        "wrong_answer": make_trace(
            problem, "t", GOOD.replace("Final Answer: 10", "Final Answer: 11")
        ),
    }
    for reason, trace in cases.items():
        assert coldstart.check_trace(problem, trace, "tiny", 1024)[0] == reason, reason
    assert coldstart.check_trace(problem, cases[None], "tiny", 20)[0] == "too_long"
    twin = {**problem, "id": "q", "question": "what is  (2+3)*2?"}
    kept, rejected = coldstart.filter_traces(
        [problem, twin], [cases[None], {**cases[None], "id": "q"}]
    )
    assert [r["id"] for r in kept] == ["p"] and rejected[0]["reason"] == "duplicate"


def test_token_budget_uses_the_tokenizer_when_given():
    class CharTokenizer:
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": list(text)}

    assert (
        coldstart.count_tokens("abcdefgh", CharTokenizer()) == 8
        and coldstart.count_tokens("abcdefgh") == 2
    )


def test_yield_table_and_chart_put_sources_next_to_the_paper():
    problems = load_source("tinygsm-easy", limit=30)
    traces = RuleTeacher().generate(problems)
    traces[0] = make_trace(problems[0], traces[0]["teacher"], error="boom")
    table = coldstart.yield_table({"tinygsm-easy": coldstart.filter_traces(problems, traces)})
    row = table.loc["tinygsm-easy"]
    assert row["total"] == 30 and row["kept"] == 29 and math.isclose(row["yield"], 29 / 30)
    assert math.isclose(row["teacher_error"], 1 / 30)
    assert table["yield"].round(3).tolist()[1:] == [0.837, 0.0]
    fig = coldstart.plot_yield(table)
    names = [trace.name for trace in fig.data]
    assert names == ["kept (yield)", "teacher_error"] and list(fig.data[0].x)[0] == "tinygsm-easy"


# ----------------------------------------------------------------------------- output and SFT
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    out = tmp_path_factory.mktemp("cs")
    config = ColdStartConfig.for_profile("smoke", source="tinygsm-easy", limit=40)
    return coldstart.run_coldstart(config, out), out


def test_saved_dataset_card_and_jsonl(saved):
    from datasets import load_from_disk

    run, out = saved
    ds = load_from_disk(str(out / "dataset"))
    assert ds.column_names == list(coldstart.SFT_COLUMNS) and len(ds) == run.result["kept"] == 40
    row = ds[0]
    assert row["prompt"].startswith("Problem: ") and row["prompt"].endswith("Solution:\n")
    assert (
        row["completion"].endswith(f"Final Answer: {row['answer']}")
        and "<Parallel>" in row["completion"]
    )
    assert (row["source"], row["teacher"], row["prompt_style"]) == (
        "tinygsm-easy",
        RuleTeacher(seed=0).name,
        "tiny",
    )
    card = (out / "dataset" / "README.md").read_text()
    assert "40 of 40" in card and "83.7%" in card
    assert len((out / "train.jsonl").read_text().splitlines()) == 40
    assert json.loads((out / "summary.json").read_text())["kept"] == 40
    assert json.loads((out / "config.json").read_text())["type"] == "ColdStartConfig"


def test_saved_dataset_feeds_sft_trainer_for_one_step(saved, tmp_path):
    import torch
    from datasets import load_from_disk
    from trl import SFTConfig, SFTTrainer

    from pr1lib.decoding.models import load_policy
    from pr1lib.decoding.tokens import add_parallel_tags

    model, tokenizer, _ = load_policy("smoke")
    add_parallel_tags(tokenizer, model)
    ds = load_from_disk(str(saved[1] / "dataset")).select(range(4))
    args = SFTConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=2,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        max_length=512,
        use_cpu=True,
        dataloader_num_workers=0,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tokenizer)
    before = [p.detach().clone() for p in model.parameters()]
    output = trainer.train()
    assert output.global_step == 1 and math.isfinite(output.training_loss)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    sample = trainer.train_dataset[0]
    tags = tokenizer.convert_tokens_to_ids(["<Parallel>", "<Summary>"])
    # the loss covers the completion only
    completion_ids = [t for t in sample["labels"] if t != -100]
    assert (
        len(completion_ids) < len(sample["input_ids"])
        and completion_ids[-1] == tokenizer.eos_token_id
    )
    assert all(t in completion_ids for t in tags)


def test_cli_with_the_openai_teacher_against_the_loopback_stand_in(tmp_path):
    from pr1lib.data.standin import StandInServer

    problems = load_source("tinygsm-easy", limit=5)
    with StandInServer(problems, faults=["429"]) as server:
        code, result, _ = _cli(
            "coldstart",
            "--teacher",
            "openai",
            "--base-url",
            server.base_url,
            "--model",
            "stand-in",
            "--source",
            "tinygsm-easy",
            "--limit",
            "5",
            "--out",
            str(tmp_path),
        )
        assert server.requests == 6  # five problems, one 429 retried
    assert code == 0 and (result["kept"], result["teacher"]) == (5, "openai:stand-in")

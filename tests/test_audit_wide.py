"""What WideWorld's study code produces, tested where a deliberate bug once passed the whole suite
(issue 49's audit): the teacher's summary, the split measure, the split study's forced prefix,
which cold start each control arm trains from, the stages of the paper's unseen curriculum, and
what the latency bench times. Each test names the bug it would catch."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from pr1lib import worlds
from pr1lib.format.grammar import parse
from pr1lib.worlds import wideworld as ww

WORLD = worlds.get("wideworld")
HARD = ww.generate(120, "hard", "test", seed=1)


def _trace(record: dict) -> str:
    teacher = WORLD.rule_teacher()
    problem = {"id": "q", "question": record["question"], "answer_text": record["answer"]}
    return teacher.trace(problem)["text"]


def test_the_teachers_summary_copies_the_path_that_checks_out():
    """Bug: the summary copies another path's result (the final answer then follows it)."""
    searched = 0
    for record in HARD:
        text = _trace(record)
        if "<Parallel>" not in text:
            continue
        searched += 1
        block = parse(text).blocks[0]
        right = [p.text for p in block.paths if ww.OK in p.text]
        assert len(right) == 1
        summary = re.search(r"<Summary>(.*?)</Summary>", text)[1]
        assert right[0].rsplit("=", 1)[1] == summary  # "✓ 8-6=2" -> 2
    assert searched > 60


def test_a_path_with_its_own_letter_but_another_deals_prices_does_not_take_its_share():
    """Bug: the split measure credits a path for naming its letter, whatever prices it adds."""
    record = next(r for r in HARD if "<Parallel>" in _trace(r))
    text, question = _trace(record), record["question"]
    paths = parse(text).blocks[0].paths
    letter, prices = re.match(r"\((\w)\) (\d+\+\d+)", paths[1].text).groups()
    other = re.match(r"\(\w\) (\d+\+\d+)", paths[2].text)[1]
    assert prices != other
    forged = text.replace(paths[1].text, paths[1].text.replace(prices, other, 1))
    assert forged.count(f"({letter}) {other}") == 1
    assert WORLD.block_splits(question, text) == [True]
    assert WORLD.block_splits(question, forged) == [False]


def test_the_split_studys_forced_prefix_keeps_the_failed_guess():
    """Bug: the prefix before the forced block drops deal (A)'s failed check, so the model is
    asked to split a search it never started."""
    from pr1lib.experiments.split import forced_prefixes

    prefixes = forced_prefixes(WORLD, HARD)
    assert len(prefixes) > 60
    for record, prefix in prefixes:
        deals, total = ww.parse_hard(record["question"])
        assert prefix.strip() == ww.line(0, deals.deals[0], total)
        assert prefix.strip().endswith(ww.NO)


def test_each_control_arm_trains_its_own_cold_start_with_its_own_rows(tmp_path):
    """Bug: the plain-SFT arm (or the serial one) starts from another arm's SFT folder or
    config; only an arm that says so (``sft_of``) shares one."""
    from pr1lib.experiments import controls

    for arm, spec in controls.ARMS.items():
        owner = spec.sft_of or arm
        assert controls.sft_folder(tmp_path, arm) == tmp_path / owner / "sft"
        assert controls.sft_folder(tmp_path, arm, 2) == tmp_path / owner / "sft-s2"
    plain = controls.sft_config("tinyworld", "smoke", "plain-sft")
    serial = controls.sft_config("tinyworld", "smoke", "serial")
    assert plain.plain_share == 1.0 and serial.trace_style == "serial"
    assert serial.plain_share != 1.0 and plain.trace_style != "serial"
    assert controls.sft_config("tinyworld", "smoke", "serial", seed=2).seed == 2


@pytest.mark.parametrize(
    "arm, variant, stage2",
    [("unseen", "unseen", True), ("unseen-s3", "unseen", False), ("serial-s3", "plain", False)],
)
def test_the_papers_unseen_curriculum_runs_stage_3_alone_with_every_step(
    tmp_path, monkeypatch, arm, variant, stage2
):
    """Bug: the paper's unseen curriculum (SFT, then Stage 3) runs Stage 2 after all; without
    it, Stage 3 takes the steps of both so the arms train as long. The same for its serial
    control, whose variant (plain) runs Stage 2 by default: the stages the curriculum trains."""
    from pr1lib.config import GRPOStageConfig
    from pr1lib.experiments import controls, curriculum

    trained = []

    def fake_grpo(cfg, init, out, **kw):
        trained.append((cfg.variant, cfg.stage, cfg.max_steps))
        metrics = {"hard": {"accuracy": 0.5}}
        return SimpleNamespace(result={"before": metrics, "after": metrics, "run_dir": str(out)})

    monkeypatch.setattr(curriculum, "run_grpo", fake_grpo)
    monkeypatch.setattr(curriculum, "finished_run", lambda *a: None)
    monkeypatch.setattr(controls, "cold_start", lambda *a: "start")
    monkeypatch.setattr(controls, "arm_splits", lambda *a: None)
    controls.run_arm("smoke", "tinyworld", arm, [0], out=tmp_path)
    steps = [GRPOStageConfig.for_stage(s, "smoke", variant=variant).max_steps for s in (2, 3)]
    assert trained == (
        [(variant, 2, steps[0]), (variant, 3, steps[1])] if stage2 else [(variant, 3, sum(steps))]
    )


def test_the_latency_bench_times_each_model_at_the_batch_it_reports(monkeypatch):
    """Bug: the bench times another batch size than the one it files the seconds under, or the
    other model: here each call's seconds encode its model and batch, and the report must file
    them where they came from."""
    from pr1lib.cli.bench import load_bench_script

    latency = load_bench_script("latency")
    monkeypatch.setattr(
        latency, "load_benchmark", lambda source, n, seed: [{"question": "q", "answer": "1"}] * n
    )
    monkeypatch.setattr(latency, "load_for_eval", lambda path, *a: (path, None))
    monkeypatch.setattr(latency, "chat_prompt", lambda question, tok, profile: question)
    monkeypatch.setattr(
        latency, "facts", lambda *a: {"mean_sequential_steps": 1.0, "mean_tokens": 1.0}
    )
    code = {"A": 1000.0, "B": 2000.0}

    def fake_answer(model, tok, prompts, cfg, batch):
        mode = "forked" if model == "B" else "seen"
        assert cfg.mode == mode  # each model decodes in the mode it trains with
        parts = {"seconds": {}, "total": 0.0, "steps": {}, "seconds_per_step": {}}
        return {"seconds": (code[model] + batch) * len(prompts), "texts": [], "breakdown": parts}

    monkeypatch.setattr("pr1lib.evaluation.latency.answer", fake_answer)  # the timer it runs on
    monkeypatch.setattr(latency, "median_breakdown", lambda rounds: rounds[0])
    out = latency.run(unseen="B", serial="A", quick=True)
    seconds = out["seconds_per_answer"]
    assert out["models"] == {"serial": "A", "unseen": "B"}
    for batch in ("1", "4"):
        assert seconds[batch]["serial"] == pytest.approx(1000.0 + int(batch))
        assert seconds[batch]["unseen"] == pytest.approx(2000.0 + int(batch))

"""``bench eval`` and ``bench limit`` smoke runs: one JSON object last, with the keys the README
and the result cards read (no timing is asserted: the machine is shared); ``bench latency``'s
report and ``bench --card``'s clean commit."""

from __future__ import annotations

import json

from pr1lib.cli import flags
from pr1lib.cli.bench import load_bench_script
from pr1lib.cli.main import build_parser, main
from pr1lib.decoding.clock import PARTS, Clock


def last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_bench_eval_quick_compares_the_two_paths(capsys):
    assert main(["bench", "eval", "--quick"]) == 0
    out = last_json(capsys)
    assert out["benchmark"] == "eval" and out["paths"] == ["before", "after"]
    for variant in ("seen", "unseen"):
        result = out[variant]
        assert (
            result["before"]["completions_per_s"] > 0 and result["after"]["completions_per_s"] > 0
        )
        assert result["same_samples"] is True  # the same algorithm samples the same
        assert result["accuracy_diff"] == 0
        assert result["after"]["accuracy"] == result["before"]["accuracy"]
        assert out[f"{variant}_speedup"] == result["speedup"] > 0
    assert out["speedup"] > 0 and out["cpu_speedup"] > 0 and out["same_samples"] is True
    assert out["command_check"]["command_speedup"] > 0


def test_bench_limit_quick_reports_every_batch_beside_the_limit(capsys):
    assert main(["bench", "limit", "--quick"]) == 0
    out = last_json(capsys)
    assert out["matmul_gflops"] > 0 and set(out["engine_over_limit"]) == {"8", "64", "256"}
    for batch in ("8", "64", "256"):
        row = out[batch]
        assert row["limit_tokens_per_s"] > row["engine_tokens_per_s"] > 0
        assert row["engine_over_limit"] == out["engine_over_limit"][batch]
        assert row["flops_per_token"] > 2 * 900_000  # the tiny model: about 0.9M weights a token
        assert row["kv_read_gb_per_s"] > 0 and row["attention_limit_tokens_per_s"] > 0


def test_every_benchmark_script_drops_the_known_noise_first():
    """Run directly (``.venv/bin/python benchmarks/limit.py``), a script drops the notes the CLI
    drops (``runtime.NOISE_LOGS``: bitsandbytes' offline kernel note, ...) before it loads a
    model; ``cli_help`` times ``--help`` alone and ``gpu_check`` runs on the GPU machine."""
    import ast
    from pathlib import Path

    scripts = Path(__file__).resolve().parents[1] / "benchmarks"
    checked = []
    for path in sorted(scripts.glob("*.py")):
        if path.stem in ("cli_help", "gpu_check"):
            continue
        tree = ast.parse(path.read_text())
        main_fn = next(f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "main")
        first = main_fn.body[0]
        assert ast.unparse(first) == "quiet_known_noise()", path.name
        checked.append(path.stem)
    assert {"eval", "grpo", "limit", "rollout", "tinyworld", "pretrain_tiny"} <= set(checked)


def test_bench_card_refuses_a_dirty_commit(monkeypatch, capsys):
    """A card records its commit: ``bench --card`` from changed files is one line, exit 2."""
    monkeypatch.setattr(flags, "git_commit", lambda: "d1c6a12+dirty")
    assert main(["bench", "latency", "--card", "speed-probe"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "clean commit" in err[0]
    monkeypatch.setattr(flags, "git_commit", lambda: "d1c6a12")  # clean: the check passes
    flags.check_flags(build_parser().parse_args(["bench", "latency", "--card", "speed-probe"]))


def test_latency_report_reads_the_ratio_beside_its_bounds():
    """``bench latency``'s JSON: medians, spreads, the steps bound and the token ratio, and a
    breakdown per model and batch with every phase of ``pr1lib.decoding.clock``."""
    latency = load_bench_script("latency")
    done = {
        "serial": {"mean_sequential_steps": 100.0, "mean_tokens": 100.0},
        "unseen": {"mean_sequential_steps": 50.0, "mean_tokens": 170.0},
    }
    clock = Clock()
    with clock.run(1):
        pass
    parts = {"1": {"serial": [clock.per_answer()] * 2, "unseen": [clock.per_answer()] * 2}}
    seconds = {"1": {"serial": [1.0, 3.0], "unseen": [0.5, 1.0]}}
    out = latency.report({"serial": "a", "unseen": "b"}, seconds, parts, done)
    assert out["seconds_per_answer"]["1"] == {"serial": 2.0, "unseen": 0.75}
    assert out["spread"]["1"]["serial"] == [1.0, 3.0]
    assert out["unseen_over_serial"]["1"] == 0.375
    assert (out["steps_bound"], out["token_ratio"]) == (0.55, 1.7)
    assert set(out["breakdown"]["1"]["unseen"]["seconds"]) == set(PARTS)

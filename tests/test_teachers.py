"""pr1lib.format.arithmetic and pr1lib.worlds.teachers: safe arithmetic, the rule teacher, the HF
teacher's plumbing, and pr1lib.data.chat_teacher's OpenAI-compatible teacher against a real HTTP
server on loopback (success, 429/500 with and without Retry-After, timeout, malformed JSON, a bad
key, a dead server, the rate limit). The full fault run is in test_teacher_faults.py.

Run: .venv/bin/python -m pytest tests/test_teachers.py -q -p no:cacheprovider
"""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pr1lib.data.chat_teacher import OpenAITeacher, RateLimiter
from pr1lib.data.hf_teacher import HFTeacher
from pr1lib.data.sources import load_source
from pr1lib.data.standin import StandInServer, closed_port
from pr1lib.format import arithmetic
from pr1lib.format.grammar import linearize, parallel_stats, validate
from pr1lib.format.prompts import linear_solution
from pr1lib.worlds import teachers

# ----------------------------------------------------------------------------- arithmetic


@pytest.mark.parametrize(
    "expr", ["__import__('os')", "2**10", "a+1", "(1).real", "[1][0]", "1 if 1 else 2", "'1'+'2'"]
)
def test_evaluate_refuses_anything_but_arithmetic(expr):
    with pytest.raises(ValueError):
        arithmetic.compute(expr)


numbers = st.integers(min_value=0, max_value=999) | st.sampled_from([0.5, 1.5, 2.25, 12.5])
ops = st.sampled_from(["+", "-", "*", "/"])


@settings(max_examples=200, deadline=None)
@given(st.lists(numbers, min_size=2, max_size=4), st.lists(ops, min_size=3, max_size=3))
def test_every_alternative_is_verified_and_reaches_the_same_value(nums, chosen):
    expr = str(nums[0]) + "".join(op + str(n) for op, n in zip(chosen, nums[1:]))
    try:
        value = eval(expr)  # the test builds this string itself from numbers
    except ZeroDivisionError:
        return
    result = arithmetic.format_number(value)
    for kind, text in arithmetic.alternatives(expr, result).items():
        assert arithmetic.check_arithmetic(text) == [], (kind, text)
        stated = re.findall(r"<<[^=]+=([^>]+)>>", text)
        assert stated and (kind == "inverse" or stated[-1] == result), (kind, text)
        assert text != f"{expr}=<<{expr}={result}>>{result}", (
            "an alternative must differ from the original"
        )


def test_alternatives_are_different_computations():
    alts = arithmetic.alternatives("12*3", "36")
    assert set(alts) == {"reorder", "inverse", "split", "repeat"}
    assert (
        alts["reorder"] == "3*12=<<3*12=36>>36" and alts["repeat"] == "12+12+12=<<12+12+12=36>>36"
    )
    assert arithmetic.alternatives("100-50-30-15", "5")["regroup"].startswith(
        "50+30+15=<<50+30+15=95>>95"
    )
    assert "distribute" in arithmetic.alternatives("(4+6)*3", "30")
    assert arithmetic.alternatives("7", "7") == {} and arithmetic.alternatives("2+2", "5") == {}


# ----------------------------------------------------------------------------- rule teacher


def _blocks(text):
    return re.findall(r"<Parallel>(.*?)</Parallel>\n<Summary>(.*?)</Summary>", text, re.S)


def test_rule_teacher_blocks_recompute_one_value_in_different_ways():
    problems = load_source("tinygsm-hard", limit=100) + load_source("tinygsm-easy", limit=100)
    traces = teachers.RuleTeacher(seed=3).generate(problems)
    assert all(t["error"] is None and t["teacher"].startswith("rule-s3-") for t in traces)
    for problem, trace in zip(problems, traces):
        text = trace["text"]
        assert validate(text) == [] and parallel_stats(text)["blocks"] == 1, text
        assert (
            text.endswith(f"Final Answer: {problem['answer']}")
            and arithmetic.check_arithmetic(text) == []
        )
        ((body, summary),) = _blocks(text)
        paths = re.findall(r"<Path>(.*?)</Path>", body)
        value = re.search(r"(-?[\d.]+)\.$", summary).group(1)
        assert 2 <= len(paths) <= 3 and len(set(paths)) == len(paths)
        computations = [frozenset(re.findall(r"<<([^=]+)=", p)) for p in paths]
        assert len(set(computations)) == len(paths), paths  # no two paths do the same sums
        assert all(value in p for p in paths), (value, paths)
        outside = re.sub(r"<Parallel>.*?</Summary>\n", "", text, flags=re.S)
        assert outside.strip() and "Path" not in outside


def test_rule_teacher_opens_with_the_reference_line_and_restates_its_calculation():
    problems = load_source("tinygsm-hard", limit=60)
    steps = [p["answer_text"].splitlines() for p in problems]
    first = [_blocks(t["text"])[0] for t in teachers.RuleTeacher(seed=2).generate(problems)]
    for lines, (body, summary) in zip(steps, first):
        path1 = re.findall(r"<Path>(.*?)</Path>", body)[0]
        assert path1 in lines  # the reference step itself, word for word
        calc = re.search(r"<<([^=]+=[^>]+)>>", path1).group(1)
        assert f"<<{calc}>>" in summary and summary.endswith(f"{calc.split('=')[1]}.")
    shuffled = [
        _blocks(t["text"])[0]
        for t in teachers.RuleTeacher(seed=2, original_path="any").generate(problems)
    ]
    assert (
        sum(
            re.findall(r"<Path>(.*?)</Path>", b)[0] not in lines
            for (b, _), lines in zip(shuffled, steps)
        )
        > 10
    )
    bare = teachers.RuleTeacher(seed=2, summary="value").generate(problems[:5])
    assert all(
        re.search(
            r"<Summary>Both paths give -?[\d.]+\.</Summary>|<Summary>All \w+ paths give -?[\d.]+\."
            r"</Summary>",
            t["text"],
        )
        for t in bare
    )
    with pytest.raises(ValueError, match="original_path"):
        teachers.RuleTeacher(original_path="middle")
    checks = teachers.RuleTeacher(seed=2, kinds=("inverse",)).generate(problems[:20])
    assert all(
        len(re.findall(r"; check: ", b)) == 1 for b, _ in (_blocks(t["text"])[0] for t in checks)
    )
    with pytest.raises(ValueError, match="kinds"):
        teachers.RuleTeacher(kinds=("guess",))


def test_linearized_rule_trace_is_the_plain_reference_solution():
    problems = load_source("tinygsm-hard", limit=50) + load_source("tinygsm-easy", limit=50)
    for problem, trace in zip(problems, teachers.RuleTeacher(seed=4).generate(problems)):
        assert linearize(trace["text"]) == linear_solution(problem["answer_text"])


def test_inverse_path_computes_before_it_checks():
    """A path must not open with the result: under the unseen mask it cannot read it from a
    sibling."""
    assert (
        arithmetic.alternatives("31-13", "18")["inverse"]
        == "31-13=<<31-13=18>>18; check: 18+13=<<18+13=31>>31."
    )


def test_rule_teacher_is_deterministic_and_seed_dependent():
    problems = load_source("tinygsm-hard", limit=40)
    a, b = (
        teachers.RuleTeacher(seed=0).generate(problems),
        teachers.RuleTeacher(seed=0).generate(problems),
    )
    c = teachers.RuleTeacher(seed=1).generate(problems)
    assert [t["text"] for t in a] == [t["text"] for t in b]
    # paths differ; the step is (mostly) fixed
    assert sum(x["text"] != y["text"] for x, y in zip(a, c)) >= 5
    d, e = (teachers.RuleTeacher(seed=s, step_choice="any").generate(problems) for s in (0, 1))
    assert sum(x["text"] != y["text"] for x, y in zip(d, e)) > 20  # the step is drawn too


def test_rule_teacher_name_keys_the_cache_on_its_options(tmp_path):
    """A cache written by a teacher with other options is not reused (it once was: same name)."""
    from pr1lib.data.traces import generate_traces

    problems = load_source("tinygsm-hard", limit=12)
    first = generate_traces(teachers.RuleTeacher(step_choice="any"), problems, tmp_path / "t.jsonl")
    again = generate_traces(teachers.RuleTeacher(), problems, tmp_path / "t.jsonl")
    assert (
        teachers.RuleTeacher().name
        == teachers.RuleTeacher(seed=0).name
        != teachers.RuleTeacher(step_choice="any").name
    )
    assert [t["text"] for t in again] == [
        t["text"] for t in teachers.RuleTeacher().generate(problems)
    ]
    assert [t["text"] for t in first] != [t["text"] for t in again]


def test_rule_teacher_branches_on_the_rarest_operator():
    """Division is the rarest step in word problems, so a block on it is preferred: with blocks
    drawn uniformly the tiny model's summaries learned to turn ``/`` into ``*``."""
    p = {
        "id": "r",
        "question": "?",
        "answer": "6",
        "answer_text": "He has 3*10 = <<3*10=30>>30 coins.\nEach pile has 30/5 = "
        "<<30/5=6>>6.\n#### 6",
    }
    for seed in range(8):
        ((body, summary),) = _blocks(teachers.RuleTeacher(seed=seed).generate([p])[0]["text"])
        assert "30/5=<<30/5=6>>6" in summary
    anywhere = {
        _blocks(teachers.RuleTeacher(seed=s, step_choice="any").generate([p])[0]["text"])[0][1]
        for s in range(8)
    }
    assert any("3*10" in s for s in anywhere) and any("30/5" in s for s in anywhere)
    with pytest.raises(ValueError, match="step_choice"):
        teachers.RuleTeacher(step_choice="last")


def test_rule_teacher_without_reference_or_without_arithmetic():
    no_ref = {"id": "d1", "question": "Find x.", "answer_text": "", "answer": "3"}
    words = {
        "id": "w1",
        "question": "?",
        "answer_text": "Let x be 2.\nSo x is 2.\n#### 2",
        "answer": "2",
    }
    err, plain = teachers.RuleTeacher().generate([no_ref, words])
    assert err["text"] == "" and "no reference solution" in err["error"]
    assert plain["error"] is None and plain["text"] == linear_solution(words["answer_text"])


def test_strip_thinking_keeps_the_final_part_only():
    assert teachers.strip_thinking("<think>a</think>b</think>\n c") == "c"
    assert teachers.strip_thinking(" no think ") == "no think"


# ----------------------------------------------------------------------------- HF teacher


def test_hf_teacher_batches_and_decodes_with_a_tiny_random_model():
    from pr1lib.decoding.models import build_random_tiny, train_tiny_tokenizer
    from pr1lib.decoding.tokens import add_parallel_tags

    tokenizer = train_tiny_tokenizer(
        ["Problem: What is 2+3?\nSolution:\nFinal Answer: 5"] * 20, vocab_size=300
    )
    model, tokenizer = build_random_tiny(seed=0, tokenizer=tokenizer)
    add_parallel_tags(tokenizer, model)
    teacher = HFTeacher(
        model, tokenizer, batch_size=2, max_new_tokens=6, prompt_style="tiny", seed=1
    )
    problems = load_source("tinygsm-easy", limit=3)
    traces = teacher.generate(problems)
    assert [t["id"] for t in traces] == [p["id"] for p in problems]
    assert all(t["teacher"] == teacher.name and t["teacher"].startswith("hf:") for t in traces)
    assert all((t["text"] and t["error"] is None) or t["error"] == "empty output" for t in traces)
    assert all("<|endoftext|>" not in t["text"] for t in traces)
    # seeded per batch: the same batch, the same samples
    assert teacher.generate(problems) == traces


# ---------------------------------------------------------------------- OpenAI-compatible teacher


@pytest.fixture(scope="module")
def problems():
    return load_source("tinygsm-easy", limit=4)


def _teacher(server, **kwargs):
    kwargs = {"timeout": 5.0, "concurrency": 1, **kwargs}
    return OpenAITeacher(base_url=server.base_url, model="stand-in", **kwargs)


def _gaps(server):
    return [b - a for a, b in zip(server.arrivals, server.arrivals[1:])]


def test_openai_success_matches_the_rule_teacher_behind_the_stand_in(problems):
    with StandInServer(problems) as server:
        traces = _teacher(server, concurrency=3).generate(problems)
    expected = teachers.RuleTeacher().generate(problems)
    assert [t["text"] for t in traces] == [t["text"] for t in expected]  # thinking stripped
    assert all(t["error"] is None and t["teacher"] == "openai:stand-in" for t in traces)
    assert server.requests == len(problems)


def test_openai_429_and_500_are_retried_after_retry_after(problems):
    with StandInServer(problems, faults=["429", "500"], retry_after="0.05") as server:
        (trace,) = _teacher(server).generate(problems[:1])
    assert trace["error"] is None and "<Parallel>" in trace["text"]
    # Retry-After (0.05 s) wins over the client's own first backoff (0.375-0.5 s)
    assert server.requests == 3 and all(0.04 < gap < 0.3 for gap in _gaps(server)), _gaps(server)


def test_openai_backs_off_without_retry_after(problems):
    with StandInServer(problems, faults=["500"], retry_after=None) as server:
        (trace,) = _teacher(server).generate(problems[:1])
    assert trace["error"] is None and server.requests == 2
    # the client's exponential backoff: 0.5 s less up to 25 % jitter
    assert 0.3 < _gaps(server)[0] < 1.5


def test_openai_retries_give_up_into_an_error_trace(problems):
    with StandInServer(problems, faults=["429"] * 3, retry_after="0.01") as server:
        (trace,) = _teacher(server, max_retries=2).generate(problems[:1])
    assert (
        trace["text"] == ""
        and trace["kind"] == "rate_limited"
        and trace["error"].startswith("rate_limited: HTTP 429")
    )
    assert server.requests == 3


def test_openai_dead_server_is_a_connection_failure_in_one_trace_per_problem(problems):
    teacher = OpenAITeacher(
        base_url=f"http://127.0.0.1:{closed_port()}/v1", model="m", max_retries=0
    )
    start = time.monotonic()
    traces = teacher.generate(problems[:2])
    assert [t["kind"] for t in traces] == ["connection"] * 2 and "ConnectError" in traces[0][
        "error"
    ]
    assert time.monotonic() - start < 3  # refused at once, not 15 s per problem


def test_openai_timeout_then_retry(problems):
    with StandInServer(problems, faults=["timeout", "timeout"], hang_s=1.0) as server:
        (failed,) = _teacher(server, timeout=0.3, max_retries=0).generate(problems[:1])
        (recovered,) = _teacher(server, timeout=0.3, max_retries=1).generate(problems[:1])
    assert failed["kind"] == "timeout" and failed["error"].startswith("timeout: no response byte")
    assert recovered["error"] is None and server.requests == 3


def test_openai_malformed_json_is_an_error_trace_without_retry(problems):
    with StandInServer(problems, faults=["malformed"]) as server:
        teacher = _teacher(server)
        (trace,) = teacher.generate(problems[:1])
        assert server.requests == 1
        (again,) = teacher.generate(problems[:1])  # the next request is served normally
    assert (
        trace["text"] == ""
        and trace["kind"] == "bad_response"
        and "JSONDecodeError" in trace["error"]
    )
    assert again["error"] is None


def test_openai_bad_key_stops_the_run_and_hands_over_what_it_finished(problems):
    with StandInServer(problems, plan={problems[1]["id"]: ["401"]}) as server:
        with pytest.raises(teachers.TeacherError, match="HTTP 401") as stop:
            _teacher(server).generate(problems[:3])
    assert [t["id"] for t in stop.value.traces] == [p["id"] for p in problems[:2]]
    assert stop.value.traces[0]["error"] is None and server.requests == 2  # the third never asked


def test_openai_settings_from_the_environment(monkeypatch):
    for key in ("OPENAI_BASE_URL", "PR1_TEACHER_MODEL", "OPENAI_MODEL"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(ValueError, match="OPENAI_BASE_URL"):
        OpenAITeacher()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1/")
    monkeypatch.setenv("PR1_TEACHER_MODEL", "my-model")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    teacher = OpenAITeacher()
    assert (teacher.base_url, teacher.model, teacher.api_key) == (
        "http://127.0.0.1:8000/v1",
        "my-model",
        "sk-test",
    )
    with pytest.raises(ValueError, match="concurrency must be a whole number above 0"):
        OpenAITeacher(concurrency=0)


def test_rate_limiter_spaces_requests_evenly():
    now = [0.0]
    slept = []

    def sleep(s):
        slept.append(s)
        now[0] += s

    limiter = RateLimiter(120, clock=lambda: now[0], sleep=sleep)  # one every 0.5 s
    waits = [limiter.wait() for _ in range(4)]
    assert waits == [0.0, 0.5, 0.5, 0.5] and now[0] == 1.5


def test_openai_rate_limit_and_concurrency_reach_the_server(problems):
    with StandInServer(problems) as server:
        start = time.monotonic()
        # one start every 0.1 s
        _teacher(server, requests_per_minute=600, concurrency=4).generate(problems)
    # starts at 0, 0.1, 0.2, 0.3 s (arrivals jitter by the first connection's set-up; unlimited: ~10
    # ms apart)
    assert server.arrivals[-1] - start >= 0.3 and server.arrivals[-1] - server.arrivals[0] > 0.2, (
        _gaps(server)
    )
    with StandInServer(problems, faults=["timeout"] * 4, hang_s=0.5) as server:
        start = time.monotonic()
        traces = _teacher(server, concurrency=4).generate(problems)
    # four hangs at once
    assert all(t["error"] is None for t in traces) and time.monotonic() - start < 1.4

"""Every reward and checker is total: any input scores (non-strings as wrong), nothing raises, and
parsing stays linear, so a 200k-character completion costs milliseconds, not seconds.

This is the one place a time bound is the specification (issue 21: "under 100 ms per call"). Each
call is timed on its own; the test asserts the median under 100 ms, over all calls and over the
200k-character ones alone, and every call under 1 s: a 10x margin for a loaded 2-core machine.
The heap that earlier tests leave behind (models, tokenizers) is frozen out of the garbage collector
while timing (``gc.freeze``), so a full collection of *their* objects is not billed to a grader.
Run alone: .venv/bin/python -m pytest tests/test_totality.py -q -s (``-s`` prints the numbers)
"""

from __future__ import annotations

import gc
import statistics
import time
from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pr1lib.format import grammar as F
from pr1lib.rewards import functions as R
from pr1lib.rewards import graders as G
from pr1lib.rewards import modes as M
from pr1lib.training import verl

BIG = 200_000
MEDIAN_MS, MAX_MS = 100.0, 1000.0


def big_inputs(n: int = BIG) -> list[str]:
    """Hand-made worst cases for the regexes, the tag parsers, the brace matchers and int()."""
    unit = lambda s: s * (n // len(s))  # noqa: E731 - a string of about n characters
    return [
        unit("<Path></Path><Parallel>"),
        unit("</Path>"),
        unit("</Summary>x"),
        unit("<Parallel>") + unit("<Path>"),
        unit("<Parallel><Path>a</Path><Path>b</Path></Parallel>\n<Summary>s</Summary>"),
        unit("Final Answer: 12\n"),
        unit("final answer :"),
        unit("<Path>Final Answer: 3</Path>"),
        unit("\\boxed{"),
        unit("<Path>\\boxed{1}</Path>"),
        unit("\\boxed{1}"),
        unit("{"),
        unit("}"),
        unit("\\text{"),
        unit("\\text{a}"),
        unit("$"),
        unit("="),
        unit("frac"),
        unit("sqrt"),
        "Final Answer:" + unit(" "),
        "Final Answer:" + unit("\n"),
        "Final Answer: $" + unit("a"),
        "Final Answer: " + unit("9"),
        "Final Answer: " + unit("1,000"),
        "Final Answer: -" + unit("0") + ".5",
        "Final Answer: \\boxed{" + unit("{"),
        unit("Final Answer: \\text{") + "}",
        unit("a ") + "Final Answer: 12",
        unit("The answer is 12 or 11. "),
        unit("\ud800"),
        unit("\x00"),
        unit("١٢"),
    ]


def odd_inputs() -> list:
    """Non-strings, odd strings and numbers past Python's int-string limit (4,300 digits)."""
    return [
        None,
        b"Final Answer: 12",
        bytearray(b"12"),
        ["Final Answer: 12"],
        ("Final Answer: 12",),
        {"content": 5},
        {"role": "assistant", "content": "Final Answer: 12"},
        [{"role": "assistant", "content": None}],
        [{"role": "assistant", "content": [{"text": 5}, "x", None]}],
        [{"content": {"a": 1}}],
        [None, 3],
        12,
        12.0,
        -0.0,
        float("nan"),
        float("inf"),
        True,
        10**5000,
        object(),
        set(),
        SimpleNamespace(a=1),
        "",
        " ",
        "\n",
        "Final Answer:",
        "Final Answer: " + "9" * 5000,
        "9" * 5000,
        "Final Answer: " + "9" * 4301,
        "Final Answer: 12",
        "Final Answer:\n12",
        "Final Answer: The answer is 12 or 11",
    ]


def golds() -> list:
    return [
        "12",
        12,
        "9" * 5000,
        10**5000,
        None,
        b"12",
        ["12"],
        {"a": 1},
        "",
        "\\frac{1}{2}",
        float("nan"),
    ]


def calls(x, gold) -> list:
    """(name, thunk) for every reward and checker, on completion ``x`` and gold ``gold``."""
    state = SimpleNamespace(global_step=8)
    out = [
        (f"{m}/{g}", lambda m=m, g=g: M.reward_for(m, grader=g)([x], [gold], data_source=["gsm8k"]))
        for m in R.BASE_MODES
        for g in G.GRADERS
    ]
    out += [
        (
            f"alternating/{g}",
            lambda g=g: R.alternating_reward(grader=g)([x], [gold], trainer_state=state),
        )
        for g in G.GRADERS
    ]
    out += [
        (f"score/{m}", lambda m=m: R.score(x, gold, m, "official", "aime25")) for m in R.BASE_MODES
    ]
    out += [
        (
            f"correct/{name}/{src}/{boxed}",
            lambda g=g, src=src, boxed=boxed: g.correct(x, gold, src, boxed),
        )
        for name, g in G.GRADERS.items()
        for src in ("gsm8k", "aime25")
        for boxed in (False, True)
    ]
    out += [(f"valid/{name}", lambda g=g: g.valid(x)) for name, g in G.GRADERS.items()]
    out += [
        ("check", lambda: G.check("aime25", x, gold)),
        ("minerva_normalize", lambda: G.minerva_normalize(x)),
        ("last_boxed", lambda: G.last_boxed(x)),
        ("official_answer/gsm8k", lambda: G.official_answer(x, "gsm8k")),
        ("project_answer", lambda: G.project_answer(x)),
        ("extract_answer", lambda: F.extract_answer(x)),
        ("answers_match", lambda: F.answers_match(x, gold)),
        ("answers_match/gold", lambda: F.answers_match(gold, x)),
        ("number_key", lambda: F.number_key(x)),
        ("as_number", lambda: F.as_number(x)),
        ("validate/strict", lambda: F.validate(x, True)),
        ("validate/official", lambda: F.validate(x, False)),
        ("parallel_stats", lambda: F.parallel_stats(x)),
        (
            "verl",
            lambda: verl.compute_score(
                "pr1/gsm8k", x, gold, {"reward_mode": "tiered"}, grader="official"
            ),
        ),
    ]
    return out


def show(x) -> str:
    """A short label for any input (``str`` of a 5,000-digit int would itself raise)."""
    return repr(x[:40]) if isinstance(x, str) else type(x).__name__


def run_all(x, gold, times: list[tuple[float, str]]) -> None:
    """Every call on ``x``, timed one by one; a call that raises fails the test with its name."""
    for name, thunk in calls(x, gold):
        start = time.perf_counter()
        try:
            thunk()
        except Exception as err:  # the point: report which call raised, on what
            raise AssertionError(f"{name} raised {type(err).__name__}: {err} on {show(x)}") from err
        times.append((1000 * (time.perf_counter() - start), f"{name} on {show(x)}"))


FRAGMENTS = st.sampled_from(
    [
        "<Parallel>",
        "</Parallel>",
        "<Path>",
        "</Path>",
        "<Summary>",
        "</Summary>",
        "Final Answer:",
        "final answer :",
        " 12",
        "11",
        "\n",
        " ",
        "$",
        "\\boxed{",
        "}",
        "{",
        "\\text{",
        "=",
        ",",
        ".",
        "or",
        "The answer is",
        "\\frac12",
        "9" * 50,
    ]
)
INPUTS = st.one_of(
    st.lists(FRAGMENTS, max_size=40).map("".join),
    st.text(max_size=300),
    st.none(),
    st.binary(max_size=50),
    st.integers(),
    st.floats(),
    st.lists(st.text(max_size=20), max_size=3),
    st.dictionaries(st.text(max_size=5), st.text(max_size=20), max_size=3),
)


def test_fuzz_every_reward_and_checker_is_total_and_fast():
    """≥ 2,000 inputs (hypothesis + hand-made) through ~40 rewards and checkers each."""
    times, big_times, seen = [], [], []
    gc.collect()
    gc.freeze()
    try:
        _fuzz_and_time(times, big_times, seen)
    finally:
        gc.unfreeze()
    median = statistics.median(ms for ms, _ in times)
    big_median = statistics.median(ms for ms, _ in big_times)
    worst, big_p95 = (
        max(times + big_times),
        statistics.quantiles([ms for ms, _ in big_times], n=20)[-1],
    )
    print(
        f"\n{len(seen)} inputs, {len(times) + len(big_times)} calls; median {median:.3f} ms, "
        f"200k-char median {big_median:.1f} ms (p95 {big_p95:.0f} ms), slowest "
        f"{worst[0]:.1f} ms ({worst[1]})"
    )
    assert len(seen) >= 2000
    assert median < MEDIAN_MS and big_median < MEDIAN_MS, (median, big_median)
    assert worst[0] < MAX_MS, worst


def _fuzz_and_time(times: list, big_times: list, seen: list) -> None:
    # import math-verify and sympy first: a one-off, not a call
    F.answers_match("\\frac{1}{2}", "0.5")

    @settings(
        max_examples=1700,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(INPUTS, st.sampled_from(golds()))
    def fuzz(x, gold):
        seen.append(x)
        run_all(x, gold, times)

    fuzz()
    for x in odd_inputs():
        for gold in golds():
            seen.append(x)
            run_all(x, gold, times)
    for x in big_inputs():
        seen.append(x)
        run_all(x, "12", big_times)


def test_non_strings_score_as_wrong_and_invalid():
    for x in odd_inputs()[:21]:  # the non-strings
        for mode in R.BASE_MODES:
            for grader in G.GRADERS:
                assert (
                    R.score(x if not isinstance(x, (list, dict)) else 7, "12", mode, grader) == -1.0
                )
        assert not any(
            g.valid(x) or g.correct(x, "12") for g in G.GRADERS.values() if not isinstance(x, str)
        )


def test_huge_numbers_are_compared_without_int():
    digits = "9" * 5000
    assert R.accuracy_reward(["Final Answer: " + digits], [digits]) == [1.0]
    assert R.accuracy_reward(["Final Answer: " + digits], [digits + "8"]) == [-1.0]
    assert R.accuracy_reward(["Final Answer: 12"], [10**5000]) == [-1.0]
    assert F.as_number(digits) is None and F.number_key(digits) == ("", digits, "")

"""Solutions to the exercises of notebook 02 (the cold-start data).

Each ``exercise_N(profile)`` does the exercise and returns what it found; its docstring answers
the question in words. ``check_exercise_N(found)`` states what a right answer must show (the tests
call both). Run them all with ``python solutions/02_cold_start_data.py [profile]``.

They read TinyGSM (generated) and GSM8K when a copy is found (``PR1_DATA_DIR``); without one,
exercises 1 and 2 work on TinyGSM alone. Exercise 4 needs a GPU at full size: on ``smoke`` it
runs ``HFTeacher`` on the profile's random model, which shows the mechanics only.
"""

from __future__ import annotations

import re
from collections import Counter

from pr1lib.config import ColdStartConfig
from pr1lib.data import coldstart
from pr1lib.data import sources as data
from pr1lib.data.chat_teacher import OpenAITeacher
from pr1lib.data.hf_teacher import HFTeacher
from pr1lib.data.standin import StandInServer
from pr1lib.data.traces import generate_traces
from pr1lib.decoding.models import load_policy
from pr1lib.decoding.tokens import add_parallel_tags
from pr1lib.store.paths import runs_dir
from pr1lib.worlds.teachers import ANNOTATION, RuleTeacher, alternatives


def sources(profile: str, n: int | None = None, world: str = "tinygsm") -> dict[str, list[dict]]:
    """GSM8K (when a copy is found) and both tiers of ``world``, ``n`` problems each: TinyGSM
    (GSM8K's shape, what the GSM8K rule teacher reads) or TinyWorld (notebook 04's cold start)."""
    n = n or (100 if profile == "smoke" else ColdStartConfig.for_profile(profile).limit or 2000)
    found = {
        f"{world}-{t}": data.load_source(f"{world}-{t}", limit=n, seed=0) for t in ("easy", "hard")
    }
    try:
        return {"gsm8k": data.load_gsm8k("train", limit=n), **found}
    except data.DataNotFoundError:
        return found


# ----------------------------------------------------------------------------- exercise 1
def exercise_1(profile: str = "smoke") -> dict:
    """``RuleTeacher(extra_path_rate=1.0)``: how many blocks get three paths, and which never can?

    A third path needs **two** alternative computations of the step that gets the block. Every
    step with two or more (a product: another order, a split, repeated addition, the inverse;
    a sum: another order, the inverse) now gets three paths. A **division** or a
    **subtraction** has one alternative only (the inverse check), so their blocks always have
    two paths. Since the block goes on the step with the rarest operator
    (``step_choice="rare_op"``: division, then subtraction, addition, multiplication), a
    problem with any division or subtraction step can never have three.
    """
    rule = RuleTeacher(seed=0, extra_path_rate=1.0)
    by_op, count = Counter(), Counter()
    for problems in sources(profile).values():
        for trace in rule.generate(problems):
            summary = re.search(r"<Summary>.*?</Summary>", trace["text"] or "")
            if not summary or trace["error"]:
                continue
            expr, value = ANNOTATION.findall(summary.group())[0]
            paths = trace["text"].count("<Path>")
            n_alts = len(alternatives(expr, value))
            count[paths] += 1
            by_op[(re.sub(r"[\d.() ]", "", expr)[:1] or "?", n_alts, paths)] += 1
    return {"blocks by path count": dict(count), "by (operator, alternatives, paths)": dict(by_op)}


def check_exercise_1(found: dict) -> None:
    assert found["blocks by path count"].get(3, 0) > 0
    for (op, n_alts, paths), _ in found["by (operator, alternatives, paths)"].items():
        assert paths == (3 if n_alts >= 2 else 2), (op, n_alts, paths)  # rate 1: always when able
        if op in "/-":
            assert paths == 2, op


# ----------------------------------------------------------------------------- exercise 2
def exercise_2(profile: str = "smoke") -> dict:
    """``max_tokens=256`` on GSM8K and both TinyWorld tiers: which loses most, and why the tiny
    tokenizer counts more than ``chars/4``.

    **TinyWorld-hard loses every row**: its search block writes four guess lines, each with a sum
    and a check, about 300 tokens with the prompt. **GSM8K** loses most of its rows (measured on
    2,000 problems: 1,824): long questions and worked solutions, and the block repeats one step's
    computation two or three times. **TinyWorld-easy** loses nothing: two short paths. The tiny
    tokenizer counts **more** tokens than ``chars/4`` because it has a 512-entry vocabulary trained
    on its world's text and splits **every digit into its own token**: a trace is mostly numbers
    and ``<<a+b=c>>`` annotations, where four characters are up to four tokens, and any word outside
    the small vocabulary falls apart into pieces (TinyWorld-hard, the most digits: about 0.35
    chars/4 per token). A large BPE (Qwen's 151k) comes much closer to chars/4.
    """
    config = ColdStartConfig.for_profile(profile)
    tok, found = coldstart.budget_tokenizer(profile), {}
    for name, problems in sources(profile, world="tinyworld").items():
        rule = coldstart.make_teacher(config.replace(source=name))  # the world's own teacher
        traces = rule.generate(problems)
        texts = [t["text"] for t in traces if t["text"]]
        row = {
            "chars/4 per token": sum(map(len, texts))
            / 4
            / sum(coldstart.count_tokens(t, tok) for t in texts)
        }
        for budget in (config.max_tokens, 256):
            kept, rejected = coldstart.filter_traces(
                problems, traces, config.prompt_style, budget, tok
            )
            row[budget] = {
                "kept": len(kept),
                "too_long": sum(r["reason"] == "too_long" for r in rejected),
            }
        found[name] = row
    return {"budget": config.max_tokens, "by source": found}


def check_exercise_2(found: dict) -> None:
    rows, budget = found["by source"], found["budget"]
    for name, row in rows.items():
        assert row[256]["too_long"] >= row[budget]["too_long"], name
        assert row["chars/4 per token"] < 1, name  # the tokenizer counts more than chars/4
    lost = {name: row[256]["too_long"] for name, row in rows.items()}
    assert lost["tinyworld-hard"] == rows["tinyworld-hard"][budget]["kept"]  # every row it kept
    assert lost["tinyworld-hard"] == max(lost.values()) and lost["tinyworld-easy"] == 0
    if "gsm8k" in lost:
        assert lost["gsm8k"] > rows["gsm8k"][256]["kept"]  # most of GSM8K goes


# ----------------------------------------------------------------------------- exercise 3
def exercise_3(profile: str = "smoke", n: int = 4) -> dict:
    """``faults=["malformed", "timeout"]`` with ``timeout=0.5``: predict each trace, then rerun.

    With one request at a time (``concurrency=1``; with more, which problem meets which fault
    depends on arrival order) the faults go to the first two requests. Problem 1's request gets
    a 200 whose body is not JSON: not a transient fault, so its trace **records the failure at
    once** (``bad_response``), no retry. Problem 2's request hangs for 2 s: after 0.5 s without
    a byte the client gives up and **retries**, and the retry is served: a normal trace. The
    rest are served at once. So n + 1 requests, one failed trace. A second run through the same
    cache asks **only problem 1** again (failures are not cached as done) and completes it.
    """
    problems = data.load_source("tinygsm-easy", limit=n, seed=0)
    cache = runs_dir() / f"02_cold_start_data-{profile}" / "exercise-3" / "traces.jsonl"
    cache.unlink(missing_ok=True)
    with StandInServer(problems, faults=["malformed", "timeout"]) as server:
        client = OpenAITeacher(
            base_url=server.base_url, model="stand-in", timeout=0.5, concurrency=1
        )
        first = generate_traces(client, problems, cache)
        requests = server.requests
    with StandInServer(problems) as server:
        client = OpenAITeacher(base_url=server.base_url, model="stand-in", concurrency=1)
        second = generate_traces(client, problems, cache)
        asked_again = list(server.asked)
    return {
        "ids": [p["id"] for p in problems],
        "first requests": requests,
        "first": [(t["error"] and t.get("kind")) or "ok" for t in first],
        "asked again": asked_again,
        "second": [t["error"] or "ok" for t in second],
    }


def check_exercise_3(found: dict) -> None:
    n = len(found["ids"])
    assert found["first"] == ["bad_response"] + ["ok"] * (n - 1)
    assert found["first requests"] == n + 1  # the timed-out request was retried, once
    assert found["asked again"] == found["ids"][:1]  # only the failure
    assert found["second"] == ["ok"] * n


# ----------------------------------------------------------------------------- exercise 4
def exercise_4(profile: str = "smoke") -> dict:
    """``HFTeacher`` against the rule teacher on the same GSM8K problems: rejection reasons.

    The rule teacher fails only where it has nothing to branch on (``no_block``) or a trace is
    too long: it recomputes every annotation, so it never writes a wrong answer or a malformed
    block. An LLM fails the **format checks** most: a block without its ``<Summary>``, text
    between ``</Parallel>`` and the summary, a single path, or no block at all
    (``invalid_format``, then ``no_block``), far more often than the answer (the paper's own
    teacher kept 83.7 % of GSM8K traces on format alone). Which of the two leads depends on the
    model: run this with ``profile="colab"`` on a GPU (32 problems, Qwen3-1.7B in 4 bit) and
    read ``found["hf"]``. Where the profile names no teacher model (``smoke``, ``tiny``) the
    teacher is the random model: every trace fails, and the first check it fails is a format one.
    """
    config = ColdStartConfig.for_profile(profile)
    problems = next(iter(sources(profile, config.llm_limit).values()))
    if not config.teacher_model:  # smoke and tiny name no teacher: the random model stands in
        model, tok, _ = load_policy("smoke")
        add_parallel_tags(tok, model)
        llm = HFTeacher(model, tok, max_new_tokens=32, prompt_style=config.prompt_style)
    else:
        llm = HFTeacher(
            config.teacher_model,
            load_in_4bit=config.load_in_4bit,
            max_new_tokens=config.max_new_tokens,
        )
    found = {"n": len(problems)}
    for name, teacher in (("rule", RuleTeacher(seed=0)), ("hf", llm)):
        _, rejected = coldstart.filter_traces(
            problems, teacher.generate(problems), config.prompt_style, config.max_tokens
        )
        found[name] = dict(Counter(r["reason"] for r in rejected).most_common())
    return found


def check_exercise_4(found: dict) -> None:
    assert sum(found["hf"].values()) >= sum(found["rule"].values())
    assert not {"wrong_answer", "invalid_format"} & set(found["rule"])  # the rule never errs so
    top = max(found["hf"], key=found["hf"].get)
    assert top in ("invalid_format", "no_block"), found["hf"]


if __name__ == "__main__":
    import sys

    for n in (1, 2, 3, 4):
        print(f"exercise {n}:", globals()[f"exercise_{n}"](*sys.argv[1:2]))

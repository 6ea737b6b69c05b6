"""Can a PlanWorld model carry out a plan wider than any it learned? Plans forced by width.

RL can only reward a width whose block works. Here the model gets each held-out hard problem's
prompt and a plan of its first w deals (``Check (A), ..., (X)``, written for it), its first
completion token is forced to ``<Parallel>`` and it writes the rest at T = 1 (one sample per
problem, the forked engine opening one path per planned deal, labels forced as in RL). Per width:

- ``accuracy``: how often the block's answer is right, against ``reach``, the share of problems
  whose answer the plan holds (a block that works finds every one of them);
- ``found``: how often a path checked the right deal and marked it ✓ (``path_found``): where
  ``accuracy`` falls below it, the summary lost what a path found;
- ``valid_ratio``: strictly valid completions; ``split_rate``: blocks whose paths each checked
  their own deal with its own prices (``planworld.block_shares``).

A cold start whose plans name at most three deals writes working blocks up to three paths; how far
past that its blocks still work is what this measures (docs/planworld.md, "Regimes tried").

``python -m pr1lib study plans --world planworld --model RUN --widths 2 3 4 6 10 --n 100``
"""

from __future__ import annotations

import statistics
from typing import Any

from pr1lib import worlds
from pr1lib.data.evalsets import load_benchmark
from pr1lib.experiments import StudyRun
from pr1lib.experiments.blockcost import sample
from pr1lib.format.plans import LETTERS, plan_line
from pr1lib.format.prompts import chat_prompt

WORLD = "planworld"  # the world whose plans it forces
WIDTHS = (2, 3, 4, 6, 10)  # the tiers' widths (TIER_WIDTHS)
N = 100


def reach(question: str, width: int) -> bool:
    """Whether the answer of ``question`` lies among its first ``width`` deals.

    >>> from pr1lib.worlds import planworld
    >>> q = planworld.generate(1, "hard", "test", seed=0)[0]["question"]
    >>> reach(q, 10), reach(q, 0)
    (True, False)
    """
    from pr1lib.worlds import planworld

    deals, total, candidates = planworld.parse_question(question)
    return planworld.solve(deals, total, candidates[:width]) is not None


def path_found(text: str, letter: str) -> bool:
    """Whether a path of the first block in ``text`` checked deal ``letter`` and marked it ✓.

    >>> path_found("<Parallel><Path>(A) 1+2=3 vs 4 ✗</Path><Path>(B) 2+2=4 vs 4 ✓ B</Path>"
    ...            "</Parallel>\\n<Summary>A</Summary>", "B")
    True
    """
    from pr1lib.format.grammar import parse
    from pr1lib.worlds.wideworld import OK

    blocks = parse(text).blocks
    return bool(blocks) and any(p.text.strip().endswith(f"{OK} {letter}") for p in blocks[0].paths)


def forced_plan(
    model: Any,
    tokenizer: Any,
    width: int,
    n: int = N,
    seed: int = 0,
    temperature: float = 1.0,
    hide_plan: bool = False,
) -> dict[str, Any]:
    """One width: the forced plan of the first ``width`` deals on ``n`` hard problems (module doc;
    ``hide_plan``: for a model trained with hidden plans).

    >>> from pr1lib.decoding.models import build_random_tiny
    >>> from pr1lib.decoding.tokens import add_parallel_tags
    >>> model, tok = build_random_tiny(seed=0); _ = add_parallel_tags(tok, model)
    >>> out = forced_plan(model.eval(), tok, 2, n=2)
    >>> out["width"], out["n"], out["split_rate"]  # random weights: no path names its deal
    (2, 2, 0.0)
    """
    from pr1lib.evaluation.metrics import completion_metrics

    world = worlds.get(WORLD)
    records = load_benchmark(world.source("hard"), n, seed=0)
    from pr1lib.worlds import planworld

    plan = plan_line(list(LETTERS[:width]), span=planworld.SPANS) + "\n"  # as its teacher writes
    prompts = [chat_prompt(r["question"], tokenizer, "tiny") + plan for r in records]
    rows = sample(
        model,
        tokenizer,
        prompts,
        1,
        True,
        "forked",
        temperature,
        seed=seed,
        **{**world.budgets, "hide_plan": hide_plan},
    )
    texts = [plan + row[0] for row in rows]
    splits = [world.block_splits(r["question"], t)[:1] for r, t in zip(records, texts)]
    firsts = [s[0] for s in splits if s]
    scored = completion_metrics(texts, [r["answer"] for r in records])
    return {
        "width": width,
        "n": len(records),
        "accuracy": round(scored["accuracy"], 4),
        "reach": round(statistics.fmean(reach(r["question"], width) for r in records), 4),
        "found": round(
            statistics.fmean(path_found(t, r["answer"][-1]) for r, t in zip(records, texts)), 4
        ),
        "valid_ratio": round(scored["valid_ratio"], 4),
        "split_rate": round(statistics.fmean(firsts), 4) if firsts else 0.0,
        "example": texts[0],
    }


def main(run: StudyRun) -> dict[str, Any]:
    """``study plans``: every width of ``--widths`` for ``--model`` (default: PlanWorld's shipped
    unseen cold start), at T = 1 with seed ``--seed``."""
    from pr1lib.evaluation.evaluate import load_for_eval
    from pr1lib.training.runs import decoded_hidden

    if run.world not in (None, WORLD):
        raise ValueError(f"study plans forces {WORLD}'s plans: leave --world out or give {WORLD}")
    name = run.option("model") or worlds.get(WORLD).init("unseen")
    model, tokenizer = load_for_eval(name, run.profile)
    hide = decoded_hidden(name)  # decoded as it was trained (forced plans fork their paths)
    out = {"model": name, "seed": run.seeds[0], "hide_plan": hide, "widths": {}}
    for width in run.option("widths", WIDTHS):
        row = forced_plan(model, tokenizer, width, run.option("n", N), run.seeds[0], 1.0, hide)
        out["widths"][str(width)] = row
        print(
            f"{width} deals planned: {row['accuracy']:.1%} right, {row['found']:.0%} found by a "
            f"path, {row['reach']:.0%} in reach, {row['valid_ratio']:.0%} valid, "
            f"{row['split_rate']:.0%} split",
            flush=True,
        )
    return out

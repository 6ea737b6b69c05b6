"""When does parallel pay? A trained serial model and a trained unseen model on searches of 2, 3,
4, 6 and 10 deals (PlanWorld's tiers ``w2`` ... ``hard``; docs/planworld.md).

Both models write a plan, ``Check (A), (B), (C)``; the unseen one then checks the plan's deals in
one block of forked paths (one path per item, side by side), the serial one checks them one after
another and stops at the first ✓. On a short list the block's fork and merge cost more than the
few checks it runs side by side; on a long one the serial search is long. Per width and per arm
the card keeps:

- the held-out accuracy as every stage measures it (``evaluation.evaluate.evaluate_stage``:
  mean@k at T = 1 with a 95 % interval over problems, greedy as a labelled second column), the
  mean sequential decode steps of those samples (paths side by side count their longest) and
  ``mean_paths`` (paths per block);
- seconds per answer at batch 1 and at batch 64, both models timed side by side in one run
  (``evaluation.latency``, the timer of ``bench latency``: interleaved rounds, medians).

``crossover`` is the smallest width from which the unseen model's steps stay below the serial
one's on every wider width, and the same for its seconds per answer (per batch size); ``None``
where they are not below at the widest (``crossover["below"]``: every width where they are).

``python -m pr1lib study widths --world planworld --card planworld-widths`` measures the
controls study's serial and unseen arms (seed 0, the end of their last RL stage; ``--serial`` and
``--unseen`` name others) and prints one JSON object last.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from pr1lib.config import ModelConfig, RolloutConfig
from pr1lib.config.runtime import set_threads
from pr1lib.data.evalsets import load_benchmark
from pr1lib.evaluation.evaluate import held_out_config, load_for_eval
from pr1lib.evaluation.metrics import mean_interval
from pr1lib.experiments import StudyRun
from pr1lib.format.prompts import chat_prompt
from pr1lib.store.paths import shown
from pr1lib.training.runs import CARD
from pr1lib.training.starts import DECODE_MODES, told_otherwise
from pr1lib.worlds.planworld import TIER_WIDTHS

WORLD = "planworld"
ARMS = {"serial": "plain", "unseen": "unseen"}  # arm -> the variant it trains (its decode mode)
WIDTHS = {width: tier for tier, width in TIER_WIDTHS.items()}  # deals -> PlanWorld's tier
BATCH = 64  # the server's batch (the user's is 1)
N, K, TIMED, ROUNDS = 200, 4, 64, 3  # problems, samples each, problems timed, timing rounds
THREADS = 1  # torch threads, as bench latency times (a core's speed, on a shared machine too)


def last_stage(root: Path, arm: str, seed: int = 0) -> Path | None:
    """The run folder of an arm's last finished RL stage under a controls study's ``root`` (its
    Stage 3, else its Stage 2; ``curriculum.final_hard`` reads the same cards); ``None``: none."""
    for stage in ("s3", "s2"):
        cards = sorted((Path(root) / arm / f"seed{seed}").glob(f"grpo-*-{stage}-*/{CARD}"))
        if cards:
            return cards[-1].parent
    return None


def models(run: StudyRun) -> dict[str, str]:
    """Each arm's model: ``--serial`` / ``--unseen``, else the controls study's end of that arm
    (seed 0); a missing one is one line naming the command that makes it."""
    from pr1lib.experiments.controls import controls_dir

    root = controls_dir(run.profile, WORLD)
    out = {}
    for arm in ARMS:
        given = run.option(arm) or last_stage(root, arm)
        if given is None:
            raise ValueError(
                f"no finished RL stage of arm {arm!r} under {shown(root)}: run python -m pr1lib "
                f"study controls --world {WORLD} --arm {arm}, or give --{arm} RUN"
            )
        out[arm] = str(given)
    return out


def judge(run: StudyRun, width: int, arm: str, n: int, hide_plan: bool = False) -> Any:
    """The held-out evaluation of one arm on one width (``held_out_config``: the stages' own,
    PlanWorld's block layout, the arm's decode mode; ``hide_plan``: a model trained with hidden
    plans), with the ``--set`` lengths."""
    from pr1lib import worlds

    world = worlds.get(WORLD)
    cfg = held_out_config(
        run.profile,
        WIDTHS[width],
        n,
        DECODE_MODES[ARMS[arm]],
        run.overrides.get("max_completion_length", world.budgets["max_completion_length"]),
        run.option("k", K),
        run.seeds[0],
        source=world.source("hard"),
        layout={"hide_plan": True} if hide_plan else None,
    )
    cfg = cfg.replace(**run.overrides)
    return cfg.replace(
        prompt_style=cfg.prompt_style or ModelConfig.for_profile(run.profile).prompt_style
    )


def accuracy(model: Any, tokenizer: Any, cfg: Any) -> dict[str, Any]:
    """One arm on one width: mean@k with its interval over problems, greedy, sequential steps,
    paths per block and the rates beside them (``evaluate_stage``, as every stage measures)."""
    from pr1lib.evaluation.evaluate import evaluate_stage

    metrics, _ = evaluate_stage(model, tokenizer, cfg)
    interval = mean_interval(metrics["per_problem"]["accuracy"], seed=cfg.seed)
    kept = ("accuracy", "mean_sequential_steps", "mean_paths", "parallel_ratio", "valid_ratio")
    return {
        "tier": cfg.benchmark,
        **{key: _round(metrics.get(key)) for key in kept + ("mean_length", "split_rate")},
        "interval": {"low": round(interval["low"], 4), "high": round(interval["high"], 4)},
        "greedy": _round(metrics["greedy"]["accuracy"]),
        "n": metrics["n"],
        "k": metrics["k"],
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def seconds(loaded: dict, cfgs: dict, timed: int, repeats: int) -> dict[str, dict]:
    """Seconds per answer of both arms on the first ``timed`` problems of their width, at batch 1
    and at batch ``min(BATCH, timed)``, timed side by side (``evaluation.latency``): ``median``
    (batch -> arm -> the median over ``repeats`` interleaved rounds) and ``spread`` (the fastest
    and slowest round)."""
    from pr1lib.evaluation.latency import interleaved, medians, spreads

    records = load_benchmark(cfgs["serial"].benchmark, timed, seed=cfgs["serial"].seed)
    arms = {}
    for arm, (model, tok) in loaded.items():
        cfg = cfgs[arm]
        prompts = [chat_prompt(r["question"], tok, cfg.prompt_style) for r in records]
        arms[arm] = (model, tok, RolloutConfig.of(cfg.replace(temperature=1.0), cfg.mode), prompts)
    got = interleaved(arms, (1, min(BATCH, timed)), repeats)
    return {"median": medians(got["seconds"]), "spread": spreads(got["seconds"])}


def sweep(run: StudyRun, named: dict[str, str], widths: list[int]) -> dict[str, Any]:
    """Every width, both arms: ``accuracy`` and ``seconds`` per arm (``seconds_per_answer``:
    batch -> median seconds, ``spread`` beside it), the models loaded once."""
    say = (lambda *a, **k: None) if run.profile == "smoke" else print
    from pr1lib.training.runs import decoded_hidden

    loaded = {arm: load_for_eval(path, run.profile, say) for arm, path in named.items()}
    hidden = {arm: decoded_hidden(named[arm], DECODE_MODES[ARMS[arm]]) for arm in ARMS}
    n, timed = run.option("n", N), run.option("timed", TIMED)
    out: dict[str, Any] = {}
    for width in widths:
        cfgs = {arm: judge(run, width, arm, n, hidden[arm]) for arm in ARMS}
        row = {arm: accuracy(*loaded[arm], cfgs[arm]) for arm in ARMS}
        timing = seconds(loaded, cfgs, min(timed, n), run.option("repeats", ROUNDS))
        for arm in ARMS:
            row[arm]["seconds_per_answer"] = {b: s[arm] for b, s in timing["median"].items()}
            row[arm]["spread"] = {b: s[arm] for b, s in timing["spread"].items()}
        out[str(width)] = row
        print(f"{width} deals: " + _line(row), file=sys.stderr, flush=True)
    return out


def _line(row: dict[str, dict]) -> str:
    return "; ".join(
        f"{arm} {r['accuracy']:.1%} in {r['mean_sequential_steps']:.0f} steps, "
        + ", ".join(f"{s:.3f} s at batch {b}" for b, s in r["seconds_per_answer"].items())
        for arm, r in row.items()
    )


def crossover(widths: dict[str, dict[str, dict]]) -> dict[str, Any]:
    """Where the lines cross for good: the smallest width (deals) from which the unseen arm takes
    fewer sequential steps than the serial one on every wider width measured, and per batch size
    the same for seconds per answer; ``None`` where no width is (unseen is not below at the
    widest). ``below`` lists every width where unseen is below, so a dip on the way (a noisy
    timing at equal steps) is shown and not taken for the crossover.

    >>> arm = lambda steps, s1, s64: {"mean_sequential_steps": steps,
    ...                               "seconds_per_answer": {"1": s1, "64": s64}}
    >>> w = {"2": {"serial": arm(40, 0.20, 0.010), "unseen": arm(45, 0.30, 0.005)},
    ...      "10": {"serial": arm(120, 0.60, 0.030), "unseen": arm(50, 0.40, 0.050)},
    ...      "4": {"serial": arm(60, 0.30, 0.015), "unseen": arm(48, 0.35, 0.030)}}
    >>> cross = crossover(w)
    >>> cross["steps"], cross["seconds_per_answer"], cross["below"]["seconds_per_answer"]["64"]
    (4, {'1': 10, '64': None}, [2])
    """
    order = sorted(widths, key=int)
    batches = widths[order[0]]["serial"]["seconds_per_answer"] if order else {}
    measures = {"steps": lambda r: r["mean_sequential_steps"]}
    measures |= {b: lambda r, b=b: r["seconds_per_answer"][b] for b in batches}
    below = {
        name: [int(w) for w in order if value(widths[w]["unseen"]) < value(widths[w]["serial"])]
        for name, value in measures.items()
    }
    found = {name: _for_good(ws, [int(w) for w in order]) for name, ws in below.items()}
    return {
        "steps": found.pop("steps"),
        "seconds_per_answer": found,
        "below": {"steps": below.pop("steps"), "seconds_per_answer": below},
    }


def _for_good(below: list[int], order: list[int]) -> int | None:
    """The smallest width from which every wider one is in ``below`` (``None``: the widest is
    not)."""
    tail = None
    for width in reversed(order):
        if width not in below:
            break
        tail = width
    return tail


def crossover_words(cross: dict[str, Any], widths: list[int]) -> list[str]:
    """One line per crossover (``crossover``), naming the widths where unseen dips below without
    staying there.

    >>> cross = {"steps": 4, "seconds_per_answer": {"1": 6, "64": None},
    ...          "below": {"steps": [4, 6, 10], "seconds_per_answer": {"1": [6, 10], "64": [2]}}}
    >>> for line in crossover_words(cross, [2, 4, 6, 10]):
    ...     print(line)
    unseen takes fewer sequential steps than serial from 4 deals on
    unseen answers sooner than serial at batch 1 from 6 deals on
    unseen answers sooner than serial at batch 64 at 2 deals, but not at 10 deals
    """
    below = cross["below"]

    def words(what: str, width: int | None, dips: list[int]) -> str:
        if width is not None:
            return f"unseen {what} from {width} deals on"
        if dips:
            at = ", ".join(map(str, dips))
            return f"unseen {what} at {at} deals, but not at {max(widths)} deals"
        return f"unseen never {what} ({min(widths)} to {max(widths)} deals)"

    lines = [words("takes fewer sequential steps than serial", cross["steps"], below["steps"])]
    for batch, width in cross["seconds_per_answer"].items():
        what = f"answers sooner than serial at batch {batch}"
        lines.append(words(what, width, below["seconds_per_answer"][batch]))
    return lines


def main(run: StudyRun) -> list[dict]:
    """``study widths``: the sweep over ``--widths`` (default every PlanWorld width), its
    ``crossover`` and one line per crossover; every input is checked before a model loads."""
    if run.world not in (None, WORLD):
        raise ValueError(f"study widths sweeps {WORLD}'s widths: leave --world out or give {WORLD}")
    if len(run.seeds) != 1:
        raise ValueError("study widths takes one seed (it draws the samples): give --seeds N")
    widths = sorted(set(run.option("widths") or WIDTHS))
    named = models(run)
    for arm, path in named.items():
        note = told_otherwise(path, {"mode": DECODE_MODES[ARMS[arm]], "world": WORLD})
        if note:
            print(note, file=sys.stderr, flush=True)
    set_threads(THREADS)
    started = time.perf_counter()
    table = sweep(run, named, widths)
    cross = crossover(table)
    for line in crossover_words(cross, widths):
        print(line, file=sys.stderr, flush=True)
    return [
        {
            "world": WORLD,
            "profile": run.profile,
            "models": named,
            "seed": run.seeds[0],
            "threads": THREADS,
            "timed": min(run.option("timed", TIMED), run.option("n", N)),  # problems, each batch
            "repeats": run.option("repeats", ROUNDS),
            "widths": table,
            "crossover": cross,
            "verdict": crossover_words(cross, widths),
            "seconds": round(time.perf_counter() - started, 1),
        }
    ]

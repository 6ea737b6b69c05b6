"""The reward ablation (the paper's Table 4): Stage 3 from one SFT checkpoint of the unseen variant,
once per arm of ``ARMS`` (accuracy = S1, alternating = S2, parallel = the tiered reward on every
step, and this project's structure arm), same seed and steps, next to the paper.

Each arm is measured on held-out problems of the tier it trained on by the stage's evaluation:
the parallel ratio and mean@k of k samples at T = 1 (the paper's protocol) and greedy beside
them. The paper's finding is an order of the parallel ratio, accuracy < alternating < parallel,
with alternating keeping the accuracy that parallel-only gives up; ``table4_verdict`` checks it
with a bootstrap over problems, so a gap smaller than its noise does not count. A finished arm
is reused while its config and start are the same; ``OUT/ablation.json`` keeps the results.

>>> data_tier("tinygsm-easy"), data_tier("tinyworld-easy"), data_tier("dapo")
('easy', 'easy', 'hard')
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from pr1lib.config import GRPOStageConfig
from pr1lib.evaluation.metrics import paired_bootstrap
from pr1lib.evaluation.paper import TABLE4
from pr1lib.experiments import StudyRun
from pr1lib.store.folders import move_aside
from pr1lib.store.jsonl import read_json
from pr1lib.store.paths import runs_dir
from pr1lib.training.grpo import run_grpo
from pr1lib.training.runs import finished_run
from pr1lib.training.starts import default_init

# The arms (the paper's Table 4, run on the unseen variant from its SFT): arm -> reward mode.
# "parallel" plays the paper's "parallel only" (an assumption: READINGS); "structure" (blocks
# whatever the answer) is the other reading of it.
ARMS: dict[str, str] = {
    "accuracy": "accuracy",
    "alternating": "alternating",
    "parallel": "tiered",
    "structure": "structure",
}
VARIANT = "unseen"  # the variant the paper ablates
PAPER_ARM = {"accuracy": "accuracy", "alternating": "alternating", "parallel": "parallel"}
ORDER = ("accuracy", "alternating", "parallel")  # the paper's parallel ratio rises along these


def ablation_dir(profile: str, variant: str, seed: int) -> Path:
    return runs_dir() / f"grpo-ablation-{profile}-{variant}-seed{seed}"


def run_ablation(
    profile: str,
    variant: str = VARIANT,
    init: str | Path | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    arms: Sequence[str] = tuple(ARMS),
    refresh: bool = False,
    overwrite: bool = False,
    **overrides: Any,
) -> list[dict]:
    """Stage 3 from one SFT checkpoint (default: the variant's SFT run), once per arm. An arm
    whose folder holds a finished run with this config and start is reused unless ``refresh``;
    the start is evaluated once, on the tier of the training problems, and shared by every arm."""
    init = init if init is not None else default_init(2, variant, profile, seed)
    out = Path(out) if out else ablation_dir(profile, variant, seed)
    results: dict[str, dict] = {}
    for arm in arms:
        cfg = GRPOStageConfig.for_stage(
            3, profile, variant=variant, reward=ARMS[arm], seed=seed, **overrides
        )
        if refresh:  # a finished folder would only be re-evaluated: train this arm from scratch
            move_aside(out / arm, "refresh")
        done = finished_run(out / arm, cfg, init)
        if done is None:
            before = next(iter(results.values()))["before"] if results else None
            done = run_grpo(
                cfg,
                init,
                out / arm,
                before=before,
                preflight=False,
                evaluate_tiers=(data_tier(cfg.source),),
                overwrite=overwrite,
            ).result
        results[arm] = {**done, "arm": arm}
        out.mkdir(parents=True, exist_ok=True)
        (out / "ablation.json").write_text(json.dumps(results, indent=2, default=str))
    return list(results.values())


def load_ablation(
    profile: str,
    variant: str = VARIANT,
    seed: int = 0,
    out: str | Path | None = None,
) -> list[dict]:
    """Cached ablation results (``[]`` when the ablation has not run yet)."""
    path = Path(out or ablation_dir(profile, variant, seed)) / "ablation.json"
    return (
        list(read_json(path, "move it away to run the ablation again").values())
        if path.exists()
        else []
    )


def data_tier(data: str) -> str:
    """The held-out tier that matches a training source: ``easy`` for GSM8K-like, else ``hard``."""
    return "easy" if data == "gsm8k" or data.endswith("-easy") else "hard"


def _pct(share: float | None) -> float | None:
    return None if share is None else round(100 * share, 1)


def _metrics(res: dict, when: str) -> dict:
    return res[when][data_tier(res.get("data", "tinygsm-hard"))]


def ablation_table(results: Sequence[dict]) -> list[dict[str, Any]]:
    """One row per arm: the held-out parallel ratio and accuracy at T = 1 (mean@k) and greedy,
    the ratio sampled during the last training steps, the start's, and the paper's Table 4.

    >>> at = lambda p, a: {"hard": {"parallel_ratio": p, "accuracy": a,
    ...                             "greedy": {"parallel_ratio": 0.0, "accuracy": a}}}
    >>> res = [{"arm": "accuracy", "reward": "accuracy", "steps": 5, "data": "tinygsm-hard",
    ...         "before": at(0.5, 0.1), "after": at(0.25, 0.2), "train": {"parallel_ratio": 0.3}}]
    >>> row = ablation_table(res)[0]
    >>> row["parallel_ratio_%"], row["paper_parallel_ratio_%"], row["accuracy_%"]
    (25.0, 13.6, 20.0)
    """
    rows = []
    for res in results:
        after, start = _metrics(res, "after"), _metrics(res, "before")
        arm = res.get("arm", res["reward"])
        ref = TABLE4.get(PAPER_ARM.get(arm, ""), {})
        rows.append(
            {
                "arm": arm,
                "reward": res["reward"],
                "steps": res["steps"],
                "parallel_ratio_%": _pct(after["parallel_ratio"]),
                "accuracy_%": _pct(after["accuracy"]),
                "greedy_parallel_ratio_%": _pct(after.get("greedy", {}).get("parallel_ratio")),
                "greedy_accuracy_%": _pct(after.get("greedy", {}).get("accuracy")),
                "train_parallel_ratio_%": _pct(res["train"].get("parallel_ratio")),
                "start_parallel_ratio_%": _pct(start["parallel_ratio"]),
                "start_accuracy_%": _pct(start["accuracy"]),
                "paper_parallel_ratio_%": ref.get("parallel %"),
                "paper_avg": ref.get("Avg"),
            }
        )
    return rows


# Which arm plays the paper's "parallel only": an assumption, since the paper does not name its
# reward. The default reading is the tiered reward on every step (its 80.3 % parallel is not
# ~100 %); every verdict is also given with the structure arm (format only) in that place.
READINGS = {"tiered (assumed)": "parallel", "structure (format only)": "structure"}


def table4_verdict(results: Sequence[dict]) -> dict[str, Any]:
    """Is the paper's order reproduced? Parallel ratio (T = 1) accuracy < alternating < parallel,
    each step's gap with a 95 % bootstrap interval over problems above zero, and alternating's
    accuracy at least parallel-only's. ``reproduced`` is ``None`` when an arm or the per-problem
    numbers are missing (say, results from before they were kept). The top-level verdict reads
    "parallel only" as the tiered arm (an assumption, ``READINGS``); ``readings`` gives it under
    each reading whose arm ran."""
    arms = {r.get("arm", r["reward"]): _metrics(r, "after") for r in results}
    out = _verdict(arms, "parallel")
    out["readings"] = {
        reading: _verdict(arms, arm)["reproduced"]
        for reading, arm in READINGS.items()
        if arm in arms
    }
    return out


def _verdict(arms: dict[str, dict], parallel: str) -> dict[str, Any]:
    order = (*ORDER[:2], parallel)
    if any("per_problem" not in arms.get(a, {}) for a in order):
        return {"reproduced": None, "why": f"needs the arms {order} with per-problem results"}
    gaps = {
        f"{a}<{b}": paired_bootstrap(
            arms[b]["per_problem"]["parallel"], arms[a]["per_problem"]["parallel"]
        )
        for a, b in zip(order, order[1:])
    }
    ordered = all(g["low"] > 0 for g in gaps.values())
    keeps = arms["alternating"]["accuracy"] >= arms[parallel]["accuracy"]
    return {
        "reproduced": ordered and keeps,
        "order_beyond_noise": ordered,
        "alternating_accuracy_at_least_parallel": keeps,
        "gaps": {k: {key: round(v, 4) for key, v in g.items()} for k, g in gaps.items()},
    }


def ablation_summary(results: Sequence[dict]) -> dict[str, Any]:
    """What the command prints and its card keeps: ``ablation`` (``ablation_table``'s rows) and
    ``verdict`` (``table4_verdict``)."""
    return {"ablation": ablation_table(results), "verdict": table4_verdict(results)}


def format_table(rows: Sequence[dict]) -> str:
    """Rows as an aligned text table (what the command prints).

    >>> print(format_table([{"arm": "accuracy", "parallel_ratio_%": 12.5}]))
    arm       parallel_ratio_%
    accuracy  12.5
    """
    if not rows:
        return "(no rows)"
    keys = list(rows[0])
    widths = {k: max(len(k), *(len(str(r.get(k))) for r in rows)) for k in keys}
    lines = ["  ".join(f"{k:<{widths[k]}}" for k in keys).rstrip()]
    lines += ["  ".join(f"{str(r.get(k)):<{widths[k]}}" for k in keys).rstrip() for r in rows]
    return "\n".join(lines)


def main(run: StudyRun) -> list[dict]:
    """``study ablation``: every arm per seed, the table and the verdict of each seed."""
    variant, results = run.option("variant", VARIANT), []
    for seed in run.seeds:
        out = run.seed_out(seed, ablation_dir(run.profile, variant, seed))
        with run.claim(out):
            arms = run_ablation(
                run.profile,
                variant,
                run.init(variant),
                seed,
                out,
                refresh=run.option("refresh", False),
                overwrite=run.overwrite,
                **run.grpo_overrides(),
            )
        summary = ablation_summary(arms)
        print(format_table(summary["ablation"]), flush=True)
        print(
            "the paper's order (parallel ratio accuracy < alternating < parallel, gaps beyond a "
            "95 % bootstrap interval; alternating's accuracy >= parallel's) reproduced: "
            f"{summary['verdict']}"
        )
        results.append({"profile": run.profile, "variant": variant, "seed": seed, **summary})
    return results

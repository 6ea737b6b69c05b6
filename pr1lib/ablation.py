"""The reward-mode ablation (the paper's Table 4): Stage 3 from one SFT checkpoint, once per reward
arm (``config.ABLATION_ARMS``), same seed and steps, and its table next to the paper's.

Each arm's parallel ratio and accuracy are measured on held-out problems of the tier it trained
on: greedy, and sampled at T = 1 (``pr1lib.studies.sampled_accuracy``, the paper's protocol).
A finished arm is reused while its config and start are the same; ``OUT/ablation.json`` keeps
the table for ``load_ablation``.

>>> data_tier("tinygsm-easy"), data_tier("dapo")
('easy', 'hard')
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from pr1lib.config import ABLATION_ARMS, GRPOStageConfig
from pr1lib.grpo import run_grpo
from pr1lib.paper import TABLE4
from pr1lib.paths import runs_dir
from pr1lib.profiles import check_profile
from pr1lib.runs import finished_run, is_run_folder, move_aside
from pr1lib.studies import default_init, sampled_accuracy

PAPER_ARM = {"accuracy": "accuracy", "alternating": "alternating", "structure": "parallel"}  # TABLE4 rows


def ablation_dir(profile: str, variant: str, seed: int) -> Path:
    return runs_dir() / f"grpo-ablation-{profile}-{variant}-seed{seed}"


def run_ablation(profile: str | None = None, variant: str = "seen", init: str | Path | None = None,
                 seed: int = 0, out: str | Path | None = None, modes: Sequence[str] = ABLATION_ARMS,
                 refresh: bool = False, sampled: bool = True, **overrides: Any) -> list[dict]:
    """Stage 3 from one SFT checkpoint, once per reward mode (same seed and steps), as the paper's
    Table 4. A mode whose run folder holds a finished run with this config and start is reused
    (``finished_run``) unless ``refresh``; ``OUT/ablation.json`` keeps the table for ``load_ablation``.
    ``sampled`` adds each model's held-out ratios at T = 1 (``sampled_accuracy``), as the paper measures them."""
    profile = check_profile(profile)
    init = init if init is not None else default_init(2, variant, profile, seed)  # the SFT checkpoint
    out = Path(out) if out else ablation_dir(profile, variant, seed)
    results: dict[str, dict] = {}
    for mode in modes:
        cfg = GRPOStageConfig.for_stage(3, profile, variant=variant, reward=mode, seed=seed, **overrides)
        done = None if refresh else finished_run(out / mode, cfg, init)
        if refresh:  # a finished folder would only be re-evaluated: train this mode from scratch
            move_aside(out / mode, "refresh")
        if done is None:
            before = next(iter(results.values()))["before"] if results else None  # the start, evaluated once
            done = run_grpo(cfg, init, out / mode, before=before, preflight=False).result
        if sampled and is_run_folder(init):
            done["sampled"] = {"start": sampled_accuracy(init, cfg),
                               "final": sampled_accuracy(out / mode, cfg)}
        results[mode] = done
        out.mkdir(parents=True, exist_ok=True)
        (out / "ablation.json").write_text(json.dumps({m: {"result": r} for m, r in results.items()},
                                                      indent=2, default=str))
    return list(results.values())


def load_ablation(profile: str | None = None, variant: str = "seen", seed: int = 0,
                  out: str | Path | None = None) -> list[dict]:
    """Cached ablation results (``[]`` when the ablation has not run yet)."""
    path = Path(out or ablation_dir(check_profile(profile), variant, seed)) / "ablation.json"
    return [entry["result"] for entry in json.loads(path.read_text()).values()] if path.exists() else []


def data_tier(data: str) -> str:
    """The held-out tier that matches a training source: ``easy`` for GSM8K-like, else ``hard``.

    >>> data_tier("tinygsm-easy"), data_tier("dapo")
    ('easy', 'hard')
    """
    return "easy" if data in ("gsm8k", "tinygsm-easy") else "hard"


def _pct(share: float) -> float:
    return round(100 * share, 1)


def _sampled_ratios(sampled: dict | None) -> dict[str, float]:
    """The held-out parallel ratio and mean@k at T = 1 of the end and the start, in %, when measured."""
    if not sampled:
        return {}
    return {"sampled_parallel_ratio_%": _pct(sampled["final"]["parallel_ratio"]),
            "start_sampled_parallel_ratio_%": _pct(sampled["start"]["parallel_ratio"]),
            "sampled_accuracy_%": _pct(sampled["final"]["mean_at_k"]),
            "start_sampled_accuracy_%": _pct(sampled["start"]["mean_at_k"])}


def ablation_table(results: Sequence[dict]) -> list[dict[str, Any]]:
    """One row per reward mode: this run's parallel ratio (held-out greedy on the tier it trained
    on, sampled during the last training steps, and held-out sampled when ``run_ablation``
    measured it) and accuracy, next to the paper's Table 4 (Unseen, from Parallel-SFT).

    >>> res = [{"reward": "accuracy", "steps": 5, "data": "tinygsm-hard",
    ...         "before": {"hard": {"parallel_ratio": 0.5, "accuracy": 0.1}},
    ...         "after": {"hard": {"parallel_ratio": 0.25, "accuracy": 0.2}}, "train": {"parallel_ratio": 0.3}}]
    >>> row = ablation_table(res)[0]
    >>> row["parallel_ratio_%"], row["paper_parallel_ratio_%"], row["accuracy_%"]
    (25.0, 13.6, 20.0)
    """
    paper = {arm: TABLE4[row] for arm, row in PAPER_ARM.items()}
    rows = []
    for res in results:
        tier = data_tier(res.get("data", "tinygsm-hard"))
        after, start = res["after"][tier], res["before"][tier]
        ref = paper.get(res["reward"], {})
        rows.append({"reward": res["reward"], "data": res.get("data"), "steps": res["steps"],
                     "parallel_ratio_%": _pct(after["parallel_ratio"]),
                     "train_parallel_ratio_%": _pct(res["train"].get("parallel_ratio", float("nan"))),
                     "accuracy_%": _pct(after["accuracy"]),
                     "start_parallel_ratio_%": _pct(start["parallel_ratio"]),
                     "start_accuracy_%": _pct(start["accuracy"]),
                     **_sampled_ratios(res.get("sampled")),
                     "paper_parallel_ratio_%": ref.get("parallel %"), "paper_avg": ref.get("Avg")})
    return rows


def ordering_reproduced(rows: Sequence[dict], key: str = "parallel_ratio_%") -> bool | None:
    """Whether accuracy < alternating < structure in ``key`` (the paper's order); ``None`` if a mode
    or its value is missing.

    >>> ordering_reproduced([{"reward": "accuracy", "parallel_ratio_%": 10}, {"reward": "alternating",
    ...     "parallel_ratio_%": 50}, {"reward": "structure", "parallel_ratio_%": 90}])
    True
    """
    by_mode = {r["reward"]: r.get(key) for r in rows}
    if any(by_mode.get(m) is None for m in ABLATION_ARMS):
        return None
    return by_mode["accuracy"] < by_mode["alternating"] < by_mode["structure"]


def format_table(rows: Sequence[dict]) -> str:
    """Rows as an aligned text table (what the command prints).

    >>> print(format_table([{"reward": "accuracy", "parallel_ratio_%": 12.5}]))
    reward    parallel_ratio_%
    accuracy  12.5
    """
    if not rows:
        return "(no rows)"
    keys = list(rows[0])
    widths = {k: max(len(k), *(len(str(r.get(k))) for r in rows)) for k in keys}
    lines = ["  ".join(f"{k:<{widths[k]}}" for k in keys).rstrip()]
    lines += ["  ".join(f"{str(r.get(k)):<{widths[k]}}" for k in keys).rstrip() for r in rows]
    return "\n".join(lines)

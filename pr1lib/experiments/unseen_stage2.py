"""The unseen Stage-2 study: the unseen variant from its SFT checkpoint two ways, Stage 3 directly
(the paper's recipe) and Stage 2 then Stage 3 (the seen recipe kept); the paper found keeping it
hurt (docs/recipe.md#9-the-stage-recipe-per-variant).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pr1lib.experiments import StudyRun
from pr1lib.experiments.curriculum import run_curriculum
from pr1lib.store.jsonl import read_json
from pr1lib.store.paths import runs_dir
from pr1lib.training.runs import start_id
from pr1lib.training.starts import default_init

ARMS = {"direct": "SFT → Stage 3 (paper)", "kept": "SFT → Stage 2 → Stage 3"}


def unseen_stage2_dir(profile: str, seed: int) -> Path:
    """Where ``unseen_stage2_effect`` keeps its runs and result unless told otherwise."""
    return runs_dir() / f"grpo-unseen-stage2-{profile}-seed{seed}"


def unseen_stage2_effect(
    profile: str,
    init: str | Path | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    refresh: bool = False,
    overwrite: bool = False,
    **overrides: Any,
) -> dict[str, Any]:
    """The unseen variant from its SFT checkpoint two ways: Stage 3 directly (the paper's recipe)
    and Stage 2 then Stage 3 (the seen recipe kept). The result is cached in
    ``OUT/unseen_stage2.json`` and reused while the start and the overrides are the same."""
    out = Path(out) if out else unseen_stage2_dir(profile, seed)
    path = out / "unseen_stage2.json"
    init = init if init is not None else default_init(2, "unseen", profile, seed)
    result: dict[str, Any] = {
        "init": start_id(init),
        "overrides": json.loads(json.dumps(overrides, default=str)),
    }
    cached = (
        read_json(path, "move it away to run it again") if path.exists() and not refresh else {}
    )
    if {k: cached.get(k) for k in ("init", "overrides")} == {
        k: result[k] for k in ("init", "overrides")
    }:
        return cached
    for name, keep in (("direct", False), ("kept", True)):
        runs = run_curriculum(
            profile,
            "unseen",
            init,
            seed,
            out / name,
            keep_stage2=keep,
            overwrite=overwrite or refresh,
            **overrides,
        )
        result[name] = {
            "stages": [
                {k: r[k] for k in ("stage", "reward", "steps", "after", "train")}
                for r in runs["stages"]
            ],
            "sft": runs["sft"],
            "final": runs["final"],
        }
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str))
    return result


def unseen_stage2_table(effect: dict[str, Any]) -> dict[str, Any]:
    """``unseen_stage2_effect``'s start and one row per recipe: held-out accuracy (mean@k at
    T = 1, greedy beside it) at the start and the end, and the end's parallel ratio.

    >>> at = lambda a: {t: {"accuracy": a, "parallel_ratio": 0.5, "greedy": {"accuracy": a}}
    ...                 for t in ("easy", "hard")}
    >>> table = unseen_stage2_table({"init": "runs/x", **{n: {"sft": at(0.1), "final": at(0.2)}
    ...                                                   for n in ARMS}})
    >>> rows = table["rows"]
    >>> rows[1]["recipe"], rows[1]["hard_accuracy"], rows[1]["sft_hard_accuracy"]
    ('SFT → Stage 2 → Stage 3', 0.2, 0.1)
    """
    rows = []
    for name, recipe in ARMS.items():
        sft, final = effect[name]["sft"], effect[name]["final"]
        rows.append(
            {
                "recipe": recipe,
                "sft_hard_accuracy": sft["hard"]["accuracy"],
                "hard_accuracy": final["hard"]["accuracy"],
                "hard_greedy_accuracy": final["hard"]["greedy"]["accuracy"],
                "easy_accuracy": final["easy"]["accuracy"],
                "easy_greedy_accuracy": final["easy"]["greedy"]["accuracy"],
                "hard_parallel_ratio": final["hard"]["parallel_ratio"],
            }
        )
    return {"init": effect["init"], "rows": rows}


def main(run: StudyRun) -> list[dict]:
    """``study unseen-stage2``: both recipes per seed, one table each."""
    results = []
    for seed in run.seeds:
        out = run.seed_out(seed, unseen_stage2_dir(run.profile, seed))
        with run.claim(out):
            effect = unseen_stage2_effect(
                run.profile,
                run.init("unseen"),
                seed,
                out,
                run.option("refresh", False),
                overwrite=run.overwrite,
                **run.grpo_overrides(),
            )
        table = unseen_stage2_table(effect)
        for row in table["rows"]:
            print(json.dumps(row), flush=True)
        results.append({"profile": run.profile, "seed": seed, **table})
    return results

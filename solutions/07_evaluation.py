"""Solutions to the exercises of notebook 07 (evaluation).

Each ``exercise_N(profile)`` does the exercise and returns what it found; its docstring answers
the question in words. ``check_exercise_N(found)`` states what a right answer must show (the tests
call both). Run them all with ``python solutions/07_evaluation.py [profile]``.

They evaluate the checkpoints notebook 07 finds (by default only the base model, the one that
always exists) and write under ``runs/`` as the notebook does. On ``smoke`` the model has random
weights and answers nothing right, so its measured numbers are zeros; the answers therefore also
work the question out exactly, from per-problem accuracies, where the profile cannot show it.
"""

from __future__ import annotations

from pathlib import Path

from pr1lib import worlds
from pr1lib.config import NotebookConfig
from pr1lib.evaluation import headline
from pr1lib.evaluation.evaluate import ResultsFile
from pr1lib.evaluation.metrics import pass_at_k
from pr1lib.experiments import midtraining
from pr1lib.notebook import curves
from pr1lib.store.paths import runs_dir

ILLUSTRATION = (0.05, 0.2, 0.5, 0.9)  # per-sample accuracies of four made-up problems


def _evaluate(profile: str, k: int, stages: tuple[str, ...]) -> tuple[dict, Path]:
    """Notebook 07's section 4 for ``stages`` at ``k`` samples, into its own folder: a results
    file refuses samples drawn with another k, so each k gets one."""
    nb = NotebookConfig.for_profile(profile)
    found, _ = headline.find_checkpoints(profile)
    found = {key: where for key, where in found.items() if key in stages}
    out = runs_dir() / f"07_evaluation-{profile}" / f"eval-k{k}"
    ours = headline.evaluate_checkpoints(found, profile, nb.benchmarks, out=out, n=nb.table_n, k=k)
    return ours, out


# ----------------------------------------------------------------------------- exercise 1
def exercise_1(profile: str = "smoke", stages: tuple[str, ...] = ("base",)) -> dict:
    """mean@k and pass@k at the profile's k and at k = 8.

    **pass@k is the one that moves with k.** mean@k is the average share of right samples: each
    sample is right with the problem's probability q whatever k is, so more samples only make
    the estimate less noisy (its expectation stays q). pass@k asks whether at least one of k
    samples is right, ``1 − (1 − q)^k`` on average, which climbs toward 1 with k on every
    problem the model can solve at all; only problems with q = 0 (or 1) stay put. So going from
    k = 4 to 8 moves mean@k by sampling noise only, and lifts pass@k wherever 0 < q < 1.

    The measured rows show it on the profile's checkpoints (all zeros on ``smoke``: a random
    model solves nothing, so there is nothing to move); ``expected`` works it out exactly on
    four problems with per-sample accuracies 5, 20, 50 and 90 %.
    """
    nb = NotebookConfig.for_profile(profile)
    measured = {}
    for k in sorted({nb.table_k, 8}):
        ours, _ = _evaluate(profile, k, stages)
        measured[k] = {
            f"{key} {bench}": {"mean@k": s["accuracy"], "pass@k": s["pass_at_k"], "n": s["n"]}
            for key, by in ours.items()
            for bench, s in by.items()
        }
    expected = {
        k: {
            "mean@k": sum(ILLUSTRATION) / len(ILLUSTRATION),
            "pass@k": sum(1 - (1 - q) ** k for q in ILLUSTRATION) / len(ILLUSTRATION),
        }
        for k in (1, 2, 4, 8)
    }
    return {"measured": measured, "expected": expected}


def check_exercise_1(found: dict) -> None:
    measured = list(found["measured"].values())
    assert len(measured) == 2 and measured[0].keys() == measured[1].keys()
    for rows in measured:
        for row in rows.values():
            assert row["pass@k"] >= row["mean@k"] - 1e-12  # pass@k is never below mean@k
    exp = found["expected"]
    assert len({round(v["mean@k"], 12) for v in exp.values()}) == 1  # mean@k: the same for any k
    passes = [exp[k]["pass@k"] for k in sorted(exp)]
    assert passes == sorted(passes) and passes[-1] - passes[0] > 0.2  # pass@k climbs with k


# ----------------------------------------------------------------------------- exercise 2
def plug_in(n: int, c: int, k: int) -> float:
    """The plug-in estimate ``1 − (1 − c/n)^k``: k draws *with* replacement."""
    return 1 - (1 - c / n) ** k


def exercise_2(profile: str = "smoke", stages: tuple[str, ...] = ("base",)) -> dict:
    """Plug-in ``1 − (1 − c/n)^k`` against the unbiased ``pass_at_k``.

    They agree exactly only when **c = 0** (both 0), **c = n** (both 1) or **k = 1** (both
    c/n). Otherwise the plug-in is lower: it draws with replacement, so it may pick the same
    wrong sample twice, while the unbiased estimator draws k *different* samples. The gap is
    widest at k = n: the unbiased pass@n is 1 as soon as one sample is right (all n samples are
    drawn), while the plug-in stays below 1, e.g. 1 − (3/4)^4 = 0.68 for c = 1 of n = 4.

    ``rows`` applies both to every problem of the profile's results files (the per-problem
    ``correct_official`` lists: the strict checker); ``grid`` checks every c for n = 8.
    """
    ours, out = _evaluate(profile, NotebookConfig.for_profile(profile).table_k, stages)
    rows = []
    for path in sorted(out.glob("*.jsonl")):
        for row in ResultsFile(path).rows.values():
            n, c = len(row["correct_official"]), sum(row["correct_official"])
            for k in sorted({2, n}):
                rows.append(
                    {
                        "file": path.name,
                        "id": row["id"],
                        "n": n,
                        "c": c,
                        "k": k,
                        "plug_in": plug_in(n, c, k),
                        "unbiased": pass_at_k(n, c, k),
                    }
                )
    grid = [
        {"n": 8, "c": c, "k": k, "plug_in": plug_in(8, c, k), "unbiased": pass_at_k(8, c, k)}
        for c in range(9)
        for k in (1, 2, 8)
    ]
    return {"rows": rows, "grid": grid}


def check_exercise_2(found: dict) -> None:
    assert found["rows"], "no results rows were read"
    for r in found["rows"] + found["grid"]:
        same = abs(r["plug_in"] - r["unbiased"]) < 1e-12
        assert same == (r["c"] in (0, r["n"]) or r["k"] == 1), r
        assert r["plug_in"] <= r["unbiased"] + 1e-12, r  # with replacement: never higher


# ----------------------------------------------------------------------------- exercise 3
def exercise_3(profile: str = "smoke", seed: int = 0) -> dict:
    """The scaffold with the switch at a quarter and at three quarters of ``total``.

    What to look for: the first phase (alternating) is what holds blocks up; after the switch
    the accuracy reward alone pays for blocks only where they help, so the parallel ratio falls
    from wherever phase 1 left it. A longer phase 1 hands phase 2 a model with a firmer habit
    and so a higher ratio for longer after the switch; it does not stop the fall. Held-out
    accuracy at the end depends on whether blocks help the model: the paper's 4B model gained
    from a long scaffold (Figure 4); on TinyGSM a block costs accuracy, so there a longer phase 1
    leaves fewer accuracy-only steps and no better end, while on TinyWorld's hard items a block
    pays and accuracy alone already keeps it (docs/tinyworld.md, the reward ablation).

    Read the measured verdicts with ``switch_effect``'s noise bars: a short CPU run seldom tells
    these apart, and on ``smoke`` (random weights, a few steps) only the mechanics are real: each
    run trains exactly ``switch`` steps of phase 1 then ``total − switch`` of phase 2, phase 2
    pays accuracy only, and held-out numbers come at the start, the switch and the end.
    """
    nb = NotebookConfig.for_profile(profile)
    # the notebook's start: its world's unseen SFT where no run of notebook 04 replaces it
    shipped = {"sft-unseen": worlds.get(nb.world).init("unseen")} if nb.world else {}
    init = headline.find_checkpoints(profile, seed, defaults=shipped)[0].get("sft-unseen")
    runs = {}
    for switch in sorted({max(1, nb.total // 4), max(1, 3 * nb.total // 4)}):
        folder = midtraining.midtraining_dir(profile, nb.world, "unseen", seed)
        result = midtraining.mid_training(
            profile,
            init,
            switch,
            nb.total,
            seed=seed,
            variant="unseen",
            out=folder / f"switch{switch}",
            world=nb.world,  # the start's world: its problems, never another's
            window=nb.window,
            parallel_steps=2,
            eval_n=nb.scaffold_eval_n,
            per_device_train_batch_size=nb.scaffold_batch,
        )
        effect = curves.switch_effect(result)
        phases = [row["phase"] for row in result["curve"]]
        runs[switch] = {
            "steps per phase": {p: phases.count(p) for p in ("alternating", "accuracy")},
            "tiered steps after the switch": sum(
                bool(row.get("reward_mode/tiered"))
                for row in result["curve"]
                if row["phase"] == "accuracy"
            ),
            "parallel ratio": {k: effect["parallel_ratio"][k] for k in ("before", "after")},
            "held-out": {h["step"]: h["accuracy"] for h in effect["held_out"]},
        }
    return {"total": nb.total, "runs": runs}


def check_exercise_3(found: dict) -> None:
    total, runs = found["total"], found["runs"]
    assert len(runs) == 2
    for switch, run in runs.items():
        assert run["steps per phase"] == {"alternating": switch, "accuracy": total - switch}
        assert run["tiered steps after the switch"] == 0  # phase 2 pays accuracy alone
        assert sorted(run["held-out"]) == [0, switch, total]


if __name__ == "__main__":
    import sys

    for n in (1, 2, 3):
        print(f"exercise {n}:", globals()[f"exercise_{n}"](*sys.argv[1:2]))

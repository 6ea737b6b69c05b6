"""Solutions to the exercises of notebook 06 (GRPO training, Stages 2 and 3).

Each ``exercise_N(profile)`` does the exercise and returns what it found; its docstring answers
the question in words. ``check_exercise_N(found)`` states what a right answer must show (the tests
call both). Run them all with ``python solutions/06_grpo_training.py [profile]``.

Each runs Stage 3 from the profile's base model (no SFT checkpoint needed) into its own folder
under ``runs/06_grpo_training-<profile>/``, for the profile's few steps. On ``smoke`` the model has
random weights and earns −1 everywhere, so only the mechanics are measured: which rewards are
summed with which weights, which clip the trainer uses, where a run resumes.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

from transformers import TrainerCallback

from pr1lib.config import GRPOStageConfig
from pr1lib.store.paths import runs_dir
from pr1lib.training import grpo


def _folder(profile: str, name: str) -> Path:
    """A fresh run folder (a GRPO folder resumes, so a rerun of a solution starts over)."""
    out = runs_dir() / f"06_grpo_training-{profile}" / name
    shutil.rmtree(out, ignore_errors=True)
    return out


def _metrics(out: Path) -> list[dict]:
    with open(out / "metrics.csv") as f:
        return [
            {k: float(v) if v not in ("", None) else None for k, v in row.items()}
            for row in csv.DictReader(f)
        ]


# ----------------------------------------------------------------------------- exercise 1
def exercise_1(profile: str = "smoke", steps: int = 2) -> dict:
    """Stage 3 with ``extra_rewards=(("structure", 0.3),)`` beside accuracy.

    Prediction: the parallel ratio rises. The structure reward pays a valid block whatever the
    answer, so at weight 0.3 a block is worth 0.3 on every completion, right or wrong, and GRPO's
    group standardisation turns any difference into an advantage. Accuracy on the hard tier does
    not gain from it and usually loses: the structure arm of the TinyWorld ablation (results in
    docs/results.md) opens a block in almost every sample and ends below the alternating arm's
    accuracy, because the model is now paid for blocks that do no work (notebook 05, section 2).

    What is measured here is the mechanics: TRL sums the two rewards with weights 1.0 and 0.3
    (``reward_weights``), so the logged ``reward`` is ``accuracy + 0.3 · structure`` at every
    step. The direction of the ratio needs a trained SFT start and the tiny profile's 30 steps:
    run notebook 06 with ``structure_weight=0.3`` in the panel and compare with section 4.
    """
    cfg = GRPOStageConfig.for_stage(3, profile, notebook=True, extra_rewards=(("structure", 0.3),))
    session = grpo.GRPOSession(cfg, None, _folder(profile, "exercise-1"))
    session.run(steps)
    rows = _metrics(session.run_dir)
    return {
        "reward_weights": list(session.trainer.args.reward_weights),
        "rows": [
            {
                k: r[k]
                for k in (
                    "step",
                    "reward",
                    "rewards/accuracy_reward/mean",
                    "rewards/structure_reward/mean",
                    "parallel_ratio",
                )
            }
            for r in rows
        ],
    }


def check_exercise_1(found: dict) -> None:
    assert found["reward_weights"] == [1.0, 0.3]
    assert found["rows"]
    for r in found["rows"]:
        total = r["rewards/accuracy_reward/mean"] + 0.3 * r["rewards/structure_reward/mean"]
        assert abs(r["reward"] - total) < 1e-4, r


# ----------------------------------------------------------------------------- exercise 2
def exercise_2(profile: str = "smoke", steps: int = 2) -> dict:
    """Stage 3 of the seen variant with ``reward="alternating"``: clip-high **0.28**.

    ``for_stage`` pairs a reward with its clip (``pr1lib.config.CLIP_HIGH``): the paper's S2
    script, the one with the alternating reward, raises the upper clip bound to 0.28 (DAPO's
    "clip-higher"), while S1 (accuracy) keeps the symmetric 0.2. The reason is the reward's
    shape: the tiered steps pay for blocks, which the policy opens with low-probability tag
    tokens; with ε_high = 0.2 a positive advantage on such a token is clipped after a small rise
    in its probability, so clip-higher lets rare-but-rewarded behaviour grow faster and keeps
    entropy from collapsing. It comes from the script, not the paper's text (docs/recipe.md §7).
    An explicit ``epsilon_high=`` overrides the pairing.
    """
    accuracy = GRPOStageConfig.for_stage(3, profile, variant="seen", notebook=True)
    cfg = GRPOStageConfig.for_stage(3, profile, variant="seen", reward="alternating", notebook=True)
    session = grpo.GRPOSession(cfg, None, _folder(profile, "exercise-2"))
    session.run(steps)
    args = session.trainer.args
    return {
        "accuracy clip_high": accuracy.clip_high,
        "alternating clip_high": cfg.clip_high,
        "trainer epsilon": args.epsilon,
        "trainer epsilon_high": args.epsilon_high,
        "steps": session.step,
    }


def check_exercise_2(found: dict) -> None:
    assert found["accuracy clip_high"] == 0.2 and found["alternating clip_high"] == 0.28
    assert found["trainer epsilon"] == 0.2 and found["trainer epsilon_high"] == 0.28
    assert found["steps"] > 0


# ----------------------------------------------------------------------------- exercise 3
class StopAt(TrainerCallback):
    """Raises ``KeyboardInterrupt`` after step ``at``: what stopping the cell does."""

    def __init__(self, at: int):
        self.at = at

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.at:
            raise KeyboardInterrupt


def exercise_3(profile: str = "smoke") -> dict:
    """Interrupt Stage 3 halfway, run the cell again: it resumes from the last checkpoint.

    A checkpoint lands in ``trainer/checkpoint-N`` every ``save_steps`` steps (and at the end of
    each ``run``). An interrupt between two checkpoints loses the steps since the last one: the
    rerun loads ``checkpoint-N`` (weights, optimizer, scheduler, RNG, data position) and trains
    from step N + 1, so the steps after N are trained again, not skipped, and the run ends at
    ``max_steps`` as if it had never stopped. Here the interrupt comes inside step N + 1 (after
    its update, before its log), so ``metrics.csv`` stops at N and the rerun logs N + 1 onwards
    once each: no step is missing or doubled.
    """
    cfg = GRPOStageConfig.for_stage(3, profile, notebook=True)
    cfg = cfg.replace(max_steps=2 * cfg.save_steps)
    out = _folder(profile, "exercise-3")
    stop = cfg.save_steps + 1  # one step past a checkpoint
    try:
        grpo.GRPOSession(cfg, None, out).run(callbacks=[StopAt(stop)])
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    before = sorted(p.name for p in (out / "trainer").glob("checkpoint-*"))
    logged = [int(r["step"]) for r in _metrics(out)]
    again = grpo.GRPOSession(cfg, None, out)
    resumed_at = again.step
    again.run()
    return {
        "interrupted": interrupted,
        "stopped after": stop,
        "save_steps": cfg.save_steps,
        "checkpoints before": before,
        "resumed at": resumed_at,
        "final step": again.step,
        "max_steps": cfg.max_steps,
        "logged before": logged,
        "logged after": [int(r["step"]) for r in _metrics(out)],
        "checkpoints after": sorted(p.name for p in (out / "trainer").glob("checkpoint-*")),
    }


def check_exercise_3(found: dict) -> None:
    n = found["save_steps"]
    assert found["interrupted"] and found["checkpoints before"] == [f"checkpoint-{n}"]
    assert found["resumed at"] == n < found["stopped after"]  # not where it stopped
    assert found["final step"] == found["max_steps"]
    assert f"checkpoint-{found['max_steps']}" in found["checkpoints after"]
    assert found["logged before"] == list(range(1, n + 1))  # the interrupted step never logged
    assert found["logged after"] == list(range(1, found["max_steps"] + 1))


if __name__ == "__main__":
    import sys

    for n in (1, 2, 3):
        print(f"exercise {n}:", globals()[f"exercise_{n}"](*sys.argv[1:2]))

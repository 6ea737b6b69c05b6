"""Stages 2-3: GRPO with TRL's ``GRPOTrainer``, the paper's rewards and the parallel rollout engine.

The wiring, piece by piece (docs/recipe.md#8-grpo-hyper-parameters):

* **prompts**: a ``Dataset`` with ``prompt`` (the text the model sees) and ``answer`` (the gold
  value, which TRL hands to every reward function as a keyword argument);
* **rewards**: ``pr1lib.rewards.modes.reward_for(cfg.reward)`` wrapped in ``Tracked``, which also
  logs what the dashboard plots (accuracy, parallel ratio, validity, block position, every reward
  mode's score) through TRL's ``log_metric``; extra terms go in with TRL's ``reward_weights``;
* **rollouts**: ``EngineRollout``, a TRL ``rollout_func`` over ``pr1lib.decoding.rollout.generate``
  (``forked``: every ``<Parallel>`` opens real independent paths; ``seen``: plain sampling), or
  TRL's own ``model.generate`` (``rollout="trl"``);
* **log-probs**: ``ParallelGRPOTrainer`` overrides the one method all of TRL's log-prob calls go
  through. ``seen`` keeps TRL's causal forward; ``unseen`` adds ``pr1lib.decoding.structure``'s
  isolating 4D mask and restarted positions (labels from the 2D mask: the 4D one hides the padding);
  both run each group's prompt once (``buckets.by_prompt``; a small vocabulary:
  ``buckets.loss_head``);
* **knobs**: ``GRPOStageConfig`` (group 8, clip 0.2 / 0.28 high for the alternating S2 run, no KL,
  T = 1.0) becomes TRL's ``GRPOConfig``, seeds fixed (``seed`` and ``data_seed``);
* **checkpoints**: every ``save_steps`` into ``RUN/trainer/checkpoint-N``; a rerun of the same
  command resumes from the last one (optimizer, scheduler, RNG and data position restored), and a
  ``GRPOSession`` runs N more steps at a time the same way (the control panel's button).

A run folder holds ``config.json``, ``model_config.json``, ``metrics.csv`` (the dashboard's
series), ``trainer/`` (checkpoints), ``adapter/`` and ``merged/`` (the next stage's start) and
``run_card.json``.

>>> run_name(GRPOStageConfig(stage=2, reward="tiered"))
'grpo-tiny-seen-s2-tiered-seed0'
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from transformers import TrainerCallback, TrainerState

from pr1lib import worlds
from pr1lib.config import GRPOStageConfig, ModelConfig
from pr1lib.config.runtime import set_seed, set_threads
from pr1lib.decoding.models import load_training_policy, stage_model_config
from pr1lib.evaluation.evaluate import evaluate_stage, held_out_config
from pr1lib.format.prompts import chat_prompt
from pr1lib.rewards.modes import REWARD_MODES
from pr1lib.store.paths import runs_dir
from pr1lib.training.completions import prefilter
from pr1lib.training.dashboard import Dashboard
from pr1lib.training.doctor import doctor, table
from pr1lib.training.grpo_trainer import (
    ParallelGRPOTrainer,
    RoomToSave,
    SaveAtEnd,
    build_trainer,
    check_config,
    grader_of,
    prompt_dataset,
    reward_funcs,
    trl_args,
)
from pr1lib.training.preflight import dry_run_groups, gold_completions
from pr1lib.training.runs import (
    Run,
    check_variant,
    claim_run_dir,
    follow_hidden_plans,
    follow_start,
    last_checkpoint,
    resumable_checkpoint,
    save_configs,
    save_run,
    start_id,
    write_run_card,
)
from pr1lib.training.starts import check_start_world, run_name


def train_summary(rows: Sequence[dict], last: int = 10) -> dict[str, float]:
    """Means of the sampled (T = 1) training metrics over the last ``last`` logged steps.

    >>> rows = [{"step": 1, "parallel_ratio": 0.0}, {"step": 2, "parallel_ratio": 0.5}]
    >>> train_summary(rows, last=1)
    {'parallel_ratio': 0.5}
    """
    keys = (
        "reward",
        "accuracy",
        "parallel_ratio",
        "valid_ratio",
        "block_position",
        "completions/mean_length",
        "mean_paths",  # worlds that read their blocks' shares (WideWorld, PlanWorld)
        "split_rate",
    )
    tail = list(rows)[-last:]
    out = {}
    for key in keys:
        values = [r[key] for r in tail if r.get(key) is not None and not math.isnan(r[key])]
        if values:
            out[key] = round(statistics.fmean(values), 4)
    return out


# ----------------------------------------------------------------------------- N steps at a time
class GRPOSession:
    """One GRPO run folder, trained N steps at a time; every ``run`` resumes from the last
    checkpoint.

    ``run(steps)`` builds a fresh trainer from the current config (so a changed reward mode or
    window applies from the next step on), resumes from ``RUN/trainer/checkpoint-*`` (optimizer,
    scheduler, RNG, data position and step count) and saves a checkpoint when it stops, so two
    runs of 2 steps end with the same weights as one run of 4. After a disconnect, a new session on
    the same folder picks up where the last checkpoint left off.

    ``policy`` is a ready ``(model, tokenizer, peft_config)`` (tests reuse one base model);
    ``rewards`` replaces the config's reward functions (tests use one with guaranteed variance).
    A folder holding another start's or config's run is refused unless ``overwrite`` (then it
    moves aside) or ``follow`` (a notebook's own run: it moves aside with one line that names no
    machine path, ``pr1lib.training.runs.follow_start``); a start trained as the other parallel
    variant (seen for an unseen stage, or the reverse) unless ``cross_variant``.
    """

    def __init__(
        self,
        cfg: GRPOStageConfig,
        init: str | Path | None = None,
        out: str | Path | None = None,
        callbacks: Sequence[TrainerCallback] = (),
        model_cfg: ModelConfig | None = None,
        dashboard: Any = None,
        policy: tuple | None = None,
        rewards: Sequence[Callable] | None = None,
        overwrite: bool = False,
        follow: bool = False,
        cross_variant: bool = False,
    ) -> None:
        cfg = follow_hidden_plans(cfg, init)  # a start trained with hidden plans keeps them
        check_config(cfg)
        # a start trained as the other parallel variant: refused unless meant (the card says so)
        self.init_variant = check_variant(init, cfg.variant, cross_variant)
        self.cfg, self.init = cfg, init
        self.model_cfg = model_cfg or stage_model_config(cfg, init)
        # a start trained in another world than these problems': one line, before any folder
        check_start_world(cfg.source, None if self.model_cfg.random_init else self.model_cfg.name)
        self.run_dir = Path(out or runs_dir() / run_name(cfg))
        if follow and (note := follow_start(self.run_dir, init, cfg)):
            print(note, flush=True)
        claim_run_dir(self.run_dir, init, overwrite, cfg)  # another run: refused, or moved aside
        resumable_checkpoint(self.run_dir / "trainer")  # a damaged checkpoint: the one before
        set_threads(cfg.num_threads)
        set_seed(cfg.seed)
        self.model, self.tokenizer, self.peft_config = policy or load_training_policy(
            self.model_cfg, cfg.train_tag_rows
        )
        # None: reward_funcs(cfg), rebuilt at every run (the mode may change)
        self.rewards = rewards
        self.dataset = prompt_dataset(cfg, self.tokenizer, self.model_cfg.prompt_style)
        if (
            cfg.prefilter_k
        ):  # the edge of competence of the start checkpoint (pr1lib.training.completions)
            self.dataset = prefilter(self.dataset, self.model, self.tokenizer, cfg, grader_of(cfg))
        check_prompts(len(self.dataset), cfg)  # never an empty run that "finishes" at step 0
        self.dashboard = dashboard or Dashboard(self.run_dir / "metrics.csv", live=False)
        self.callbacks = [self.dashboard, *callbacks]
        self.trainer: ParallelGRPOTrainer | None = None
        self.train_seconds, self.started = 0.0, time.perf_counter()

    @property
    def profile(self) -> str:
        return self.cfg.profile

    @property
    def step(self) -> int:
        """Optimizer steps done so far (from the trainer, else the last checkpoint)."""
        if self.trainer is not None:
            return self.trainer.state.global_step
        ckpt = last_checkpoint(self.run_dir / "trainer")
        return int(ckpt.name.split("-")[-1]) if ckpt else 0

    def run(
        self, steps: int | None = None, callbacks: Sequence[TrainerCallback] = (), **changes: Any
    ) -> int:
        """Train ``steps`` more steps (default: up to ``cfg.max_steps``); ``changes`` update the
        config
        first (e.g. ``reward="structure"``). Returns the step reached."""
        self.cfg = self.cfg.replace(**changes) if changes else self.cfg
        done = self.step
        cfg = self.cfg.replace(max_steps=done + steps if steps is not None else self.cfg.max_steps)
        save_configs(self.run_dir, self.cfg, self.model_cfg)
        first = self.trainer is None
        model = self.model if first else self.trainer.model
        self.trainer = build_trainer(
            cfg,
            model,
            self.tokenizer,
            self.peft_config if first else None,
            self.dataset,
            self.run_dir / "trainer",
            self.model_cfg,
            [*self.callbacks, *callbacks, SaveAtEnd(), RoomToSave()],
            self.rewards,
        )
        ckpt = last_checkpoint(self.run_dir / "trainer")
        # nothing left: load the checkpoint (Trainer would step once)
        if ckpt is not None and cfg.max_steps <= done:
            self._load(ckpt)
            return done
        start = time.perf_counter()
        self.trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
        self.train_seconds += time.perf_counter() - start
        return self.trainer.state.global_step

    def _load(self, ckpt: Path) -> None:
        """The checkpoint's weights and step count, without training."""
        self.trainer._load_from_checkpoint(str(ckpt))
        self.trainer.state = TrainerState.load_from_json(str(ckpt / "trainer_state.json"))
        self.dashboard.on_train_begin(self.trainer.args, self.trainer.state, self.trainer.control)

    @property
    def rows(self) -> list[dict]:
        return self.dashboard.rows

    def save(self) -> dict[str, str]:
        """``adapter/`` and ``merged/`` in the run folder (the next stage starts from
        ``merged/``)."""
        if self.trainer is None:
            raise RuntimeError("nothing trained yet: call run() first")
        return save_run(self.trainer, self.tokenizer, self.run_dir, self.model_cfg)

    @property
    def policy(self) -> Any:
        return self.trainer.model if self.trainer is not None else self.model

    def evaluate(self, tiers: Sequence[str] = ("easy", "hard")) -> tuple[dict[str, dict], dict]:
        """Held-out metrics of the current policy per tier (``evaluate_stage``: mean@k at T = 1
        and greedy beside it, on the profile's held-out sets, in the rollouts' mode)."""
        metrics, samples = {}, {}
        for tier in tiers:
            cfg = self.cfg
            judge = held_out_config(
                self.profile,
                tier,
                cfg.eval_n,
                cfg.eval_rollout_mode,
                cfg.eval_max_new_tokens,
                cfg.eval_k,
                prompt_style=self.model_cfg.prompt_style,
                source=cfg.source,
                path_headers=cfg.path_headers,
                layout={k: getattr(cfg, k) for k in worlds.LAYOUT},  # as its rollouts
            )
            metrics[tier], samples[tier] = evaluate_stage(self.policy, self.tokenizer, judge)
        return metrics, samples


def check_prompts(count: int, cfg: GRPOStageConfig) -> None:
    """Refuse training on fewer prompts than one optimizer step takes (a data file shorter than
    ``train_n``, a prefilter that kept too few): TRL would stop at step 0 and call it done.

    >>> check_prompts(1, GRPOStageConfig.for_stage(3, "smoke"))
    Traceback (most recent call last):
    ...
    ValueError: only 1 training prompt(s) of tinygsm-hard are left (prefilter_range (0.1, 0.9) with prefilter_k=0): one optimizer step takes 2; add problems (train_n, the data) or widen prefilter_range
    """  # noqa: E501 - doctest output stays whole
    prompts = cfg.per_device_train_batch_size // cfg.num_generations
    if count < prompts:
        raise ValueError(
            f"only {count} training prompt(s) of {cfg.source} are left (prefilter_range "
            f"{cfg.prefilter_range} with prefilter_k={cfg.prefilter_k}): one optimizer step takes "
            f"{prompts}; add problems (train_n, the data) or widen prefilter_range"
        )


def run_grpo(
    cfg: GRPOStageConfig,
    init: str | Path | None = None,
    out: str | Path | None = None,
    callbacks: Sequence[TrainerCallback] = (),
    evaluate_tiers=("easy", "hard"),
    before: dict | None = None,
    dashboard: Any = None,
    preflight: bool = True,
    overwrite: bool = False,
    cross_variant: bool = False,
    follow: bool = False,
) -> Run:
    """Load ``init`` (or the profile's base), check, (evaluate), train to ``cfg.max_steps``
    (resuming from the run folder's last checkpoint), evaluate, save adapter + merged + run card.
    ``overwrite``: a folder begun from another start moves aside (else it is refused);
    ``follow``: the same, with one line naming no machine path (a notebook's own run);
    ``cross_variant``: ``init`` may have been trained as the other parallel variant."""
    start = time.perf_counter()
    session = GRPOSession(
        cfg,
        init,
        out,
        callbacks,
        dashboard=dashboard,
        overwrite=overwrite,
        follow=follow,
        cross_variant=cross_variant,
    )
    checks = doctor_checks(session) if preflight else []
    if checks:
        print(table(checks), flush=True)
    samples: dict[str, Any] = {}
    if evaluate_tiers and before is None:
        before, samples["before"] = session.evaluate(evaluate_tiers)
    session.run()
    return finish(session, before, evaluate_tiers, checks, start, samples)


def finish(
    session: GRPOSession,
    before: dict | None = None,
    evaluate_tiers: Sequence[str] = ("easy", "hard"),
    checks: Sequence[Any] = (),
    start: float | None = None,
    samples: dict | None = None,
) -> Run:
    """Evaluate the trained policy, save ``adapter/`` + ``merged/`` and write ``run_card.json``."""
    cfg, samples = session.cfg, dict(samples or {})
    after = None
    if evaluate_tiers:
        after, samples["after"] = session.evaluate(evaluate_tiers)
    rollout = session.trainer.rollout_func
    result = {
        "profile": cfg.profile,
        "stage": cfg.stage,
        "variant": cfg.variant,
        "reward": cfg.reward,
        "rollout": cfg.rollout_mode,
        "seed": cfg.seed,
        "init": str(session.init or session.model_cfg.name),
        "start": start_id(session.init),
        **({"init_variant": session.init_variant} if session.init_variant else {}),
        "data": cfg.source,
        "steps": session.step,
        "train_seconds": round(session.train_seconds, 1),
        "rollout_seconds": round(rollout.seconds, 1) if rollout is not None else None,
        "seconds": round(time.perf_counter() - (start or session.started), 1),
        "threads": torch.get_num_threads(),
        "doctor": {c.name: c.status for c in checks},
        "train": train_summary(session.rows),
        "before": before,
        "after": after,
        "run_dir": str(session.run_dir),
        **session.save(),
    }
    write_run_card(session.run_dir, result, cfg, session.model_cfg)
    return Run(result, session.run_dir, session.policy, session.tokenizer, session.rows, samples)


# ----------------------------------------------------------------------------- pre-flight doctor
def doctor_checks(session: GRPOSession, n: int = 8, groups: int = 2) -> list:
    """``pr1lib.training.doctor.doctor`` on the real tokenizer, prompt, batch and reward of a
    session, with ``n`` gold completions from the rule teacher's parallel traces and one dry-run
    group for each of the first ``groups`` prompts (more groups: a steadier ``group_variance``
    verdict)."""
    cfg, tok = session.cfg, session.tokenizer
    golds, answers = gold_completions(cfg, n)
    golds, answers = (golds or None), (answers or None)
    groups = dry_run_groups(session, n=groups)
    reward = reward_funcs(cfg)[0]
    step = cfg.window - 1 if REWARD_MODES[cfg.reward].scheduled else 0  # tiered: gold reaches 1.2
    return doctor(
        reward,
        gold_completions=golds,
        answers=answers,
        render=lambda p: chat_prompt(p, tok, session.model_cfg.prompt_style),
        tokenizer=tok,
        samples=golds,
        max_completion_length=cfg.max_completion_length,
        batch=trl_args(cfg, session.run_dir / "trainer", session.model_cfg),
        groups=groups["groups"],
        group_answers=groups["answers"],
        step=step,
    )

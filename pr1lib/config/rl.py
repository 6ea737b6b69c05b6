"""``GRPOStageConfig``: Stages 2-3, and how the recipe's tables make one for a stage.

>>> c = GRPOStageConfig.for_stage(3, "tiny", world="tinyworld"); c.data, c.max_completion_length
('tinyworld-hard', 384)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pr1lib import worlds
from pr1lib.config.checks import RELATIONS, allowed_values
from pr1lib.config.profiles import TINY_THREADS, Preset, check_profile
from pr1lib.config.recipe import (
    CLIP_HIGH,
    NOTEBOOK_PRESETS,
    ROLLOUT_MODES,
    STAGE_PRESETS,
    STAGE_REWARDS,
    STAGE_SOURCES,
    STAGES,
    VARIANT_ROLLOUT,
    VARIANTS,
)

ROLLOUTS = (*ROLLOUT_MODES, "trl")  # the engine's modes, or TRL's own model.generate


@dataclass(frozen=True)
class GRPOStageConfig(Preset):
    """Stages 2-3, GRPO (``pr1lib.training.grpo``). Knobs that are TRL's keep ``GRPOConfig``'s
    names.

    The paper's recipe (docs/recipe.md#8-grpo-hyper-parameters): group 8, clip 0.2 (0.28 high with
    the alternating S2 reward), no KL, T = 1.0, lr 1e-6, token-mean loss. The tiny profile keeps
    the group, clip, KL and temperature, and shrinks lengths and steps."""

    stage: int = 3  # 2: easy problems (GSM8K / TinyGSM-easy) | 3: hard ones (DAPO / TinyGSM-hard)
    reward: str = "alternating"  # a pr1lib.rewards.modes.REWARD_MODES name
    window: int = 10  # alternating: steps per window ...
    parallel_steps: int = 2  # ... of which the last ones use the tiered reward
    tiered_bonus: float = 0.2  # b: tiered pays 1 + b for a correct answer with a block (paper: 0.2)
    reward_weight: float = 1.0  # weight of the main reward (TRL reward_weights)
    extra_rewards: tuple[tuple[str, float], ...] = ()  # extra (mode, weight) terms
    grader: str | None = None  # official | project (pr1lib.rewards.graders); None: DEFAULT_GRADERS
    variant: str = "seen"  # seen: causal log-probs | unseen: path-isolating mask + positions
    rollout: str | None = (
        None  # forked | seen (pr1lib.decoding.rollout) | trl (model.generate); None: auto
    )
    train_forced_tokens: bool = True  # engine-inserted tags get loss, as in the official code
    data: str | None = (
        None  # problem source (pr1lib.data.sources.SOURCES); None: the stage's (profile)
    )
    train_n: int = 2000  # training problems (TinyGSM: generated; GSM8K / DAPO: the first N)
    num_generations: int = 8  # the group size G
    dynamic_sampling: bool = False  # drop groups whose rewards are all equal, refill (DAPO) ...
    max_refills: int = 3  # ... with fresh prompts for at most this many rounds per batch
    # DAPO-style prompt prefilter (pr1lib.training.completions.prefilter; off: not measured to pay
    # here): keep a prompt only if its pass rate over prefilter_k samples lies in prefilter_range
    # (ends included)
    prefilter_k: int = 0  # samples per prompt; 0: no prefilter
    prefilter_range: tuple[float, float] = (0.1, 0.9)  # (lowest, highest) pass rate kept
    per_device_train_batch_size: int = 64  # completions per optimizer step (= 8 prompts x G)
    gradient_accumulation_steps: int = 1
    max_completion_length: int = 320  # whole response: trunk, paths, injected tags, summary
    max_path_length: int = 64  # per path, tags included (the engine forces </Path> at the cap)
    max_blocks: int = 4  # the paper: after the 4th block decoding stops (no answer: reward -1)
    path_headers: bool = False  # forked: the engine opens path j with "(j+1)" (numbered paths)
    header_style: str = "number"  # path_headers' labels: "number" (1), (2) ... | "letter" (B), (C)
    num_paths: int = 2
    learning_rate: float = 2e-4
    lr_scheduler_type: str = "constant"
    warmup_steps: int = 0
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    max_steps: int = 60
    epsilon: float = 0.2
    epsilon_high: float | None = 0.28  # None: epsilon; 0.28 goes with the default S2 reward
    beta: float = 0.0  # no KL term and no reference model, as in the official scripts
    temperature: float = 1.0
    top_p: float = 1.0
    # exploration on the plan's width (RolloutConfig.width_temperature); 0: sampled at temperature
    width_temperature: float = 0.0
    hide_plan: bool = False  # unseen: paths do not read the plan line (RolloutConfig.hide_plan);
    # the rollouts and the trainer's mask both (a start trained with it needs it)
    loss_type: str = "dapo"  # token mean over the batch (verl's token-mean)
    scale_rewards: str = "group"  # A = (r - mean) / std within each group
    use_lora: bool = True
    lora_r: int = 16
    lora_alpha: int = 32
    train_tag_rows: bool = True  # with LoRA, the six tag rows of the embedding train too
    load_in_4bit: bool | None = None  # None: the profile's ModelConfig
    gradient_checkpointing: bool | None = None  # None: on with CUDA, off on CPU
    save_steps: int = 10  # checkpoint every N steps; a rerun resumes from the last one
    logging_steps: int = 1
    eval_n: int = 100  # held-out problems per tier before and after: eval_k samples each at T = 1
    eval_k: int = 4  # (the paper's protocol), and greedy beside it
    eval_max_new_tokens: int = 320
    eval_mode: str | None = None  # rollout mode of the before/after evaluation; None: as rollouts
    num_threads: int | None = TINY_THREADS  # torch CPU threads (tiny's); smoke: one
    merge_rollout_lora: bool = True  # sample from a copy with the LoRA merged in (sampling.py)
    fast_cache: bool = True  # RolloutConfig.fast_cache: in-place KV, re-reads on their rows only
    length_buckets: int = 8  # the loss runs in this many length-sorted chunks (less padding)
    share_prompts: bool = True  # the loss runs each distinct prompt once (buckets.by_prompt)
    seed: int = 0
    profile: str = "tiny"

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": dict(
            train_n=64,
            num_generations=4,
            per_device_train_batch_size=8,
            max_completion_length=48,
            max_path_length=16,
            max_steps=3,
            save_steps=2,
            eval_n=4,
            eval_k=2,
            eval_max_new_tokens=24,
            num_threads=1,
        ),
        "colab": dict(
            learning_rate=1e-5,
            per_device_train_batch_size=16,
            gradient_accumulation_steps=2,
            max_completion_length=1024,
            max_path_length=512,
            max_steps=100,
            eval_n=50,
            eval_max_new_tokens=1024,
            train_n=4000,
            num_threads=None,
        ),
        "paper": dict(
            variant="unseen",
            learning_rate=1e-6,
            use_lora=False,
            per_device_train_batch_size=16,
            gradient_accumulation_steps=64,
            max_completion_length=3000,
            max_path_length=4096,
            max_steps=300,
            eval_n=500,
            eval_max_new_tokens=3000,
            train_n=17917,
            num_threads=None,
        ),
    }

    @classmethod
    def for_stage(
        cls,
        stage: int,
        profile: str | None = None,
        variant: str | None = None,
        notebook: bool = False,
        world: str | None = None,
        **overrides: Any,
    ) -> GRPOStageConfig:
        """The profile's config for ``stage``: the variant's reward (``STAGE_REWARDS``) and its
        clip-high, the stage's problems and length, the notebook's sizes if asked, a ``world``'s
        problems and settings (``pr1lib.worlds``; ``None``: the profile's own), then
        ``overrides``.

        >>> c = GRPOStageConfig.for_stage(2, "smoke"); c.reward, c.max_steps, c.epsilon_high
        ('parallel_correct', 3, None)
        >>> GRPOStageConfig.for_stage(3, "paper").max_steps
        300
        >>> c = GRPOStageConfig.for_stage(3, "tiny", world="tinyworld"); c.data, c.rollout
        ('tinyworld-hard', 'seen')
        """
        if stage not in STAGES:
            raise ValueError(f"stage must be 2 (easy) or 3 (hard), got {stage!r}")
        profile = check_profile(profile)
        variant = (
            variant
            or overrides.pop("variant", None)
            or cls.PRESETS.get(profile, {}).get("variant", cls.variant)
        )
        if variant not in STAGE_REWARDS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        reward = overrides.pop("reward", STAGE_REWARDS[variant][stage])
        recipe = {
            "stage": stage,
            "variant": variant,
            "reward": reward,
            "epsilon_high": CLIP_HIGH.get(reward),
            "data": STAGE_SOURCES[profile][stage],
            **STAGE_PRESETS[stage].get(profile, {}),
        }
        short = NOTEBOOK_PRESETS[stage].get(profile, {}) if notebook else {}
        own = {}  # a named world's problems and settings; None: the profile's own problems
        if world is not None:
            chosen = worlds.get(world)
            own = {"data": chosen.stage_source(stage), **chosen.grpo_presets(variant)}
            own.update(chosen.notebook_sizes(stage, profile) if notebook else {})
        return cls.for_profile(profile, **{**recipe, **short, **own, **overrides})

    def check(self) -> None:
        """Refuse what each field alone allows but the fields together do not (and a reward or
        grader name its registry lacks): TRL would refuse it later, or train something else.
        Light: the command line runs it before anything loads."""
        for name, value in (("reward", self.reward), ("grader", self.grader)):
            allowed = allowed_values(name)  # registered by pr1lib.rewards.modes and graders
            if value is not None and allowed is not None and value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        if self.rollout_mode not in ROLLOUTS:
            raise ValueError(f"rollout must be one of {ROLLOUTS}, got {self.rollout_mode!r}")
        if self.parallel_steps > self.window:
            raise ValueError(
                f"parallel_steps={self.parallel_steps} counts tiered steps of each window: it "
                f"must be at most window={self.window}"
            )
        prompts = self.per_device_train_batch_size // self.num_generations
        if self.train_n < prompts:
            raise ValueError(
                f"train_n={self.train_n} problems make no optimizer step: one takes "
                f"per_device_train_batch_size / num_generations = {prompts} prompts"
            )
        if self.per_device_train_batch_size % self.num_generations:
            raise ValueError(
                f"per_device_train_batch_size={self.per_device_train_batch_size} counts "
                f"completions: it must be a multiple of num_generations={self.num_generations}"
            )
        for rule, why in self._needs():
            if rule:
                raise ValueError(why)
        kept = self.prefilter_range
        if len(kept) != 2 or not 0 <= kept[0] <= kept[1] <= 1:
            raise ValueError(
                f"prefilter_range={self.prefilter_range} must be two pass rates "
                "(lowest, highest) with 0 <= lowest <= highest <= 1"
            )

    def _needs(self) -> list[tuple[bool, str]]:
        """(broken, why) of the rules between the variant, the rollouts and the reward."""
        trl = self.rollout_mode == "trl"
        return [
            (
                self.variant == "unseen" and self.rollout_mode != "forked",
                "the unseen variant trains on paths that never saw each other: use "
                "rollout='forked'",
            ),
            (
                self.dynamic_sampling and trl,
                "dynamic_sampling refills batches through the rollout engine: use rollout=None",
            ),
            (
                bool(self.prefilter_k) and trl,
                "prefilter_k samples the prompts through the rollout engine: use rollout=None",
            ),
            (
                self.variant == "plain" and self.reward != "accuracy",
                f"the plain variant writes no blocks, so the {self.reward} reward would pay it "
                "nothing: use reward='accuracy' (the paper's GRPO baseline)",
            ),
        ]

    @property
    def source(self) -> str:
        """The training problems: ``data``, else the stage's source for the profile."""
        return self.data or STAGE_SOURCES[self.profile][self.stage]

    @property
    def clip_high(self) -> float:
        """TRL's ``epsilon_high``: as set, else ``epsilon`` (symmetric clipping)."""
        return self.epsilon if self.epsilon_high is None else self.epsilon_high

    @property
    def rollout_mode(self) -> str:
        """``rollout``, else ``VARIANT_ROLLOUT[variant]``: the forked engine's merged summary would
        put a seen model's paths at restarted positions it never trained on."""
        return self.rollout or VARIANT_ROLLOUT[self.variant]

    @property
    def eval_rollout_mode(self) -> str:
        """``eval_mode``, else the training rollouts' mode (``trl`` evaluates in ``seen`` mode)."""
        return self.eval_mode or ("seen" if self.rollout_mode == "trl" else self.rollout_mode)


def hidden_plans(cfg: Any) -> str | None:
    """What is wrong with ``hide_plan`` on a config whose blocks are not path-isolated: a causal
    (seen) stream reads every token before it, so nothing can be hidden (``None``: nothing).

    >>> from types import SimpleNamespace as S
    >>> hidden_plans(S(hide_plan=True, variant="seen"))[:44]
    'hide_plan: a plan is hidden only by the unse'
    """
    if not getattr(cfg, "hide_plan", False):
        return None
    kind = getattr(cfg, "variant", None) or getattr(cfg, "mode", None)
    if kind in ("unseen", "forked", None):
        return None
    return (
        f"hide_plan: a plan is hidden only by the unseen mask and forked rollouts, not {kind!r} "
        "(use --variant unseen, or leave hide_plan off)"
    )


RELATIONS.append(hidden_plans)  # every config with hide_plan: GRPO, SFT, eval, rollouts

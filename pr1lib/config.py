"""Every per-profile and per-stage table of the recipe, and one frozen config per stage.

Every stage has one frozen dataclass whose defaults are the ``tiny`` values; ``PRESETS`` holds
the per-profile overrides that ``for_profile`` applies (``pr1lib.profiles``: the profile is
resolved once and travels inside the config as ``cfg.profile``):

>>> ModelConfig.for_profile("smoke").random_init
True
>>> ModelConfig.for_profile("paper").name
'Qwen/Qwen3-4B-Base'
>>> GRPOStageConfig.for_stage(2, "tiny").data, GRPOStageConfig.for_stage(3, "paper").data
('tinygsm-easy', 'dapo')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pr1lib.profiles import Preset, check_profile
from pr1lib.validate import register_choices

# seen: plain causal | unseen: path-isolating mask + positions | plain: no tags (the GRPO baseline)
VARIANTS = ("seen", "unseen", "plain")
PARALLEL_VARIANTS = ("seen", "unseen")  # the two that learn blocks in a cold-start SFT
# seen: one causal stream | forked: paths forked from the prefix cache, merged as the unseen mask
# sees them | reread: paths forked, then re-read in order before the summary (the paper's rollout)
ROLLOUT_MODES = ("seen", "forked", "reread")
# How each variant rolls out, in RL and in evaluation (docs/recipe.md#6-the-rollout-engine): the
# paper samples the paths of both variants independently; the summary reads them as the variant
# trains (unseen: forked, merged with restarted positions; seen: re-read causally, in order); the
# plain baseline samples one stream and never opens a block.
VARIANT_ROLLOUT = {"seen": "reread", "unseen": "forked", "plain": "seen"}
# The prompt a variant is trained and evaluated with, per profile: the parallel variants use the
# paper's v3 prompt (the tiny model: its own plain prompt), the plain one the baseline prompt.
PROMPTS: dict[str, dict[str, str]] = {
    "smoke": {"seen": "tiny", "unseen": "tiny", "plain": "tiny"},
    "tiny": {"seen": "tiny", "unseen": "tiny", "plain": "tiny"},
    "colab": {"seen": "v3", "unseen": "v3", "plain": "baseline"},
    "paper": {"seen": "v3", "unseen": "v3", "plain": "baseline"},
}
STAGES = (2, 3)  # the RL stages: 2 = easy problems (GSM8K), 3 = hard ones (DAPO)
TIERS = ("easy", "hard")
WORLDS = ("tinygsm", "tinyworld")  # the tiny problem worlds: pr1lib.tasks, pr1lib.world
# the values these fields may take, checked in every config (pr1lib.validate.check_fields)
register_choices(
    variant=VARIANTS,
    mode=ROLLOUT_MODES,
    eval_mode=ROLLOUT_MODES,
    rollout=(*ROLLOUT_MODES, "trl"),
    world=WORLDS,
)


# ----------------------------------------------------------------------------- the recipe's tables
# Problems of each RL stage per profile: easy first (the paper's GSM8K stage), then hard (DAPO).
STAGE_SOURCES: dict[str, dict[int, str]] = {
    "smoke": {2: "tinygsm-easy", 3: "tinygsm-hard"},
    "tiny": {2: "tinygsm-easy", 3: "tinygsm-hard"},
    "colab": {2: "gsm8k", 3: "dapo"},
    "paper": {2: "gsm8k", 3: "dapo"},
}
# TinyWorld's RL stages (docs/tinyworld.md#rl): blocks reach ~250 tokens; full FT at lr 1e-4
# learned in 60 steps where 3e-4 lost format (seed 0). The seen split block's path 2 takes the
# cheap price path 1 did not, so it samples plainly; per variant: unseen keeps its forked probes.
WORLD_SOURCES: dict[str, dict[int, str]] = {"tinyworld": {2: "tinyworld-easy", 3: "tinyworld-hard"}}
WORLD_INITS = {
    "tinyworld": {
        "sft": "data/tinyworld-sft",
        "unseen": "data/tinyworld-sft-unseen",
        "plain": "data/tinyworld-base",
    }
}
WORLD_PRESETS: dict[str, dict[str, Any]] = {
    "tinyworld": dict(
        rollout="seen",
        max_completion_length=384,
        max_path_length=128,
        eval_max_new_tokens=384,
        use_lora=False,
        learning_rate=1e-4,
        dynamic_sampling=True,
    )
}
WORLD_VARIANT_PRESETS: dict[str, dict[str, dict]] = {"tinyworld": {"unseen": dict(rollout=None)}}
# Held-out evaluation sets per profile (pr1lib.evalsets names), never seen in training.
EVAL_SETS: dict[str, dict[str, str]] = {
    "smoke": {"easy": "tinygsm-easy", "hard": "tinygsm-hard"},
    "tiny": {"easy": "tinygsm-easy", "hard": "tinygsm-hard"},
    "colab": {"easy": "gsm8k", "hard": "math500-int"},
    "paper": {"easy": "gsm8k", "hard": "math500-int"},
}
# The paper's stage recipe per variant (docs/recipe.md#9-the-stage-recipe-per-variant): (variant,
# stage) -> reward mode. Seen: Stage 2 parallel-and-correct on easy problems, Stage 3 accuracy on
# hard ones. Unseen skips Stage 2 and runs Stage 3 as S1 (accuracy) or S2 (alternating: the
# default here); Stage 2 runs only when a study puts it back. Plain: accuracy on the same data and
# steps as seen (the paper's "GRPO + RL on GSM8K" row of Table 2).
RECIPES: dict[str, dict[int, str]] = {
    "seen": {2: "parallel_correct", 3: "accuracy"},
    "unseen": {2: "parallel_correct", 3: "alternating"},
    "plain": {2: "accuracy", 3: "accuracy"},
}
# Clip-high paired with a reward, as the paper's S2 script pairs 0.28 with the alternating reward
# (S1 and S2 are reward schemes, not stages: docs/recipe.md#7-rewards); other rewards clip at
# epsilon. ``GRPOStageConfig.for_stage`` takes the reward's pair unless epsilon_high is given.
CLIP_HIGH: dict[str, float] = {"alternating": 0.28}
CURRICULA: dict[str, tuple[int, ...]] = {"seen": (2, 3), "unseen": (3,), "plain": (2, 3)}
# Per-stage overrides on top of the profile: Stage 2 is short (the paper: 35 steps vs 300).
STAGE_PRESETS: dict[int, dict[str, dict[str, Any]]] = {
    2: {
        "smoke": dict(max_steps=3),
        "tiny": dict(max_steps=15),
        "colab": dict(max_steps=40),
        "paper": dict(max_steps=35),
    },
    3: {},
}
# Notebook 06 (notebook=True): on tiny, smaller batches and a shorter Stage 3 keep `make tour`
# short; on colab, every run of the notebook fits one T4 hour (pr1lib.budget shows the arithmetic).
COLAB_NOTEBOOK = dict(
    per_device_train_batch_size=16,
    gradient_accumulation_steps=1,
    max_completion_length=384,
    max_path_length=160,
    eval_n=16,
    eval_k=2,
    eval_max_new_tokens=384,
    save_steps=2,
)
NOTEBOOK_PRESETS: dict[int, dict[str, dict[str, Any]]] = {
    2: {"tiny": dict(per_device_train_batch_size=32), "colab": dict(COLAB_NOTEBOOK, max_steps=4)},
    3: {
        "tiny": dict(per_device_train_batch_size=32, max_steps=30),
        "colab": dict(COLAB_NOTEBOOK, max_steps=6),
    },
}
# The reward ablation (the paper's Table 4, run on the unseen variant from its SFT): arm -> reward.
# The paper's "parallel only" arm is most likely the tiered reward on every step (80.3 % parallel,
# not ~100 %); "structure" (blocks whatever the answer) is this project's extra arm.
ABLATION_ARMS: dict[str, str] = {
    "accuracy": "accuracy",
    "alternating": "alternating",
    "parallel": "tiered",
    "structure": "structure",
}
ABLATION_VARIANT = "unseen"
# The grader (pr1lib.graders.GRADERS) that decides correctness and tag validity in each stage,
# unless the stage's config names one (GRPOStageConfig.grader / EvalConfig.grader). RL keeps this
# project's grader, whose strict grammar the reward values are defined with; evaluation reports the
# official answer check as ``accuracy`` (the paper's numbers) and both graders in the summary.
DEFAULT_GRADERS = {"stage2": "project", "stage3": "project", "eval": "official"}
# verl export: the reward of each RL set (Stage 2 on GSM8K; Stage 3 on DAPO; TinyGSM either).
VERL_REWARDS: dict[str, str] = {
    "gsm8k": "parallel_correct",
    "dapo": "alternating",
    "tinygsm-easy": "alternating",
    "tinygsm-hard": "alternating",
}


@dataclass(frozen=True)
class ModelConfig(Preset):
    """Which policy model to load and how (see ``pr1lib.models.load_policy``)."""

    name: str = "data/tiny-base"  # hub id or local folder (relative paths: from the repo root)
    random_init: bool = False  # smoke: build a random tiny Qwen3 in memory instead of loading
    load_in_4bit: bool = False  # NF4 through BitsAndBytesConfig
    dtype: str = "float32"  # compute dtype: float32 on CPU, bfloat16/float16 on GPU
    attn_implementation: str = "sdpa"  # sdpa | eager | flex_attention (never flash: no 4D masks)
    use_lora: bool = False  # wrap in PEFT LoRA for training stages
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_target_modules: tuple[str, ...] = ("all-linear",)
    gradient_checkpointing: bool = False
    prompt_style: str = "tiny"  # pr1lib.prompts style: "tiny" for the embedded model, "v3": Qwen
    seed: int = 0
    profile: str = "tiny"

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": dict(name="random-tiny-qwen3", random_init=True),
        "tiny": dict(),
        "colab": dict(
            name="Qwen/Qwen3-0.6B-Base",
            load_in_4bit=True,
            dtype="float16",
            use_lora=True,
            gradient_checkpointing=True,
            prompt_style="v3",
        ),
        "paper": dict(
            name="Qwen/Qwen3-4B-Base",
            dtype="bfloat16",
            use_lora=False,
            gradient_checkpointing=True,
            prompt_style="v3",
        ),
    }


@dataclass(frozen=True)
class PretrainConfig(Preset):
    """How ``python -m pr1lib pretrain-tiny`` makes the tiny base model (``pr1lib.pretrain``)."""

    vocab_size: int = 512  # byte-level BPE on TinyGSM text, digits split one by one
    hidden_size: int = 128  # Qwen3 architecture, tied embeddings
    num_layers: int = 4
    num_heads: int = 4  # head_dim = hidden_size // num_heads
    num_kv_heads: int = 4
    intermediate_size: int = 384
    max_position_embeddings: int = 1024  # room for parallel traces and long GRPO rollouts
    max_steps: int = 1100  # optimizer steps; every step draws fresh TinyGSM train problems
    batch_size: int = 48  # problems per step
    hard_fraction: float = 0.2  # share of each batch from the hard tier (the rest is easy)
    world: str = "tinygsm"  # the problems: tinygsm (pr1lib.tasks) | tinyworld (pr1lib.world)
    length_buckets: int = 2  # each batch runs as this many length-sorted chunks (less padding)
    learning_rate: float = 3e-3  # AdamW peak
    warmup_steps: int = 60  # linear warm-up, then cosine decay to min_lr_ratio * learning_rate
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    logging_steps: int = 10  # one loss-curve row every N steps
    save_steps: int = 100  # checkpoint into OUT/checkpoint every N steps; a rerun resumes there
    eval_n: int = 200  # held-out test problems per tier for the final accuracy
    max_new_tokens: int = 256  # generation budget when measuring accuracy
    num_threads: int = 2  # torch CPU threads (the target is a 2-core laptop)
    seed: int = 0
    profile: str = "tiny"

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": dict(
            max_steps=10,
            batch_size=8,
            warmup_steps=2,
            logging_steps=2,
            save_steps=5,
            eval_n=4,
            max_new_tokens=48,
            num_threads=1,
        ),
    }


@dataclass(frozen=True)
class ColdStartConfig(Preset):
    """How ``python -m pr1lib coldstart`` builds the cold-start SFT set (``pr1lib.coldstart``)."""

    source: str = "gsm8k"  # gsm8k | dapo | tinygsm-easy | tinygsm-hard (pr1lib.data.SOURCES)
    split: str = "train"
    limit: int | None = None  # first N problems (None: all; TinyGSM: 2,000)
    teacher: str = "rule"  # rule | hf | openai (pr1lib.teachers); every profile defaults to rule
    teacher_model: str = ""  # LLM teachers: hub id or folder / served model ($PR1_TEACHER_MODEL)
    llm_limit: int = 8  # problems the notebook sends to an LLM teacher (the demo, not the set)
    base_url: str = ""  # openai: server URL ending in /v1 ($OPENAI_BASE_URL)
    load_in_4bit: bool = False  # hf teacher: NF4 4-bit
    max_new_tokens: int = 2048  # LLM teachers: sampling budget per trace
    temperature: float = 0.7
    batch_size: int = 256  # rule teacher: problems per call and cache write (what a ^C loses)
    llm_batch_size: int = 16  # the same for LLM teachers (also the HF teacher's generation batch)
    timeout: float = 120.0  # openai teacher: seconds to connect or for the next byte, per attempt
    deadline: float = 600.0  # openai teacher: wall-clock seconds per problem, retries included
    max_retries: int = 4  # openai teacher: retries after 408/429/5xx, a timeout, a lost line
    requests_per_minute: float = 0.0  # openai teacher: 0 = no limit
    concurrency: int = 4  # openai teacher: requests in flight at once
    max_consecutive_failures: int = 8  # openai teacher: stop after N failures in a row; 0: never
    prompt_style: str = "tiny"  # the SFT prompt column's style (ModelConfig.prompt_style)
    max_tokens: int = 1024  # budget for prompt + completion (the tiny model's context)
    dedupe: bool = True  # keep one trace per distinct question
    seed: int = 0
    profile: str = "tiny"

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": dict(limit=300, llm_limit=4),
        "colab": dict(
            prompt_style="v3",
            max_tokens=4096,
            teacher_model="Qwen/Qwen3-1.7B",
            load_in_4bit=True,
            llm_limit=32,
        ),
        "paper": dict(
            prompt_style="v3",
            max_tokens=4096,
            max_new_tokens=8192,
            llm_limit=512,
            teacher_model="deepseek-ai/DeepSeek-R1-0528-Qwen3-8B",
        ),
    }


@dataclass(frozen=True)
class SFTStageConfig(Preset):
    """Stage 1, cold-start SFT (``pr1lib.sft``). Knobs that are TRL's keep ``SFTConfig``'s names."""

    variant: str = "seen"  # seen: plain causal | unseen: path-isolating 4D mask + positions
    learning_rate: float = 2e-3  # LoRA on a ~1M-parameter model wants a large step (1e-3: no tags)
    lr_scheduler_type: str = "cosine"
    warmup_ratio: float = 0.1
    num_train_epochs: float = 3.0  # tiny: 2 epochs cost 4-9 points of easy accuracy (notebook 04)
    max_steps: int = -1  # > 0 overrides num_train_epochs
    per_device_train_batch_size: int = 16
    gradient_accumulation_steps: int = 1
    max_length: int = 1024  # prompt + completion tokens; longer examples are dropped, never cut
    weight_decay: float = 0.01
    adam_beta2: float = 0.95  # the paper's AdamW betas are (0.9, 0.95)
    max_grad_norm: float = 1.0
    loss_reduction: str = "sample"  # sample: mean of per-sample token means (paper) | token
    use_lora: bool = True  # False: full fine-tuning (the paper)
    lora_r: int | None = 64  # the tiny model is 128 wide; rank 16 underfits (None: ModelConfig's)
    lora_alpha: int | None = 128
    train_tag_rows: bool = True  # with LoRA, the six tag rows of the embedding train too
    load_in_4bit: bool | None = None  # NF4 through BitsAndBytesConfig; None: the profile's
    gradient_checkpointing: bool | None = None  # None: on with CUDA, off on CPU
    logging_steps: int = 5
    train_n: int = 2000  # cold-start examples built with the rule teacher without a data folder
    source: str = "tinygsm-easy+tinygsm-hard"  # "+"-joined sources; easy-only SFT erases hard skill
    plain_share: float = 0.0  # share of rows trained without their block (format.linearize):
    # a cold start that opens blocks only sometimes, so RL can choose (the ablation's start)
    eval_n: int = 200  # held-out easy problems before/after (the protocol: eval_k samples at T = 1,
    eval_k: int = 4  # ... and greedy beside it; 200 x 4 leave about ±2 points of noise)
    eval_max_new_tokens: int = 256
    eval_mode: str | None = None  # rollout mode before/after; None: seen -> seen, unseen -> forked
    budget_vram_gib: float | None = None  # stated budget for the GPU profiles (memory_estimate)
    budget_minutes: float | None = None
    num_threads: int | None = 1  # torch CPU threads; 1 is fastest for the tiny model
    seed: int = 0
    profile: str = "tiny"

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": dict(
            max_steps=4,
            per_device_train_batch_size=4,
            max_length=512,
            logging_steps=1,
            train_n=24,
            eval_n=4,
            eval_k=2,
            eval_max_new_tokens=24,
        ),
        "colab": dict(
            learning_rate=2e-4,
            num_train_epochs=1.0,
            per_device_train_batch_size=4,
            gradient_accumulation_steps=4,
            max_length=2048,
            train_n=2000,
            source="gsm8k",
            eval_n=50,
            eval_max_new_tokens=1024,
            budget_vram_gib=15.0,
            budget_minutes=30.0,
            num_threads=None,
            lora_r=None,
            lora_alpha=None,
        ),
        "paper": dict(
            variant="unseen",
            learning_rate=1e-5,
            num_train_epochs=5.0,
            per_device_train_batch_size=1,
            gradient_accumulation_steps=128,
            max_length=4096,
            use_lora=False,
            train_n=7473,
            source="gsm8k",
            eval_n=500,
            eval_max_new_tokens=3000,
            num_threads=None,
            lora_r=None,
            lora_alpha=None,
        ),
    }

    @property
    def rollout_mode(self) -> str:
        """The rollout mode of the before/after evaluation: ``eval_mode``, else the variant's."""
        return self.eval_mode or VARIANT_ROLLOUT[self.variant]


@dataclass(frozen=True)
class NotebookConfig(Preset):
    """The sizes of the notebooks' own demonstrations (the stages have their own configs)."""

    model_profile: str = "tiny"  # notebook 00 shows the tiny model (smoke: the random one)
    model_label: str = "tiny model (0.92M params)"  # how tables name this profile's model
    show: int = 3  # completions printed per tier
    max_new_tokens: int = 256
    eval_n: int = 50  # problems per tier in a quick accuracy check
    path_len: int = 48  # notebook 03's timing demo: tokens per path ...
    repeats: int = 3  # ... and timed repeats
    nll_n: int = 64  # held-out examples in notebook 04's loss comparison
    llm_teacher: str = "standin"  # notebook 02's LLM demo: standin (no model) | hf (a real one)
    benchmarks: tuple[str, ...] = ("tinygsm-hard",)  # notebook 07's table: sets, problems, k
    table_n: int | None = 100  # as notebook 06 scores each stage; at 40, a row moved by ±4 points
    table_k: int = 4
    switch: int = 10  # notebook 07's mid-training scaffold: switch and total steps ...
    total: int = 20
    window: int = 10  # ... its alternating window (the last 2 steps tiered, as in the paper)
    scaffold_eval_n: int = 30
    scaffold_batch: int = 16
    profile: str = "tiny"

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": dict(
            model_profile="smoke",
            model_label="smoke (random weights)",
            show=2,
            max_new_tokens=48,
            eval_n=4,
            path_len=8,
            repeats=1,
            nll_n=16,
            table_n=4,
            benchmarks=("tinygsm-easy",),
            table_k=2,
            switch=2,
            total=4,
            window=2,
            scaffold_eval_n=4,
            scaffold_batch=8,
        ),
        "colab": dict(
            model_label="Qwen3 small (colab)",
            llm_teacher="hf",
            table_n=100,
            switch=50,
            benchmarks=("gsm8k", "math500"),
            total=100,
            window=10,
            scaffold_eval_n=50,
        ),
        "paper": dict(
            model_label="Qwen3-4B-Base (this repo)",
            llm_teacher="hf",
            table_n=None,
            benchmarks=("aime25", "aime24", "amc23", "math500"),
            table_k=16,
            switch=200,
            total=300,
            window=10,
            scaffold_eval_n=500,
        ),
    }


@dataclass(frozen=True)
class EvalConfig(Preset):
    """``python -m pr1lib eval`` / ``pr1lib.evaluate.run_eval``: benchmark, samples, sampling."""

    benchmark: str = "tinygsm-easy"  # pr1lib.evalsets.EVALSETS
    n: int | None = 100  # problems: the first n of the benchmark (None: all)
    k: int = 4  # samples per problem: mean@k and pass@k
    mode: str = "seen"  # seen: one causal stream | forked: paths sampled independently
    temperature: float = 1.0  # the paper samples at T=1.0, top_p=1.0
    top_p: float = 1.0
    max_completion_length: int = 256  # response budget in tokens (the paper: 3000)
    num_paths: int = 2  # forked mode: paths the engine opens per block (the paper: always 2)
    max_blocks: int = 4  # blocks per response; the engine stops after the last (the paper)
    max_path_length: int = 128  # forked mode: tokens per path, tags included (the paper: 4096)
    engine: str = "auto"  # rollout | generate | auto (rollout when the tokenizer has the tags)
    batch_size: int = 16  # prompts per generation call (each gives k samples)
    grader: str | None = None  # accuracy / pass_at_k: official | project; None: DEFAULT_GRADERS
    prompt_style: str | None = None  # None: the profile's ModelConfig.prompt_style
    seed: int = 0
    profile: str = "tiny"

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": dict(n=4, k=2, max_completion_length=32, max_path_length=12, batch_size=4),
        "colab": dict(
            benchmark="gsm8k",
            n=200,
            k=4,
            max_completion_length=1024,
            max_path_length=512,
            batch_size=8,
        ),
        "paper": dict(
            benchmark="aime25",
            n=None,
            k=16,
            max_completion_length=3000,
            max_path_length=4096,
            batch_size=8,
        ),
    }


@dataclass(frozen=True)
class RolloutConfig(Preset):
    """How ``pr1lib.rollout.generate`` samples completions (docs/recipe.md#6-the-rollout-engine)."""

    mode: str = "forked"  # "forked": paths decoded as k rows from the prefix cache | "seen": plain
    # | "reread": forked paths, then re-read one after another for a causal summary (the paper's)
    num_paths: int = 2  # k paths per <Parallel> block (the paper's num_paths=2)
    max_blocks: int = 4  # blocks per sample; <Parallel> is masked out after this many
    at_block_limit: str = "stop"  # "stop": end at the last block's </Summary> (paper) | "mask"
    max_completion_length: int = 384  # hard budget on completion tokens (all paths counted)
    max_path_length: int = 128  # tokens per path incl. <Path> and </Path>; </Path> forced at cap
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    distinct_greedy_paths: bool = True  # greedy forked: path j opens with the (j+1)-th best token
    fast_cache: bool = True  # KV appended in place, re-reads on their rows (False: the old engine)
    profile: str = "tiny"

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": dict(max_completion_length=64, max_path_length=24),
        "colab": dict(max_completion_length=1024, max_path_length=512),
        "paper": dict(max_completion_length=3000, max_path_length=4096),
    }


@dataclass(frozen=True)
class GRPOStageConfig(Preset):
    """Stages 2-3, GRPO (``pr1lib.grpo``). Knobs that are TRL's keep ``GRPOConfig``'s names.

    The paper's recipe (docs/recipe.md#8-grpo-hyper-parameters): group 8, clip 0.2 (0.28 high with
    the alternating S2 reward), no KL, T = 1.0, lr 1e-6, token-mean loss. The tiny profile keeps
    the group, clip, KL and temperature, and shrinks lengths and steps."""

    stage: int = 3  # 2: easy problems (GSM8K / TinyGSM-easy) | 3: hard ones (DAPO / TinyGSM-hard)
    reward: str = "alternating"  # a pr1lib.rewards.REWARD_MODES name
    window: int = 10  # alternating: steps per window ...
    parallel_steps: int = 2  # ... of which the last ones use the tiered reward
    tiered_bonus: float = 0.2  # b: tiered pays 1 + b for a correct answer with a block (paper: 0.2)
    reward_weight: float = 1.0  # weight of the main reward (TRL reward_weights)
    extra_rewards: tuple[tuple[str, float], ...] = ()  # extra (mode, weight) terms
    grader: str | None = None  # official | project (pr1lib.graders); None: DEFAULT_GRADERS
    variant: str = "seen"  # seen: causal log-probs | unseen: path-isolating mask + positions
    rollout: str | None = None  # forked | seen (pr1lib.rollout) | trl (model.generate); None: auto
    train_forced_tokens: bool = True  # engine-inserted tags get loss, as in the official code
    data: str | None = None  # problem source (pr1lib.data.SOURCES); None: the stage's (profile)
    train_n: int = 2000  # training problems (TinyGSM: generated; GSM8K / DAPO: the first N)
    num_generations: int = 8  # the group size G
    dynamic_sampling: bool = False  # drop groups whose rewards are all equal, refill (DAPO) ...
    max_refills: int = 3  # ... with fresh prompts for at most this many rounds per batch
    # DAPO-style prompt prefilter (pr1lib.sampling.prefilter; off: not measured to pay here): keep a
    # prompt only if its pass rate over prefilter_k samples lies in prefilter_range (ends included)
    prefilter_k: int = 0  # samples per prompt; 0: no prefilter
    prefilter_range: tuple[float, float] = (0.1, 0.9)  # (lowest, highest) pass rate kept
    per_device_train_batch_size: int = 64  # completions per optimizer step (= 8 prompts x G)
    gradient_accumulation_steps: int = 1
    max_completion_length: int = 320  # whole response: trunk, paths, injected tags, summary
    max_path_length: int = 64  # per path, tags included (the engine forces </Path> at the cap)
    max_blocks: int = 4  # the paper: after the 4th block decoding stops (no answer: reward -1)
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
    num_threads: int | None = 1  # torch CPU threads: one is fastest for the tiny model
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
        """The profile's config for ``stage``: the variant's reward (``RECIPES``) and its clip-high,
        the stage's problems and length, the notebook's sizes if asked, a tiny ``world``'s problems
        and settings (``WORLD_*PRESETS``; ``None``: the profile's), then ``overrides``.

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
        if variant not in RECIPES:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        reward = overrides.pop("reward", RECIPES[variant][stage])
        recipe = {
            "stage": stage,
            "variant": variant,
            "reward": reward,
            "epsilon_high": CLIP_HIGH.get(reward),
            "data": STAGE_SOURCES[profile][stage],
            **STAGE_PRESETS[stage].get(profile, {}),
        }
        short = NOTEBOOK_PRESETS[stage].get(profile, {}) if notebook else {}
        world = None if world == "tinygsm" else world  # the profile's own problems
        if world not in (None, *WORLD_PRESETS):
            raise ValueError(f"world must be one of {WORLDS}, got {world!r}")
        tiny = (
            {
                "data": WORLD_SOURCES[world][stage],
                **WORLD_PRESETS[world],
                **WORLD_VARIANT_PRESETS[world].get(variant, {}),
            }
            if world
            else {}
        )
        return cls.for_profile(profile, **{**recipe, **short, **tiny, **overrides})

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

"""One frozen config per stage besides GRPO's (``pr1lib.config.rl``): the model, pretraining, the
cold start, SFT, the notebooks' demonstrations, evaluation and the rollout engine. Defaults are the
``tiny`` values; ``PRESETS`` holds the per-profile overrides ``for_profile`` applies.

>>> ModelConfig.for_profile("smoke").random_init, EvalConfig.for_profile("paper").k
(True, 16)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pr1lib import worlds
from pr1lib.config.checks import register_choices
from pr1lib.config.profiles import TINY_THREADS, Preset, check_profile
from pr1lib.config.recipe import VARIANT_ROLLOUT
from pr1lib.format.grammar import HEADER_STYLES

register_choices(trace_style=("parallel", "serial", "noplan"), header_style=HEADER_STYLES)


@dataclass(frozen=True)
class ModelConfig(Preset):
    """Which policy model to load and how (see ``pr1lib.decoding.models.load_policy``)."""

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
    prompt_style: str = (
        "tiny"  # pr1lib.format.prompts style: "tiny" for the embedded model, "v3": Qwen
    )
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
    """How ``python -m pr1lib pretrain-tiny`` makes the tiny base model
    (``pr1lib.training.pretrain``)."""

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
    world: str = "tinygsm"  # the problems: tinygsm (pr1lib.worlds.tasks) | tinyworld (pr1lib.world)
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

    # the byte-level tokenizer starts from the 256 bytes and <|endoftext|>; a tiny prompt is under
    # 128 tokens (pr1lib.training.pretrain measures the texts themselves before training)
    MIN_VOCAB: ClassVar[int] = 257
    PROMPT_ROOM: ClassVar[int] = 128

    def __post_init__(self) -> None:
        super().__post_init__()  # types and ranges first
        for broken, why in self._shapes():
            if broken:
                raise ValueError(why)

    def _shapes(self) -> list[tuple[bool, str]]:
        """(broken, why) of the rules between the architecture's sizes."""
        heads, kv, width = self.num_heads, self.num_kv_heads, self.hidden_size
        head_dim = width // heads
        return [
            (
                width % heads != 0,
                f"hidden_size={width} must be a multiple of num_heads={heads} (each head takes "
                "hidden_size // num_heads of it)",
            ),
            (
                head_dim % 2 != 0,
                f"hidden_size // num_heads = {head_dim} must be even (rotary position "
                "embeddings turn pairs of dimensions)",
            ),
            (
                heads % kv != 0,
                f"num_heads={heads} must be a multiple of num_kv_heads={kv} (each key/value head "
                "serves a whole group of query heads)",
            ),
            (
                self.vocab_size < self.MIN_VOCAB,
                f"vocab_size={self.vocab_size} must be at least {self.MIN_VOCAB}: the byte-level "
                "tokenizer starts from the 256 bytes and <|endoftext|>",
            ),
            (
                self.max_position_embeddings < self.max_new_tokens + self.PROMPT_ROOM,
                f"max_position_embeddings={self.max_position_embeddings} must be at least "
                f"max_new_tokens + {self.PROMPT_ROOM} = {self.max_new_tokens + self.PROMPT_ROOM}"
                " (a prompt and the answer the model generates for its accuracy)",
            ),
        ]


@dataclass(frozen=True)
class ColdStartConfig(Preset):
    """How ``python -m pr1lib coldstart`` builds the cold-start SFT set
    (``pr1lib.data.coldstart``)."""

    source: str = (
        "gsm8k"  # gsm8k | dapo | tinygsm-easy | tinygsm-hard (pr1lib.data.sources.SOURCES)
    )
    split: str = "train"
    limit: int | None = None  # first N problems (None: all; TinyGSM: 2,000)
    teacher: str = (
        "rule"  # rule | hf | openai (pr1lib.worlds.teachers); every profile defaults to rule
    )
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
    """Stage 1, cold-start SFT (``pr1lib.training.sft``). Knobs that are TRL's keep ``SFTConfig``'s
    names."""

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
    trace_style: str = "parallel"  # serial: the block rows with their tags taken out, nothing else
    # changed (format.serialize): the serial-search control of docs/tinyworld.md; noplan: the
    # plan line taken out (format.plans.drop_plans), the plan-removed control of docs/planworld.md
    path_headers: bool = False  # each path opens with its number, "(1) ", "(2) " (an extension
    # for paths that split a search without seeing each other: format.number_paths)
    hide_plan: bool = False  # unseen: paths do not read the plan line (structure, hidden plans)
    eval_n: int = 200  # held-out easy problems before/after (the protocol: eval_k samples at T = 1,
    eval_k: int = 4  # ... and greedy beside it; 200 x 4 leave about ±2 points of noise)
    eval_max_new_tokens: int = 256
    eval_mode: str | None = None  # rollout mode before/after; None: seen -> seen, unseen -> forked
    budget_vram_gib: float | None = None  # stated budget for the GPU profiles (memory_estimate)
    budget_minutes: float | None = None
    num_threads: int | None = TINY_THREADS  # torch CPU threads (tiny's); smoke: one
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
            num_threads=1,
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

    @classmethod
    def for_world(
        cls, world: str, profile: str | None = None, variant: str = "seen", **overrides: Any
    ) -> SFTStageConfig:
        """The profile's config with a world's cold start (``World.sft_overrides``), then
        ``overrides``; ``smoke`` keeps its own sizes (a few rows and steps).

        >>> c = SFTStageConfig.for_world("tinyworld", "tiny"); c.source, c.use_lora, c.train_n
        ('tinyworld-easy+tinyworld-hard', False, 12000)
        """
        profile = check_profile(profile)
        chosen = worlds.get(world).sft_overrides(variant)
        if overrides.get("trace_style", chosen.get("trace_style")) == "noplan":
            worlds.check_planned(world)
        sizes = cls.PRESETS["smoke"] if profile == "smoke" else {}
        return cls.for_profile(profile, **{**chosen, **sizes, "variant": variant, **overrides})

    @property
    def rollout_mode(self) -> str:
        """The rollout mode of the before/after evaluation: ``eval_mode``, else the variant's."""
        return self.eval_mode or VARIANT_ROLLOUT[self.variant]


@dataclass(frozen=True)
class NotebookConfig(Preset):
    """The sizes of the notebooks' own demonstrations (the stages have their own configs)."""

    world: str | None = "tinyworld"  # the task world of the notebooks' main line (pr1lib.worlds);
    # None: the profile's real data (GSM8K, DAPO); TinyGSM is the contrast where blocks do not pay
    model_profile: str = "tiny"  # notebook 00 shows the tiny model (smoke: the random one)
    model_label: str = "tiny model (0.92M params)"  # how tables name this profile's model
    show: int = 3  # completions printed per tier
    max_new_tokens: int = 256
    eval_n: int = 50  # problems per tier in a quick accuracy check
    path_len: int = 48  # notebook 03's timing demo: tokens per path ...
    repeats: int = 3  # ... and timed repeats
    nll_n: int = 64  # held-out examples in notebook 04's loss comparison
    # notebook 04's live SFT runs: this many steps (rows: steps x batch, one epoch) of the world's
    # cold start; None: the stage config's own length (smoke: 4 steps; colab, paper: their recipe)
    sft_steps: int | None = 150
    llm_teacher: str = "standin"  # notebook 02's LLM demo: standin (no model) | hf (a real one)
    benchmarks: tuple[str, ...] = ("tinyworld-hard",)  # notebook 07's table: sets, problems, k
    table_n: int | None = 200  # the headline's problems: its 95 % intervals stay within ±5 points
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
            sft_steps=None,
            table_n=4,
            benchmarks=("tinyworld-easy",),
            table_k=2,
            switch=2,
            total=4,
            window=2,
            scaffold_eval_n=4,
            scaffold_batch=8,
        ),
        "colab": dict(
            world=None,
            sft_steps=None,
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
            world=None,
            sft_steps=None,
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
    """``python -m pr1lib eval`` / ``pr1lib.evaluation.evaluate.run_eval``: benchmark, samples,
    sampling."""

    benchmark: str = "tinygsm-easy"  # pr1lib.data.evalsets.EVALSETS
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
    path_headers: bool = False  # forked: the engine opens path j with "(j+1)" (numbered paths)
    header_style: str = "number"  # path_headers' labels: "number" (1), (2) ... | "letter" (B), (C)
    hide_plan: bool = False  # forked: paths do not read the plan line (RolloutConfig.hide_plan)
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
    """How ``pr1lib.decoding.rollout.generate`` samples completions
    (docs/recipe.md#6-the-rollout-engine)."""

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
    path_headers: bool = False  # forked: path j opens with its number "(j+1)" (format.number_paths)
    header_style: str = "number"  # path_headers' labels: "number" (1), (2) ... | "letter" (B), (C)
    fast_cache: bool = True  # KV appended in place, re-reads on their rows (False: the old engine)
    # the plan's one-more-item choice (the token after an item's letter) is sampled at this
    # temperature, 0: at ``temperature``; RL exploration only, log-probs stay at ``temperature``
    width_temperature: float = 0.0
    # forked: a block's plan line (and <Parallel>) is read by nothing after it: paths start where
    # it did (pr1lib.decoding.structure, hidden plans); the model must be trained with it
    hide_plan: bool = False
    profile: str = "tiny"

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": dict(max_completion_length=64, max_path_length=24),
        "colab": dict(max_completion_length=1024, max_path_length=512),
        "paper": dict(max_completion_length=3000, max_path_length=4096),
    }

    SHARED: ClassVar[tuple[str, ...]] = (
        "num_paths",
        "max_blocks",
        "max_completion_length",
        "max_path_length",
        "temperature",
        "top_p",
        "path_headers",
        "header_style",
        "hide_plan",
        "profile",
    )  # the fields a stage's or an evaluation's config gives its rollouts under the same names

    @classmethod
    def of(cls, settings: Any, mode: str, **extra: Any) -> "RolloutConfig":
        """The rollout settings ``SHARED`` with ``settings`` (a ``GRPOStageConfig`` or an
        ``EvalConfig``), in ``mode``, plus ``extra``.

        >>> RolloutConfig.of(EvalConfig(temperature=0.5), "seen").temperature
        0.5
        """
        return cls(mode=mode, **{name: getattr(settings, name) for name in cls.SHARED}, **extra)

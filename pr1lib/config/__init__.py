"""config: every per-profile and per-stage table of the recipe, and one frozen config per stage.

Every stage has one frozen dataclass whose defaults are the ``tiny`` values; ``PRESETS`` holds
the per-profile overrides that ``for_profile`` applies (``pr1lib.config.profiles``: the profile is
resolved once and travels inside the config as ``cfg.profile``). The tables are in
``config.recipe``, the configs in ``config.stages`` and ``config.rl``; this package exports them
all under one name. Beside them: the cost tiers (``profiles``), the process a stage runs in
(seeds, threads, ranks: ``runtime``) and every input checked before a file is written
(``checks``: ``--set`` values, counts, model and data folders; ``arguments``: the one-line parser
and argument types every command line shares, the benchmarks' too).

May import: ``worlds``, ``format``, ``store``.


>>> ModelConfig.for_profile("smoke").random_init
True
>>> ModelConfig.for_profile("paper").name
'Qwen/Qwen3-4B-Base'
>>> GRPOStageConfig.for_stage(2, "tiny").data, GRPOStageConfig.for_stage(3, "paper").data
('tinygsm-easy', 'dapo')
"""

from pr1lib.config.recipe import (
    CLIP_HIGH,
    COLAB_NOTEBOOK,
    CURRICULA,
    DEFAULT_GRADERS,
    EVAL_SETS,
    NOTEBOOK_PRESETS,
    PARALLEL_VARIANTS,
    PROMPTS,
    ROLLOUT_MODES,
    STAGE_PRESETS,
    STAGE_REWARDS,
    STAGE_SOURCES,
    STAGES,
    TIERS,
    VARIANT_ROLLOUT,
    VARIANTS,
    VERL_REWARDS,
)
from pr1lib.config.rl import GRPOStageConfig
from pr1lib.config.stages import (
    ColdStartConfig,
    EvalConfig,
    ModelConfig,
    NotebookConfig,
    PretrainConfig,
    RolloutConfig,
    SFTStageConfig,
)

__all__ = [
    "CLIP_HIGH",
    "COLAB_NOTEBOOK",
    "CURRICULA",
    "DEFAULT_GRADERS",
    "EVAL_SETS",
    "NOTEBOOK_PRESETS",
    "PARALLEL_VARIANTS",
    "PROMPTS",
    "ROLLOUT_MODES",
    "STAGE_PRESETS",
    "STAGE_REWARDS",
    "STAGE_SOURCES",
    "STAGES",
    "TIERS",
    "VARIANT_ROLLOUT",
    "VARIANTS",
    "VERL_REWARDS",
    "ColdStartConfig",
    "EvalConfig",
    "GRPOStageConfig",
    "ModelConfig",
    "NotebookConfig",
    "PretrainConfig",
    "RolloutConfig",
    "SFTStageConfig",
    "arguments",
    "checks",
    "profiles",
    "recipe",
    "rl",
    "runtime",
    "stages",
]

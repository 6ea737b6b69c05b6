"""worlds: the tiny task families the tiny profile trains on, one file each, and their registry.

A world is a family of problems in GSM8K's record shape (``<<a+b=c>>`` steps, ``#### N``) with
everything the pipeline needs to know about it: its generator and split, its rule teacher and
plain-solution writer, its evaluation budgets, its shipped checkpoints and its RL presets. Its
problems are the sources ``<name>-<tier>`` (``tinyworld-hard``): data loading, the evaluation
sets, the cold-start teacher and the stage configs ask this registry what a source is, so adding
a world is one file in this folder plus one line in ``BUILTIN`` (docs/architecture.md).

Besides the worlds it holds what they share: the rule teacher every world builds on
(``teachers``) and TinyGSM's generator with the disjoint split every world uses (``tasks``).

May import: ``format``, ``store``.

>>> names()
('tinygsm', 'tinyworld', 'wideworld', 'planworld')
>>> world, tier = find_source("tinyworld-hard"); world.title, tier
('TinyWorld', 'hard')
>>> find_source("gsm8k") is None, get("tinyworld").init("unseen")
(True, 'data/tinyworld-sft-unseen')
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = [
    "World",
    "check_planned",
    "find_source",
    "get",
    "names",
    "register",
    "sources",
    "tasks",
    "teachers",
]

# the worlds this package registers on import: one module per name, in this folder
BUILTIN = ("tinygsm", "tinyworld", "wideworld", "planworld")
# the variants a world's presets and starts are keyed by (config.recipe.VARIANTS; a test keeps
# the two equal): a misspelt one is an error, never a world's defaults in silence
VARIANTS = ("seen", "unseen", "plain")


def check_variant(variant: str) -> str:
    """``variant`` after checking it is one of ``VARIANTS``.

    >>> check_variant("unsen")
    Traceback (most recent call last):
    ...
    ValueError: unknown variant 'unsen'; choose one of seen, unseen, plain
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    return variant


@dataclass(frozen=True)
class World:
    """One task world. ``generate(n, tier, split, seed)`` returns ``{"question", "answer"}``
    records; ``rule_teacher(seed=0, **options)`` makes a ``pr1lib.worlds.teachers`` teacher for its
    problems; ``plain_solution(question, completion)`` is the same item solved without a block."""

    name: str
    title: str  # how prose and cards name it
    generate: Callable[..., list[dict]]
    rule_teacher: Callable[..., Any]
    plain_solution: Callable[[str, str], str]
    # the same item as one serial stream (the serial-search control); None: ``format.serialize``
    serial_solution: Callable[[str, str], str] | None = None
    # "guess" or "search": how a completion answered (a world whose traces may stop after a
    # checked guess); None: the world has no answer modes
    answer_mode: Callable[[str], str] | None = None
    # per block of a completion to ``question``: did its paths take their assigned shares (a
    # world whose paths are told their share); None: the world assigns no shares
    block_splits: Callable[[str, str], list[bool]] | None = None
    # whether every check a completion writes to ``question`` adds the prices of the deal it
    # names (the honest grader's rule); None: the world's checks are not read
    checks_hold: Callable[[str, str], bool] | None = None
    # its cold start keeps traces without a block (a checked guess that answers, an easy item):
    # the same answer modes in every arm's rows; False: only traces with a block (the paper's)
    blockless_rows: bool = False
    # other worlds whose models may start this one's stages (a world built on another's problems
    # and base model); its own models always may
    starts_from: tuple[str, ...] = ()
    tiers: tuple[str, ...] = ("easy", "hard")
    tier_labels: dict[str, str] = field(default_factory=dict)  # a model card's words per tier
    # shipped folders (relative to the repository): "base", and the SFT per variant ("seen",
    # "unseen"); a missing key has no shipped checkpoint (the stages train one)
    checkpoints: dict[str, str] = field(default_factory=dict)
    # evaluation and rollout lengths its traces need (EvalConfig / GRPOStageConfig names)
    budgets: dict[str, int] = field(default_factory=dict)
    stage_presets: dict[str, Any] = field(default_factory=dict)  # GRPO overrides for its RL
    variant_presets: dict[str, dict[str, Any]] = field(default_factory=dict)  # per variant
    sft_presets: dict[str, Any] = field(default_factory=dict)  # SFTStageConfig: its cold start
    sft_variant_presets: dict[str, dict[str, Any]] = field(default_factory=dict)  # per variant
    stages: dict[int, str] = field(default_factory=dict)  # RL stage -> tier (2: easy, 3: hard)
    # notebook 06's sizes on its problems (``notebook=True``), per stage and profile, on top of
    # ``config.NOTEBOOK_PRESETS``: stage -> profile -> GRPOStageConfig overrides
    notebook_presets: dict[int, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def rollout(self, variant: str) -> str | None:
        """The rollout mode this world's RL samples ``variant`` with (``None``: the recipe's own,
        ``config.VARIANT_ROLLOUT``); its checkpoints are evaluated the same way."""
        presets = self.variant_presets.get(check_variant(variant), {})
        return {**self.stage_presets, **presets}.get("rollout")

    def source(self, tier: str) -> str:
        """The source name of one tier: ``tinyworld-hard``."""
        if tier not in self.tiers:
            raise ValueError(f"{self.name} has tiers {self.tiers}, not {tier!r}")
        return f"{self.name}-{tier}"

    def sources(self) -> tuple[str, ...]:
        return tuple(self.source(t) for t in self.tiers)

    def stage_source(self, stage: int) -> str:
        """The problems of RL ``stage``: easy ones for Stage 2, hard ones for Stage 3."""
        return self.source(self.stages.get(stage, "easy" if stage == 2 else "hard"))

    def init(self, variant: str = "seen") -> str | None:
        """The shipped start of this world's RL for ``variant``: its SFT, or for ``plain`` (no
        cold start) its base model; ``None`` when none is shipped."""
        return self.checkpoints.get("base" if check_variant(variant) == "plain" else variant)

    def layout(self) -> dict[str, Any]:
        """How a block of its traces is laid out for the rollout engine (``RolloutConfig`` names:
        ``num_paths``, ``path_headers``); ``{}``: the engine's defaults (two unnumbered paths)."""
        return {k: self.budgets[k] for k in LAYOUT if k in self.budgets}

    def sft_overrides(self, variant: str) -> dict[str, Any]:
        """Its cold-start SFT overrides for ``variant`` (its problems, rows and schedule)."""
        return {**self.sft_presets, **self.sft_variant_presets.get(check_variant(variant), {})}

    def notebook_sizes(self, stage: int, profile: str) -> dict[str, Any]:
        """Notebook 06's sizes for ``stage`` on this world's problems in ``profile`` (``{}``: the
        profile's own notebook sizes)."""
        if stage not in (2, 3):
            raise ValueError(f"RL stages are 2 and 3, not {stage!r}")
        return self.notebook_presets.get(stage, {}).get(profile, {})

    def grpo_presets(self, variant: str) -> dict[str, Any]:
        """Its GRPO overrides for ``variant``: its lengths, stage presets, the variant's own."""
        presets = self.variant_presets.get(check_variant(variant), {})
        return {**self.budgets, **self.stage_presets, **presets}


LAYOUT = (
    "num_paths",
    "path_headers",
    "header_style",
    "hide_plan",
)  # the budgets that say how its blocks are laid out
REGISTRY: dict[str, World] = {}


def register(world: World) -> World:
    """Add ``world`` (a name registered twice is replaced: a test's toy world, a reloaded file)."""
    if "-" in world.name or not world.name:
        raise ValueError(f"a world's name is one word without '-', got {world.name!r}")
    REGISTRY[world.name] = world
    return world


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def get(name: str) -> World:
    """The world called ``name``; a clear error listing the known ones otherwise."""
    if name not in REGISTRY:
        raise ValueError(f"unknown world {name!r}; choose one of {', '.join(REGISTRY)}")
    return REGISTRY[name]


def check_planned(name: str) -> None:
    """Refuse the plan-removed trace style in a world whose traces hold no plan (its blocks'
    paths are not laid out by the model's plan, ``header_style="plan"``).

    >>> check_planned("planworld")
    >>> check_planned("tinyworld")
    Traceback (most recent call last):
    ...
    ValueError: trace_style='noplan' (the plan-removed control) takes out the plan before each block, and TinyWorld's traces hold none: run it on a world whose model writes its plan (planworld)
    """  # noqa: E501 - doctest output stays whole

    def planned(world: str) -> bool:
        return get(world).layout().get("header_style") == "plan"

    if not planned(name):
        raise ValueError(
            "trace_style='noplan' (the plan-removed control) takes out the plan before each "
            f"block, and {get(name).title}'s traces hold none: run it on a world whose model "
            f"writes its plan ({', '.join(filter(planned, names()))})"
        )


def find_source(source: str) -> tuple[World, str] | None:
    """``(world, tier)`` when ``source`` is one of a world's sources, else ``None``."""
    name, _, tier = source.partition("-")
    world = REGISTRY.get(name)
    return (world, tier) if world is not None and tier in world.tiers else None


def sources() -> tuple[str, ...]:
    """Every world's sources, in registration order."""
    return tuple(s for world in REGISTRY.values() for s in world.sources())


for _name in BUILTIN:
    importlib.import_module(f"{__name__}.{_name}")

"""Where a stage starts (the variant's SFT run, the newest Stage 2 of a seed, or the base model)
and the folder a stage run gets by default (``run_name``).

The command line, the notebooks and the studies (``pr1lib.experiments``) all ask here, so a stage
run by hand and the same stage inside a study start from the same checkpoint.
"""

from __future__ import annotations

from pathlib import Path

from pr1lib import worlds
from pr1lib.config import CURRICULA, GRPOStageConfig, PretrainConfig
from pr1lib.store.jsonl import read_json
from pr1lib.store.paths import REPO_ROOT, runs_dir, shown
from pr1lib.training.runs import CARD, model_dir, recorded_variant


def run_name(cfg: GRPOStageConfig) -> str:
    """``grpo-<profile>-<variant>-s<stage>-<reward>-seed<seed>``.

    >>> run_name(GRPOStageConfig(stage=2, reward="tiered"))
    'grpo-tiny-seen-s2-tiered-seed0'
    """
    return f"grpo-{cfg.profile}-{cfg.variant}-s{cfg.stage}-{cfg.reward}-seed{cfg.seed}"


def sft_run(variant: str, profile: str) -> Path | None:
    """The variant's SFT run folder: ``runs/sft-<profile>-<variant>`` (the command line), else
    ``runs/04_sft_lora-<profile>/<variant>`` (notebook 04); ``None`` when neither has
    ``merged/``."""
    root = runs_dir()
    for folder in (root / f"sft-{profile}-{variant}", root / f"04_sft_lora-{profile}" / variant):
        if (folder / "merged").is_dir():
            return folder
    return None


def default_init(stage: int, variant: str, profile: str, seed: int = 0) -> Path | None:
    """Where a stage starts by default: Stage 3 of a variant with a Stage 2 from the newest Stage 2
    run of this seed; else the variant's SFT run (``sft_run``); else ``None``, the base model
    (always so for the plain baseline, which has no SFT)."""
    if stage == 3 and 2 in CURRICULA[variant]:
        pattern = f"grpo-{profile}-{variant}-s2-*-seed{seed}/merged"
        found = sorted(runs_dir().glob(pattern), key=lambda p: p.stat().st_mtime)
        if found:
            return found[-1].parent
    return None if variant == "plain" else sft_run(variant, profile)


def notebook_start(
    profile: str,
    seed: int = 0,
    world: str | None = None,
    init: str | Path | None = None,
    variant: str = "seen",
) -> str | Path | None:
    """Where a notebook's Stage 2 starts (notebook 06, and notebook 05's doctor): ``init`` when
    given; in a world (``NotebookConfig.world``: TinyWorld on ``tiny`` and ``smoke``) its shipped
    SFT of ``variant``; else the variant's SFT run (``default_init``); ``None``: none, the base.

    >>> notebook_start("smoke", world="tinyworld") == REPO_ROOT / "data" / "tinyworld-sft"
    True
    """
    if init:
        return init
    shipped = worlds.get(world).init(variant) if world else None
    return REPO_ROOT / shipped if shipped else default_init(2, variant, profile, seed)


def start_world(model: str | Path | None) -> str | None:
    """The world whose problems ``model`` (a run folder or a model folder) was trained on, from the
    card beside it: a stage run's ``run_card.json`` (its ``data``, or its config's ``source``), a
    shipped model's ``card.json`` (its config's ``source``; a pretrained base's ``world``).
    ``None`` when no card names one world: a hub model, real data, a random start.

    >>> start_world("data/tinyworld-sft-unseen"), start_world("data/tiny-base"), start_world(None)
    ('tinyworld', 'tinygsm', None)
    """
    folder = model_dir(model) if model is not None else None
    if folder is None:
        return None
    for where in (folder, folder.parent) if folder.name == "merged" else (folder,):
        for name in (CARD, "card.json"):
            if (where / name).is_file():
                return _card_world(
                    read_json(where / name, "restore it (git checkout), or give another model"),
                    where,
                )
    return None


def _card_world(card: dict, folder: Path) -> str | None:
    """The one world a card's training problems belong to (``None``: none, or several)."""
    config = card.get("config") or {}
    if (folder / "pretrain_config.json").is_file():  # a base model pretrained on one world
        return config.get("world", PretrainConfig.world)
    source = card.get("data") or config.get("source") or config.get("data") or ""
    found = [worlds.find_source(part) for part in str(source).split("+")]
    names = {hit[0].name for hit in found if hit is not None}
    return names.pop() if len(names) == 1 and None not in found else None


def check_start_world(source: str, model: str | Path | None, rows: bool = False) -> None:
    """Refuse to train ``model`` on ``source`` (one source, or several joined by "+") when
    ``model`` was trained in another world (a TinyWorld SFT on TinyGSM problems scores 0 and
    learns nothing): one line saying which world to give the stage. Real data, hub models and
    random starts pass. ``rows``: the problems are an SFT's rows (the fix is a start of their
    world, not another world for the stage).

    >>> check_start_world("tinyworld-hard", "data/tinyworld-sft-unseen")
    >>> check_start_world("tinygsm-hard", "data/tinyworld-sft-unseen")
    Traceback (most recent call last):
    ...
    ValueError: data/tinyworld-sft-unseen was trained on TinyWorld problems, but this stage ...
    """
    have = start_world(model)
    for part in str(source).split("+"):
        found = worlds.find_source(part.strip())
        if found is None or have is None or have in (found[0].name, *found[0].starts_from):
            continue
        title = worlds.get(have).title if have in worlds.names() else have
        theirs = found[0].name
        fix = (
            f"start from a {found[0].title} model (--world {theirs} starts from its base, or "
            f"--model DIR), or give {title} rows"
            if rows
            else f"give the stage its start's world (world={have!r}, --world {have})"
        )
        raise ValueError(
            f"{shown(model)} was trained on {title} problems, but this stage trains on {source} "
            f"({found[0].title}): {fix}"
        )


def check_rows_world(rows_sources: set[str], world: str | None, data: str | Path) -> None:
    """Refuse training rows (a saved cold-start set's ``source`` values) that are not the
    problems of ``world`` (``--world``), or that mix worlds: the stage would learn one world's
    format from another's answers.

    >>> check_rows_world({"wideworld-easy"}, "wideworld", "runs/cs")
    >>> check_rows_world({"gsm8k"}, "wideworld", "runs/cs")
    Traceback (most recent call last):
    ...
    ValueError: --data runs/cs holds gsm8k rows, but --world wideworld trains on WideWorld ...
    """
    found = {s: worlds.find_source(s) for s in sorted(rows_sources)}
    theirs = {hit[0].name if hit else None for hit in found.values()}
    if world is None or theirs <= {world}:
        return
    chosen = worlds.get(world)
    raise ValueError(
        f"--data {shown(data)} holds {', '.join(found)} rows, but --world {world} trains on "
        f"{chosen.title} problems: give a {chosen.title} cold-start set (coldstart --source "
        f"{'+'.join(chosen.sources())}), or leave --world out"
    )


def check_sft_start(
    source: str, model: str | Path | None, data: str | Path | None, world: str | None = None
) -> None:
    """Refuse an SFT whose rows are another world's problems than its start was trained on, or
    than ``world`` (``--world``) names: the rows of ``data`` (a saved cold-start set, by its
    ``source`` column), else ``source`` (the rule teacher's problems). Real data and hub models
    pass."""
    from pr1lib.data.savedsets import dataset_sources

    rows = dataset_sources(data) if data is not None else set()
    if rows:
        check_rows_world(rows, world, data)
    for part in sorted(rows) or [source]:
        check_start_world(part, model, rows=True)


# the rollout mode a model is decoded in, per variant it was trained as: the seen SFT reads its
# paths in one causal stream (as its traces were written), the unseen one forks them (as its mask
# trained it), the plain baseline writes no block
DECODE_MODES = {"seen": "seen", "unseen": "forked", "plain": "seen"}


def trained_as(model: str | Path | None) -> tuple[str | None, str | None]:
    """``(variant, world)`` the model in ``model`` was trained as and on, from the card and
    configs beside it (``runs.recorded_variant``, ``start_world``); ``None`` where they say
    nothing (a hub id, a base model's variant).

    >>> trained_as("data/wideworld-sft-unseen"), trained_as("Qwen/Qwen3-0.6B-Base")
    (('unseen', 'wideworld'), (None, None))
    """
    if model is None:
        return None, None
    return recorded_variant(model), start_world(model)


def told_otherwise(model: str | Path, asked: dict[str, str | None]) -> str | None:
    """One line when a flag decodes ``model`` otherwise than its card says (``asked``: ``mode``
    and ``world`` as given, ``None`` where not given); ``None`` when nothing differs.

    >>> told_otherwise("data/wideworld-sft-unseen", {"mode": "seen", "world": None})[:61]
    'note: data/wideworld-sft-unseen was trained as the unseen var'
    """
    variant, world = trained_as(model)
    parts = []
    mode = DECODE_MODES.get(variant or "")
    if asked.get("mode") and mode and asked["mode"] != mode:
        parts.append(
            f"trained as the {variant} variant (decoded {mode}), decoded {asked['mode']} as asked"
        )
    if asked.get("world") and world and asked["world"] != world:
        parts.append(f"trained on {world} problems, measured on {asked['world']}'s as asked")
    return f"note: {shown(model)} was {'; '.join(parts)}" if parts else None

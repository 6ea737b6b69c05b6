"""Run folders, shared by SFT and GRPO: which start a run began from, checkpoints, save, load,
run card (claiming a folder: ``pr1lib.store.folders``).

A finished run folder holds ``config.json`` and ``model_config.json`` (what ran),
``adapter/`` (LoRA + tag rows, when LoRA trained), ``merged/`` (a plain model for
``from_pretrained``: the next stage's start), a per-step CSV (``loss.csv`` for SFT,
``metrics.csv`` for GRPO), ``trainer/checkpoint-N`` (GRPO, for resume) and ``run_card.json``
(the result, both configs and the library versions).

>>> start_id(None), is_run_folder("Qwen/Qwen3-4B-Base")
('base', False)
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pr1lib.config import ModelConfig
from pr1lib.config.checks import local_folder
from pr1lib.store.disk import check_room
from pr1lib.store.folders import FolderError, is_main_process, move_aside, next_prev
from pr1lib.store.jsonl import read_json
from pr1lib.store.modelfiles import model_hash, safetensors_header, torch_file_damage
from pr1lib.store.paths import shown

CARD = "run_card.json"
DAMAGED = ".damaged"  # a checkpoint that cannot be resumed from is renamed checkpoint-N.damaged


@dataclass
class Run:
    """What a stage made: the JSON-able ``result``, the trained policy, its per-step rows (SFT
    loss or the GRPO dashboard's metrics) and sampled completions (``before`` / ``after``)."""

    result: dict[str, Any]
    run_dir: Path
    model: Any = field(repr=False)
    tokenizer: Any = field(repr=False)
    rows: list[dict] = field(default_factory=list, repr=False)
    samples: dict[str, Any] = field(default_factory=dict, repr=False)


# ----------------------------------------------------------------------------- identity
def model_dir(init: str | Path) -> Path | None:
    """The local model folder ``init`` names (a run folder's ``merged/``), ``None`` for a hub id."""
    found = local_folder(init)
    if found is None:
        return None
    return found / "merged" if (found / "merged").is_dir() else found


def start_id(init: str | Path | None) -> str:
    """Which checkpoint a run starts from: its name plus a hash of its content
    (``pr1lib.store.modelfiles.model_hash``: config, tokenizer, weights), so a folder retrained in
    place is another start and a copy elsewhere the same model.

    >>> start_id(None), start_id("Qwen/Qwen3-4B-Base")
    ('base', 'Qwen/Qwen3-4B-Base')
    """
    if init is None:
        return "base"
    folder = model_dir(init)
    return str(init) if folder is None or not folder.is_dir() else f"{init}#{model_hash(folder)}"


def _stamp_id(init: str | Path) -> str:
    """The start as folders marked before content hashes wrote it (weight files' sizes and
    times): such a folder still counts as begun from the same start while they are unchanged."""
    folder = Path(init) / "merged"
    files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    stamp = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    return f"{init}#{hashlib.sha256(repr(stamp).encode()).hexdigest()[:8]}" if stamp else str(init)


def same_start(theirs: str | None, init: str | Path | None) -> bool:
    """Whether a recorded start (``start.json``, a run card's ``start``) is ``init`` now: the same
    id, or the same content hash under another folder name (a copy or a link elsewhere).

    >>> same_start("runs/a/sft#7c685d83", "base"), same_start("base", None)
    (False, True)
    """
    ours = start_id(init)
    if theirs == ours or (init is not None and theirs == _stamp_id(init)):
        return True
    content = (theirs or "").rpartition("#")[2]  # a model_hash has 16 digits, a stamp 8
    return "#" in ours and len(content) == 16 and content == ours.rpartition("#")[2]


def is_run_folder(init: str | Path | None) -> bool:
    """True when ``init`` is a finished run folder (it holds ``merged/``), not a hub id or the
    base."""
    return init is not None and (Path(init) / "merged").is_dir()


def last_checkpoint(folder: str | Path) -> Path | None:
    """The ``checkpoint-N`` with the largest N under ``folder`` (``None`` if there is none)."""
    found = [
        p
        for p in Path(folder).glob("checkpoint-*")
        if p.is_dir() and p.name.split("-")[-1].isdigit()
    ]
    return max(found, key=lambda p: int(p.name.split("-")[-1])) if found else None


def checkpoint_damage(ckpt: Path) -> str | None:
    """Why a trainer's ``checkpoint-N`` cannot be resumed from (``None``: it can): its state,
    weights, optimizer and scheduler must be there and whole (a save cut short leaves less)."""
    try:
        json.loads((ckpt / "trainer_state.json").read_text())["global_step"]
    except (OSError, ValueError, KeyError, TypeError):
        return "its trainer_state.json is missing or damaged"
    weights = sorted(ckpt.glob("*.safetensors"))
    if not weights:
        return "it holds no weights"
    for path in [*weights, ckpt / "optimizer.pt", ckpt / "scheduler.pt"]:
        if not path.is_file():
            return f"it has no {path.name}"
        try:
            if path.suffix == ".safetensors":
                safetensors_header(path)
            elif torch_file_damage(path):  # torch.save writes a zip: a cut one has no end
                return f"its {path.name} is damaged (a write cut short?)"
        except ValueError:
            return f"its {path.name} is damaged (a write cut short?)"
    return None


def resumable_checkpoint(folder: str | Path) -> Path | None:
    """The last ``checkpoint-N`` under ``folder`` that can be resumed from. A damaged one is
    renamed ``checkpoint-N.damaged`` (kept, never deleted) with a note, and the one before it is
    used; ``None`` when none is left."""
    while (ckpt := last_checkpoint(folder)) is not None:
        why = checkpoint_damage(ckpt)
        if why is None:
            return ckpt
        aside = ckpt.with_name(ckpt.name + DAMAGED)
        aside = next_prev(aside) if aside.exists() else aside
        if is_main_process():
            ckpt.rename(aside)
        before = last_checkpoint(folder)
        print(
            f"note: {ckpt} cannot be resumed from ({why}): kept as {aside.name}; "
            + (f"resuming from {before.name}" if before else "starting from step 0"),
            flush=True,
        )
        if not is_main_process():
            return before
    return None


# ----------------------------------------------------------------------------- variants
# starts a stage may train as the other parallel variant (the command line's --cross-variant)
CROSS_VARIANT: set[str] = set()


def recorded_variant(init: str | Path | None) -> str | None:
    """The variant the run or model folder ``init`` was trained as, from its SFT or GRPO config
    (``config.json``, a shipped model's ``sft_config.json`` or ``grpo_config.json``, its
    ``run_card.json`` or ``card.json``); ``None`` when it records none (a base model, a hub id).

    >>> recorded_variant("data/tinyworld-sft-unseen"), recorded_variant("data/tiny-base")
    ('unseen', None)
    """
    variant = _stage_config(init).get("variant")
    return variant if isinstance(variant, str) and variant else None


def recorded_hide_plan(init: str | Path | None) -> bool:
    """Was ``init`` trained with hidden plans (its stage config's ``hide_plan``)? A model that was
    must be decoded and trained on with them (``pr1lib.decoding.structure``, hidden plans).

    >>> recorded_hide_plan("data/planworld-sft-unseen"), recorded_hide_plan(None)
    (True, False)
    """
    return _stage_config(init).get("hide_plan") is True


def decoded_hidden(init: str | Path | None, mode: str | None = "forked") -> bool:
    """Should ``init`` be decoded with hidden plans in rollout ``mode`` (``None``: the forked
    default)? Where it was trained with them and the decode forks its paths: the unseen mask is
    what hides a plan, and a seen or plain decode reads every token anyway.

    >>> start = "data/planworld-sft-unseen"
    >>> decoded_hidden(start), decoded_hidden(start, "seen"), decoded_hidden(None)
    (True, False, False)
    """
    return mode in (None, "forked") and recorded_hide_plan(init)


def follow_hidden_plans(cfg: Any, init: str | Path | None) -> Any:
    """``cfg`` with ``hide_plan`` on when ``init`` was trained with it and ``cfg`` trains the
    unseen variant (one line says so; a seen or plain run reads every token anyway)."""
    unseen = getattr(cfg, "variant", None) == "unseen"
    if getattr(cfg, "hide_plan", True) or not unseen or not recorded_hide_plan(init):
        return cfg
    print(
        f"note: {shown(init)} was trained with hidden plans (its config): hide_plan=true",
        flush=True,
    )
    return cfg.replace(hide_plan=True)


def _stage_config(init: str | Path | None) -> dict[str, Any]:
    """The SFT or GRPO config a run or model folder was trained with (``config.json``, a shipped
    model's ``sft_config.json`` or ``grpo_config.json``, its ``run_card.json`` or ``card.json``);
    ``{}`` when it records none (a base model, a hub id)."""
    found = local_folder(init) if init is not None else None
    if found is None:
        return {}
    for folder in (found, found.parent) if found.name == "merged" else (found,):
        for name in ("config.json", "sft_config.json", "grpo_config.json", CARD, "card.json"):
            try:
                saved = json.loads((folder / name).read_text())
                config = saved["config"] if name in (CARD, "card.json") else saved
                kind, variant = config.get("type"), config.get("variant")
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue
            stage = kind in ("SFTStageConfig", "GRPOStageConfig")
            if (name in (CARD, "card.json") or stage) and isinstance(variant, str) and variant:
                return config
    return {}


def variant_change(init: str | Path | None, variant: str) -> str | None:
    """The recorded variant of ``init`` when training it as ``variant`` swaps the two parallel
    variants (a seen model's paths trained path-isolated, or the reverse); ``None`` otherwise."""
    theirs = recorded_variant(init)
    parallel = ("seen", "unseen")
    return theirs if theirs in parallel and variant in parallel and theirs != variant else None


def check_variant(init: str | Path | None, variant: str, meant: bool = False) -> str | None:
    """Refuse training ``init`` as the other parallel variant than it was trained as, unless
    ``meant`` (or ``allow_cross_variant`` named it); returns the recorded variant when it differs
    and is meant (what the run card records)."""
    theirs = variant_change(init, variant)
    if theirs is None:
        return None
    if meant or start_id(init) in CROSS_VARIANT:
        return theirs
    raise ValueError(
        f"--init {init} was trained as the {theirs} variant (its config says so), but this stage "
        f"trains the {variant} one: give --variant {theirs}, another --init, or --cross-variant "
        "if the switch is meant (the run card records it)"
    )


def allow_cross_variant(init: str | Path | None) -> None:
    """Let stages start from ``init`` as the other parallel variant (``--cross-variant``)."""
    CROSS_VARIANT.add(start_id(init))


# ----------------------------------------------------------------------------- starts
# GRPO fields a rerun in the same folder may change: more steps continue the same run
GRPO_RESUMABLE = (
    "max_steps",
    "save_steps",
    "logging_steps",
    "num_threads",
    "eval_n",
    "eval_max_new_tokens",
)


# fields that change how fast a run goes or how often it logs, not what it trains or measures: a
# finished run asked for again with another of these is the same run (``finished_run``)
GRPO_RUNTIME = ("num_threads", "save_steps", "logging_steps")


def _saved(cfg: Any) -> dict:
    """``cfg`` as its run folder saves it (JSON values)."""
    return json.loads(json.dumps(cfg.to_dict(), default=str))


def _without(fields: dict, keys: tuple[str, ...]) -> dict:
    return {k: v for k, v in fields.items() if k not in keys}


def _fixed(cfg: Any) -> dict | None:
    """The part of a config a resumed run must share (``None`` without a config)."""
    return None if cfg is None else _without(_saved(cfg), GRPO_RESUMABLE)


def stale_run(run_dir: Path, init: str | Path | None, cfg: Any = None) -> str | None:
    """How the run in ``run_dir`` differs from one begun from ``init`` with ``cfg`` (``start.json``:
    another start, or another config but for ``GRPO_RESUMABLE`` fields); ``None`` when it is
    empty or the same run. Checkpoints from before these marks count as another start."""
    marker = Path(run_dir) / "start.json"
    if not marker.exists():
        old = last_checkpoint(Path(run_dir) / "trainer") is not None
        return "begun from an unknown start (checkpoints without a start.json)" if old else None
    try:
        mark = json.loads(marker.read_text())
        theirs, their_cfg = mark["start"], mark.get("config")
    except (ValueError, KeyError, TypeError):
        return "whose start.json is damaged"
    if not same_start(theirs, init):
        return f"begun from another start ({theirs}, not {start_id(init)})"
    ours = _fixed(cfg)
    if their_cfg is None or ours is None:
        return None
    diff = [k for k in ours if k in their_cfg and their_cfg[k] != ours[k]]
    return (
        f"of another config ({diff[0]}={their_cfg[diff[0]]!r}, not {ours[diff[0]]!r})"
        if diff
        else None
    )


def check_run_dir(run_dir: Path, init: str | Path | None, cfg: Any = None) -> None:
    """Refuse ``run_dir`` when it holds another run (``stale_run``): resuming it would go on
    training another model or config, and starting over would lose it."""
    why = stale_run(run_dir, init, cfg)
    if why is not None:
        raise FolderError(
            f"{run_dir} holds a run {why}: pick another --out, or pass --overwrite to start over "
            f"(the old run moves to {next_prev(Path(run_dir)).name}; overwrite=True in Python)"
        )


def follow_start(run_dir: Path, init: str | Path | None, cfg: Any = None) -> str | None:
    """A notebook's own run follows the start it is given: when ``run_dir`` holds a run begun from
    another start or config (``stale_run``; e.g. Stage 2 trained on with the control panel since
    this Stage 3 began), that run moves to ``<name>.prev`` (kept, never deleted). Returns the one
    line to show, paths as the repository names them; ``None`` when nothing had to move.

    >>> follow_start(Path("/no/such/run"), None) is None
    True
    """
    run_dir = Path(run_dir)
    why = stale_run(run_dir, init, cfg)
    if why is None or not is_main_process():
        return None
    why = _stale_words(run_dir, init, why)
    prev = next_prev(run_dir)
    run_dir.rename(prev)
    now = "the base model" if init is None else shown(init)
    return f"note: moved {shown(run_dir)} to {prev.name}: it held a run {why}; now from {now}"


def _stale_words(run_dir: Path, init: str | Path | None, why: str) -> str:
    """``stale_run``'s reason without machine paths or content hashes."""
    try:
        theirs = str(json.loads((run_dir / "start.json").read_text())["start"]).split("#")[0]
    except (OSError, ValueError, KeyError, TypeError):
        return why  # no start mark, or a damaged one: the reason names no path
    if not why.startswith("begun from another start"):
        return why  # another config: the reason names the field
    if init is not None and theirs == str(init):
        return f"begun from an earlier {shown(init)} (trained since)"
    return "begun from " + ("the base model" if theirs == "base" else shown(theirs))


def claim_run_dir(
    run_dir: Path, init: str | Path | None, overwrite: bool = False, cfg: Any = None
) -> None:
    """Mark ``run_dir`` as begun from ``init`` with ``cfg``. A folder holding another run is
    refused (``check_run_dir``), or with ``overwrite`` moved aside first (``move_aside``: kept,
    never deleted)."""
    why = stale_run(run_dir, init, cfg)
    if overwrite and why is not None:
        move_aside(run_dir, f"it holds a run {why}")
    check_run_dir(run_dir, init, cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    if is_main_process():
        mark = {"start": start_id(init), "config": _fixed(cfg)}
        (run_dir / "start.json").write_text(json.dumps(mark))


def finished_run(run_dir: Path, cfg: Any, init: str | Path | None) -> dict | None:
    """The result in ``run_dir/run_card.json`` when that run finished with this config and start
    (a rerun of a study reuses it instead of training and evaluating again), else ``None``."""
    path = Path(run_dir) / CARD
    if not path.is_file() or not (Path(run_dir) / "merged").is_dir():
        return None
    card = read_json(path, "move the run folder aside to train it again")
    theirs = card.get("config") if isinstance(card.get("config"), dict) else {}
    same = (
        _without(theirs, GRPO_RUNTIME) == _without(_saved(cfg), GRPO_RUNTIME)
        and same_start(card.get("start"), init)
        and card.get("steps") == cfg.max_steps
    )
    if not same:
        return None
    print(f"reusing the finished run {shown(run_dir)}", flush=True)
    kept = _without(card, ("config", "model_config", "environment"))
    # where the run is now (a folder moved since it trained still points at itself)
    return {**kept, "run_dir": str(run_dir), "merged": str(Path(run_dir) / "merged")}


# ----------------------------------------------------------------------------- saving and loading
def save_run(trainer: Any, tokenizer: Any, run_dir: Path, model_cfg: ModelConfig) -> dict[str, str]:
    """``adapter/`` (LoRA + tag rows) and ``merged/`` (adapter merged into a full-precision base).

    With a 4-bit base the merge goes into the unquantized base weights (the usual QLoRA export).
    """
    model, paths = trainer.model, {}
    # merged/ holds every weight (adapter/ far fewer): refuse a disk without room, before writing
    check_room(run_dir, sum(p.numel() * p.element_size() for p in model.parameters()) + (8 << 20))
    if hasattr(model, "peft_config"):
        model.save_pretrained(run_dir / "adapter", save_embedding_layers=False)
        tokenizer.save_pretrained(run_dir / "adapter")
        paths["adapter"] = str(run_dir / "adapter")
        merged = merge_adapter(run_dir / "adapter", model_cfg)
    else:
        merged = model
    merged.save_pretrained(run_dir / "merged")
    tokenizer.save_pretrained(run_dir / "merged")
    paths["merged"] = str(run_dir / "merged")
    return paths


def merge_adapter(adapter_dir: Path, model_cfg: ModelConfig):
    """A fresh full-precision base with the tags, the saved adapter loaded on it, then merged."""
    from peft import PeftModel

    from pr1lib.decoding.models import load_training_policy

    plain = model_cfg.replace(load_in_4bit=False, use_lora=False)
    base, _, _ = load_training_policy(plain, train_tag_rows=False)
    return PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()


def load_run(run_dir: str | Path, merged: bool = True):
    """``(model, tokenizer)`` from a run folder, offline: the merged copy, or base + adapter."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pr1lib.decoding.models import load_training_policy

    run_dir = Path(run_dir)
    if not ((run_dir / "merged").is_dir() or (run_dir / "adapter").is_dir()):
        raise FileNotFoundError(
            f"{run_dir} is not a finished run folder: it has neither merged/ "
            "nor adapter/ (pass the folder `sft` or `grpo` wrote, e.g. "
            "runs/sft-tiny-seen)"
        )
    if merged or not (run_dir / "adapter").is_dir():
        folder = run_dir / "merged"
        return AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    model_cfg = ModelConfig.load(run_dir / "model_config.json")
    base, _, _ = load_training_policy(model_cfg.replace(use_lora=False), train_tag_rows=False)
    adapter = run_dir / "adapter"
    return PeftModel.from_pretrained(base, str(adapter)), AutoTokenizer.from_pretrained(adapter)


def save_configs(run_dir: Path, cfg: Any, model_cfg: ModelConfig) -> None:
    """``config.json`` and ``model_config.json``: what this run is about to do (main process)."""
    if is_main_process():
        cfg.save(run_dir / "config.json")
        model_cfg.save(run_dir / "model_config.json")


def write_run_card(
    run_dir: Path, result: dict, cfg: Any, model_cfg: ModelConfig, **extra: Any
) -> None:
    """``run_card.json``: the result plus both configs, library versions and ``extra`` logs."""
    if not is_main_process():
        return
    from pr1lib.config.runtime import environment_report

    card = {
        **result,
        "config": cfg.to_dict(),
        "model_config": model_cfg.to_dict(),
        "environment": environment_report(cfg.profile, cfg.seed).versions,
        **extra,
    }
    (run_dir / CARD).write_text(json.dumps(card, indent=2, default=str))


def write_rows(rows: list[dict], path: Path) -> Path:
    """Per-step rows as CSV, columns in first-seen order (a missing value is left empty).

    >>> import tempfile
    >>> p = write_rows([{"step": 1, "loss": 2.0}, {"step": 2}], Path(tempfile.mkdtemp()) / "l.csv")
    >>> p.read_text().splitlines()
    ['step,loss', '1,2.0', '2,']
    """
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path

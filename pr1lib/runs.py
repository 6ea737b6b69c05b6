"""Run folders, shared by SFT and GRPO: claim, checkpoints, save, load, run card.

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
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

from pr1lib.config import ModelConfig
from pr1lib.models import load_training_policy
from pr1lib.runtime import environment_report, is_main_process

CARD = "run_card.json"


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
def start_id(init: str | Path | None) -> str:
    """Which checkpoint a run starts from: its path plus a digest of its weight files' sizes and
    times, so a folder retrained in place counts as another start (caches keyed by path alone
    reused results of the old model).

    >>> start_id(None), start_id("Qwen/Qwen3-4B-Base")
    ('base', 'Qwen/Qwen3-4B-Base')
    """
    if init is None:
        return "base"
    folder = Path(init) / "merged"
    files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    stamp = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    return f"{init}#{hashlib.sha256(repr(stamp).encode()).hexdigest()[:8]}" if stamp else str(init)


def is_run_folder(init: str | Path | None) -> bool:
    """True when ``init`` is a finished run folder (it holds ``merged/``), not a hub id or the base."""
    return init is not None and (Path(init) / "merged").is_dir()


def last_checkpoint(folder: str | Path) -> Path | None:
    """The ``checkpoint-N`` with the largest N under ``folder`` (``None`` if there is none)."""
    found = [p for p in Path(folder).glob("checkpoint-*")
             if p.is_dir() and p.name.split("-")[-1].isdigit()]
    return max(found, key=lambda p: int(p.name.split("-")[-1])) if found else None


# ----------------------------------------------------------------------------- claiming a folder
def move_aside(run_dir: Path, why: str) -> None:
    """Rename ``run_dir`` to ``<name>.prev`` (replacing an older one) so a new run starts clean."""
    if not (run_dir.exists() and is_main_process()):
        return
    prev = run_dir.with_name(run_dir.name + ".prev")
    shutil.rmtree(prev, ignore_errors=True)
    run_dir.rename(prev)
    print(f"note: moved {run_dir} to {prev}: {why}", flush=True)


def claim_run_dir(run_dir: Path, init: str | Path | None) -> None:
    """Mark ``run_dir`` as begun from ``init``; a folder begun from another start (or holding
    checkpoints from before these marks) is moved to ``<name>.prev`` first: resuming it would
    continue someone else's run."""
    marker, sid = run_dir / "start.json", start_id(init)
    theirs = json.loads(marker.read_text())["start"] if marker.exists() else None
    stale = theirs != sid if theirs is not None else last_checkpoint(run_dir / "trainer") is not None
    if stale:
        move_aside(run_dir, f"it was begun from another start ({theirs or 'unknown'})")
    run_dir.mkdir(parents=True, exist_ok=True)
    if is_main_process():
        marker.write_text(json.dumps({"start": sid}))


def finished_run(run_dir: Path, cfg: Any, init: str | Path | None) -> dict | None:
    """The result in ``run_dir/run_card.json`` when that run finished with this config and start
    (a rerun of a study reuses it instead of training and evaluating again), else ``None``."""
    path = Path(run_dir) / CARD
    if not path.is_file() or not (Path(run_dir) / "merged").is_dir():
        return None
    card = json.loads(path.read_text())
    same = (card.get("config") == json.loads(json.dumps(cfg.to_dict(), default=str))
            and card.get("start") == start_id(init) and card.get("steps") == cfg.max_steps)
    if not same:
        return None
    print(f"reusing the finished run {run_dir}", flush=True)
    return {k: v for k, v in card.items() if k not in ("config", "model_config", "environment")}


# ----------------------------------------------------------------------------- saving and loading
def save_run(trainer: Any, tokenizer: Any, run_dir: Path, model_cfg: ModelConfig) -> dict[str, str]:
    """``adapter/`` (LoRA + tag rows) and ``merged/`` (adapter merged into a full-precision base).

    With a 4-bit base the merge goes into the unquantized base weights (the usual QLoRA export).
    """
    model, paths = trainer.model, {}
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
    plain = model_cfg.replace(load_in_4bit=False, use_lora=False)
    base, _, _ = load_training_policy(plain, train_tag_rows=False)
    return PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()


def load_run(run_dir: str | Path, merged: bool = True):
    """``(model, tokenizer)`` from a run folder, offline: the merged copy, or base + adapter."""
    run_dir = Path(run_dir)
    if not ((run_dir / "merged").is_dir() or (run_dir / "adapter").is_dir()):
        raise FileNotFoundError(f"{run_dir} is not a finished run folder: it has neither merged/ "
                                "nor adapter/ (pass the folder `sft` or `grpo` wrote, e.g. "
                                "runs/sft-tiny-seen)")
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


def write_run_card(run_dir: Path, result: dict, cfg: Any, model_cfg: ModelConfig,
                   **extra: Any) -> None:
    """``run_card.json``: the result plus both configs, library versions and ``extra`` logs."""
    if not is_main_process():
        return
    card = {**result, "config": cfg.to_dict(), "model_config": model_cfg.to_dict(),
            "environment": environment_report(cfg.profile, cfg.seed).versions, **extra}
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

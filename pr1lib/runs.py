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
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from pr1lib.config import ModelConfig

# Table 2's checkpoints: stage key -> the variant it was trained as (which decides how it is rolled
# out and prompted in evaluation) and the run folders that may hold it (under runs_dir(), first
# wins). "grpo-gsm8k" is the plain GRPO baseline on the same data and steps (easy, then hard).
STAGE_RUNS: dict[str, tuple[str, tuple[str, ...]]] = {
    "base": ("seen", ()),
    "sft-seen": ("seen", ("sft-{p}-seen", "04_sft_lora-{p}/seen")),
    "sft-unseen": ("unseen", ("sft-{p}-unseen", "04_sft_lora-{p}/unseen")),
    "grpo-gsm8k": (
        "plain",
        (
            "06_grpo_training-{p}/plain/grpo-{p}-plain-s3-accuracy-seed{s}",
            "grpo-{p}-plain-s3-accuracy-seed{s}",
            "grpo-curriculum-{p}/seed{s}/grpo-{p}-plain-s3-accuracy-seed{s}",
        ),
    ),
    "rl-seen": (
        "seen",
        (
            "06_grpo_training-{p}/stage3",
            "grpo-{p}-seen-s3-accuracy-seed{s}",
            "grpo-curriculum-{p}/seed{s}/grpo-{p}-seen-s3-accuracy-seed{s}",
        ),
    ),
    "rl-unseen-s1": (
        "unseen",
        ("grpo-{p}-unseen-s3-accuracy-seed{s}", "grpo-ablation-{p}-unseen-seed{s}/accuracy"),
    ),
    "rl-unseen-s2": (
        "unseen",
        (
            "grpo-{p}-unseen-s3-alternating-seed{s}",
            "grpo-unseen-stage2-{p}-seed{s}/direct/grpo-{p}-unseen-s3-alternating-seed{s}",
            "grpo-ablation-{p}-unseen-seed{s}/alternating",
        ),
    ),
}

CARD = "run_card.json"
OWNER, LOCK = "pr1-run.json", "pr1-run.lock"  # which run a folder holds; who writes it now
# a config.json "type" (folders from before OWNER existed) -> the command that wrote it
COMMAND_OF = {
    "ColdStartConfig": "coldstart",
    "SFTStageConfig": "sft",
    "GRPOStageConfig": "grpo",
    "PretrainConfig": "pretrain-tiny",
    "EvalConfig": "eval",
}
SIGNS = {"traces.jsonl": "coldstart", "start.json": "grpo"}  # files a run writes before config.json
HELD: list[Path] = []  # folders claimed by this process, newest last (the CLI's interrupt line)


def is_main_process() -> bool:
    """``pr1lib.runtime.is_main_process`` without torch (``claim`` serves light commands too)."""
    return int(os.environ.get("RANK", "0")) == 0


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


# ----------------------------------------------------------------------------- claiming a folder
def move_aside(run_dir: Path, why: str) -> Path | None:
    """Rename ``run_dir`` to ``<name>.prev``, or ``<name>.prev-2``, ``-3``, ... when that exists,
    so a new run starts clean and nothing is ever deleted; returns where it went."""
    if not (run_dir.exists() and is_main_process()):
        return None
    prev, n = run_dir.with_name(run_dir.name + ".prev"), 1
    while prev.exists():
        n += 1
        prev = run_dir.with_name(f"{run_dir.name}.prev-{n}")
    run_dir.rename(prev)
    print(f"note: moved {run_dir} to {prev}: {why}", flush=True)
    return prev


def claim_run_dir(run_dir: Path, init: str | Path | None) -> None:
    """Mark ``run_dir`` as begun from ``init``; a folder begun from another start (or holding
    checkpoints from before these marks) is moved to ``<name>.prev`` first: resuming it would
    continue someone else's run."""
    marker, sid = run_dir / "start.json", start_id(init)
    theirs = json.loads(marker.read_text())["start"] if marker.exists() else None
    stale = (
        theirs != sid if theirs is not None else last_checkpoint(run_dir / "trainer") is not None
    )
    if stale:
        move_aside(run_dir, f"it was begun from another start ({theirs or 'unknown'})")
    run_dir.mkdir(parents=True, exist_ok=True)
    if is_main_process():
        marker.write_text(json.dumps({"start": sid}))


# ----------------------------------------------------------------------------- one run per folder
class FolderError(ValueError):
    """A folder locked by another run, or holding a different one: the message says what to do."""


class FolderLock:
    """An exclusive lock file in a folder, holding the owner's pid. The kernel lock
    (``fcntl.flock``) dies with its process, so a file left by a killed run is taken over, with a
    note; a live holder makes ``take`` a ``FolderError``. ``release`` deletes the file."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd = path, fd

    @classmethod
    def take(cls, folder: Path) -> FolderLock:
        made = not folder.exists()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / LOCK
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if not _lock_fd(fd):
                holder = _pid_in(fd)
                os.close(fd)
                if made:  # the holder's lock file keeps its folder: this only goes if empty
                    _rmdir(folder)
                raise FolderError(
                    f"{folder} is in use by another run (pid {holder or '?'}): wait "
                    "for it to finish, stop it, or pick another --out"
                )
            if path.exists() and path.stat().st_ino == os.fstat(fd).st_ino:
                break
            os.close(fd)  # its holder deleted the file as we opened it: take the new one
        old = _pid_in(fd)
        if old and old != os.getpid():
            print(
                f"note: {path} was left by pid {old}, which no longer runs: taking it over",
                file=sys.stderr,
                flush=True,
            )
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, f"{os.getpid()}\n".encode())
        return cls(path, fd)

    def release(self) -> None:
        self.path.unlink(missing_ok=True)
        os.close(self.fd)


def _lock_fd(fd: int) -> bool:
    try:
        import fcntl
    except ImportError:  # Windows: a lock on the first byte
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False


def _pid_in(fd: int) -> int | None:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 64).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


def folder_owner(folder: Path) -> tuple[str | None, dict | None] | None:
    """``(command, config)`` of the run ``folder`` holds (``OWNER``, else a ``config.json`` of a
    known type); ``(None, None)`` for other files; ``None`` when it is empty or absent."""
    if (folder / OWNER).is_file():
        try:
            owner = json.loads((folder / OWNER).read_text())
            return owner["command"], owner.get("config")
        except (ValueError, KeyError, TypeError):
            return None, None
    for name in ("config.json", "pretrain_config.json"):
        try:
            saved = json.loads((folder / name).read_text())
            return COMMAND_OF[saved.pop("type")], saved
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    names = {p.name for p in folder.iterdir()} - {LOCK} if folder.is_dir() else set()
    signed = [SIGNS[n] for n in sorted(names) if n in SIGNS]
    return (signed[0] if signed else None, None) if names else None


def _as_json(config: Any) -> dict | None:
    return None if config is None else json.loads(json.dumps(config.to_dict(), default=str))


def _check_owner(
    folder: Path, command: str, config: Any, resumable: Iterable[str], resume: bool
) -> None:
    owner = folder_owner(folder)
    if owner is None or resume:
        return
    theirs, their_config = owner
    again = (
        f"pick another --out, pass --resume to write into it anyway, or --overwrite to start "
        f"over (the old files move to {folder.name}.prev)"
    )
    if theirs is None and config is not None:
        raise FolderError(f"{folder} holds files that are not a pr1 run: {again}")
    if theirs is not None and theirs != command:
        raise FolderError(f"{folder} holds a {theirs} run, not a {command} one: {again}")
    if config is None or their_config is None:
        return
    for key, value in _as_json(config).items():
        if key in their_config and key not in resumable and their_config[key] != value:
            raise FolderError(
                f"{folder} holds another {command} run ({key}={their_config[key]!r}, "
                f"not {value!r}): {again}"
            )


@contextmanager
def claim(
    folder: str | Path,
    command: str,
    config: Any = None,
    resumable: Iterable[str] = (),
    overwrite: bool = False,
    resume: bool = False,
) -> Iterator[Path]:
    """Hold ``folder`` for one run of ``command`` (``config``: its config; ``None``: a folder
    that collects outputs, e.g. ``eval``'s): take its lock, refuse a folder holding another
    command's run or another config (fields in ``resumable`` may differ) unless ``resume``,
    or move it to ``<name>.prev`` first with ``overwrite``; record the run in ``OWNER``. On the
    way out the lock goes, and a folder the run changed nothing in is as it was before (one that
    was empty counts as absent, and goes).

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()) / "run"
    >>> with claim(d, "bench"): sorted(p.name for p in d.iterdir())
    ['pr1-run.json', 'pr1-run.lock']
    >>> d.exists()  # nothing else was written: the folder went again
    False
    """
    folder = Path(folder)
    if not is_main_process():  # rank 0 claims for the whole launch
        yield folder
        return
    lock, fresh = FolderLock.take(folder), False
    before = _stamp(folder)
    created = not before  # absent or empty (a racing run may have made it): removed if unused
    try:
        if overwrite and folder_owner(folder) is not None:
            lock, created, before = _start_over(folder, lock), True, {}
        _check_owner(folder, command, config, resumable, resume)
        fresh = not (folder / OWNER).exists()
        (folder / OWNER).write_text(
            json.dumps({"command": command, "config": _as_json(config)}, indent=2)
        )
        HELD.append(folder)
        yield folder
    finally:
        _tidy(folder, lock, created, fresh and _stamp(folder) == before)


def _start_over(folder: Path, lock: FolderLock) -> FolderLock:
    """Move ``folder`` (holding ``lock``) to ``<name>.prev`` and lock a fresh one in its place."""
    move_aside(folder, "--overwrite starts this run over")
    old = FolderLock(folder.with_name(folder.name + ".prev") / LOCK, lock.fd)
    try:
        return FolderLock.take(folder)
    finally:
        old.release()


def _stamp(folder: Path) -> dict[str, tuple[int, int]]:
    """Size and time of each entry of ``folder`` but the marks (did a run write anything?)."""
    return (
        {
            p.name: (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.iterdir()
            if p.name not in (LOCK, OWNER)
        }
        if folder.is_dir()
        else {}
    )


def _tidy(folder: Path, lock: FolderLock, created: bool, untouched: bool) -> None:
    """Release the lock; a folder this run marked but changed nothing else in loses the marks."""
    if untouched:
        (folder / OWNER).unlink(missing_ok=True)
    lock.release()
    if created and untouched:
        _rmdir(folder)


def _rmdir(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty (or gone): leave it
        pass


def finished_run(run_dir: Path, cfg: Any, init: str | Path | None) -> dict | None:
    """The result in ``run_dir/run_card.json`` when that run finished with this config and start
    (a rerun of a study reuses it instead of training and evaluating again), else ``None``."""
    path = Path(run_dir) / CARD
    if not path.is_file() or not (Path(run_dir) / "merged").is_dir():
        return None
    card = json.loads(path.read_text())
    same = (
        card.get("config") == json.loads(json.dumps(cfg.to_dict(), default=str))
        and card.get("start") == start_id(init)
        and card.get("steps") == cfg.max_steps
    )
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
    from peft import PeftModel

    from pr1lib.models import load_training_policy

    plain = model_cfg.replace(load_in_4bit=False, use_lora=False)
    base, _, _ = load_training_policy(plain, train_tag_rows=False)
    return PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()


def load_run(run_dir: str | Path, merged: bool = True):
    """``(model, tokenizer)`` from a run folder, offline: the merged copy, or base + adapter."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pr1lib.models import load_training_policy

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
    from pr1lib.runtime import environment_report

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

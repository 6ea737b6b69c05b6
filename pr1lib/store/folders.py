"""One run per folder: the lock between processes, what a folder holds, and ``claim``.

Every command that writes a folder claims it first (``claim``): a folder another live process
holds is refused, a lock left by a killed run is taken over with a note, and a folder holding
something else (another command's run, another config, a finished run a rerun would train over,
files that are not a run at all) is refused with one line saying what to do. ``--overwrite``
moves the old folder to ``<name>.prev`` (``.prev-2``, ``.prev-3``, ... when that is taken):
nothing is ever deleted. A folder holding committed files is never a run folder, with
``--overwrite`` or not (``check_not_committed``: the repository, its ``results/``, ``data/`` and
``notebooks/``, anything git tracks). Light: no torch, no config (the command line claims before
anything heavy loads).

>>> next_prev(Path("/no/such/run")).name
'run.prev'
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from pr1lib.store.paths import REPO_ROOT

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
COMMITTED = ("results", "data", "notebooks")  # the repository's folders of committed files


def is_main_process() -> bool:
    """``pr1lib.config.runtime.is_main_process`` without torch (``claim`` serves light commands
    too)."""
    return int(os.environ.get("RANK", "0")) == 0


def next_prev(run_dir: Path) -> Path:
    """Where ``move_aside`` would put ``run_dir``: ``<name>.prev``, else the first free
    ``<name>.prev-N`` (``.`` and ``..`` by their real names)."""
    run_dir = run_dir if run_dir.name not in ("", ".", "..") else run_dir.resolve()
    prev, n = run_dir.with_name(run_dir.name + ".prev"), 1
    while prev.exists():
        n += 1
        prev = run_dir.with_name(f"{run_dir.name}.prev-{n}")
    return prev


def move_aside(run_dir: Path, why: str, quiet: bool = False) -> Path | None:
    """Rename ``run_dir`` to ``next_prev(run_dir)`` so a new run starts clean and nothing is ever
    deleted; returns where it went (``None``: nothing there, or not the main process). A folder
    holding committed files, or the one this process works in, is never moved. ``quiet``: the
    caller says so itself (a notebook's line, without machine paths)."""
    if not (run_dir.exists() and is_main_process()):
        return None
    check_not_committed(run_dir)
    held = never_moved(run_dir)
    if held:
        raise FolderError(f"{run_dir} {held}, so it is never moved aside: pick another --out")
    prev = next_prev(run_dir)
    run_dir.rename(prev)
    if not quiet:
        print(f"note: moved {run_dir} to {prev}: {why}", flush=True)
    return prev


class FolderError(ValueError):
    """A folder locked by another run, or holding a different one: the message says what to do."""


def never_moved(folder: Path) -> str | None:
    """Why ``--overwrite`` may not move ``folder`` aside (``None``: it may): it holds the folder
    one works in, the home folder or the Python running this, or it is a top-level folder of the
    system or a mount point. Moving any of them would pull the ground from under the user.

    >>> never_moved(Path("/tmp")), never_moved(Path("/no/such/run"))
    ('is a top-level folder of the system', None)
    """
    real = folder.resolve()
    if real.parent == real or real.parent == Path(real.anchor):  # whatever lies inside it
        return "is a top-level folder of the system"
    held = {
        "the folder you are working in": Path.cwd(),
        "your home folder": Path.home(),
        "the Python that runs this command": Path(sys.prefix),
        "the Python installation": Path(sys.base_prefix),
    }
    for what, path in held.items():
        path = path.resolve()
        if real == path or real in path.parents:
            return f"holds {what} ({path})"
    if real.exists() and os.path.ismount(real):
        return "is a mount point"
    return None


def tracked_files(folder: Path) -> list[str]:
    """The files under ``folder`` that git tracks (``[]`` outside a git work tree, or without
    git).

    >>> tracked_files(REPO_ROOT / "pr1lib")[:1] != [], tracked_files(Path("/no/such/folder"))
    (True, [])
    """
    if not folder.is_dir() or shutil.which("git") is None:
        return []
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), "ls-files", "-z", "--", "."],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    names = done.stdout.decode(errors="replace").split("\0") if done.returncode == 0 else []
    return [name for name in names if name]


def check_not_committed(folder: str | Path) -> None:
    """Refuse a run folder that is the repository (or holds it), lies in one of its folders of
    committed files (``COMMITTED``), is a git checkout or holds a file git tracks: a run there
    would move, write over or mix with committed files. ``--overwrite`` does not change that.

    >>> check_not_committed(REPO_ROOT / "results" / "x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pr1lib.store.folders.FolderError: .../results/x lies in the repository's results/ (committed ...
    """
    real = Path(folder).expanduser().resolve()
    pick = "pick a folder outside the repository's results/, data/ and notebooks/ (e.g. runs/NAME)"
    if real == REPO_ROOT or real in REPO_ROOT.parents:
        raise FolderError(
            f"{folder} holds the repository {REPO_ROOT} (committed files; a run never moves or "
            "writes over them): pick a folder such as runs/NAME"
        )
    for name in COMMITTED:
        if real == REPO_ROOT / name or REPO_ROOT / name in real.parents:
            raise FolderError(
                f"{folder} lies in the repository's {name}/ (committed files; a run never moves "
                f"or writes over them): {pick}"
            )
    if (real / ".git").exists():
        raise FolderError(f"{folder} is a git checkout (committed files): pick another --out")
    tracked = tracked_files(real)
    if tracked:
        more = f" and {len(tracked) - 1} more" if len(tracked) > 1 else ""
        raise FolderError(
            f"{folder} holds files git tracks ({tracked[0]}{more}); a run never moves or "
            "writes over committed files: pick another --out"
        )


def check_out_path(folder: str | Path) -> Path:
    """``folder`` as a run folder may be named: not empty, not a link to nowhere, not a file,
    and not holding committed files (``check_not_committed``); returns it as a ``Path``.

    >>> check_out_path("")
    Traceback (most recent call last):
    ...
    pr1lib.store.folders.FolderError: --out is empty: name a folder (or leave --out out ...
    """
    if not str(folder).strip():
        raise FolderError("--out is empty: name a folder (or leave --out out for the default)")
    try:
        str(folder).encode("utf-8")
    except UnicodeEncodeError:  # a name read from bytes that are not UTF-8
        raise FolderError(
            f"--out {str(folder)!r} is not UTF-8 text (the libraries that save models and data "
            "sets write UTF-8 names): pick another --out"
        ) from None
    path = Path(folder).expanduser()
    if path.is_symlink() and not path.exists():
        raise FolderError(
            f"{folder} is a link to {os.readlink(path)}, which does not exist (a drive not "
            "mounted?): create that folder first, or pick another --out"
        )
    if path.exists() and not path.is_dir():
        raise FolderError(f"{folder} is a file, not a folder: pick another --out")
    above = next((p for p in path.absolute().parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise FolderError(f"{folder} lies under {above}, which is a file: pick another --out")
    check_not_committed(path)
    return path


class FolderLock:
    """An exclusive lock file in a folder, holding the owner's pid. The kernel lock
    (``fcntl.flock``) dies with its process, so a file left by a killed run is taken over, with a
    note; a live holder makes ``take`` a ``FolderError``. ``release`` deletes the file."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd = path, fd

    @classmethod
    def take(cls, folder: Path) -> FolderLock:
        made = not folder.exists()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            if err.errno == errno.ENOSPC:
                raise
            raise FolderError(
                f"cannot make the folder {folder} ({err.strerror}): pick another --out"
            ) from None
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


def check_owner(
    folder: Path,
    command: str,
    config: Any = None,
    resumable: Iterable[str] = (),
    resume: bool = False,
    finished: Iterable[str] = (),
) -> None:
    """Refuse ``folder`` when it holds files that are not a pr1 run, another command's run or
    another config's (fields in ``resumable`` may differ), unless ``resume``; and, even with
    ``resume``, a finished run (one of the ``finished`` files is there) that this one would train
    over. The message says which flag to add."""
    owner = folder_owner(folder)
    if owner is None:
        return
    theirs, their_config = owner
    over = f"--overwrite to start over (the old files move to {next_prev(folder).name})"
    if never_moved(folder):  # never moved aside (move_aside): no --overwrite to suggest
        over = f"start over in another folder (this one {never_moved(folder)})"
    done = [name for name in finished if (folder / name).exists()]
    if done and theirs in (None, command):
        raise FolderError(
            f"{folder} holds a finished {command} run ({done[0]}): pick another --out, or pass "
            f"{over}"
        )
    if resume:
        return
    again = f"pick another --out, pass --resume to write into it anyway, or {over}"
    if theirs is None:
        raise FolderError(f"{folder} holds files that are not a pr1 run: {again}")
    if theirs != command:
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
    finished: Iterable[str] = (),
) -> Iterator[Path]:
    """Hold ``folder`` for one run of ``command`` (``config``: its config; ``None``: a folder
    that collects outputs, e.g. ``eval``'s): take its lock, refuse what ``check_owner`` refuses,
    or with ``overwrite`` move the folder aside first (``move_aside``); record the run in
    ``OWNER``. On the way out the lock goes, and a folder the run changed nothing in is as it was
    before (one that was empty counts as absent, and goes).

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()) / "run"
    >>> with claim(d, "bench"): sorted(p.name for p in d.iterdir())
    ['pr1-run.json', 'pr1-run.lock']
    >>> d.exists()  # nothing else was written: the folder went again
    False
    """
    folder = check_out_path(folder)
    if not is_main_process():  # rank 0 claims for the whole launch
        yield folder
        return
    made = [p for p in folder.absolute().parents if not p.exists()]  # parents this claim makes
    lock, fresh = FolderLock.take(folder), False
    before = _stamp(folder)
    created = not before  # absent or empty (a racing run may have made it): removed if unused
    try:
        if overwrite and folder_owner(folder) is not None:
            lock, created, before = _start_over(folder, lock), True, {}
        check_owner(folder, command, config, resumable, resume, finished)
        fresh = not (folder / OWNER).exists()
        (folder / OWNER).write_text(
            json.dumps({"command": command, "config": _as_json(config)}, indent=2)
        )
        HELD.append(folder)
        yield folder
    finally:
        _tidy(folder, lock, created, fresh and _stamp(folder) == before, made)


def _start_over(folder: Path, lock: FolderLock) -> FolderLock:
    """Move ``folder`` (holding ``lock``) aside and lock a fresh one in its place."""
    prev = move_aside(folder, "--overwrite starts this run over")
    old = FolderLock(Path(prev or folder) / LOCK, lock.fd)
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


def _tidy(
    folder: Path, lock: FolderLock, created: bool, untouched: bool, made: list[Path] = ()
) -> None:
    """Release the lock; a folder this run marked but changed nothing else in loses the marks,
    and one it made goes again, with the (empty) parents it made for it."""
    if untouched:
        (folder / OWNER).unlink(missing_ok=True)
    lock.release()
    if created and untouched:
        for path in (folder, *made):
            _rmdir(path)


def _rmdir(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty (or gone): leave it
        pass

"""A full disk is one line naming the folder and the bytes a save needs, never a library's
traceback, and never half a checkpoint a rerun would trip on.

Stages that save big files (a checkpoint, the final weights) call ``check_room`` first: when the
disk holding the folder has less free space than the save needs, ``DiskFull`` says so before a
byte is written, and the last checkpoint stays the one a rerun resumes from. A save that still
fails for want of space (another process filled the disk meanwhile) surfaces as torch's
``inline_container.cc ... unexpected pos`` or safetensors' ``File too large``; ``is_disk_full``
recognises those, and the command line turns them into the same line. Light: no torch.

>>> str(DiskFull("runs/x", needed=3_500_000, free=1_000_000))
'no space left for runs/x: saving needs about 3.5 MB and its disk has 1.0 MB free; free some space (or pick another --out), then rerun the same command to resume'
"""  # noqa: E501 - doctest output stays whole

from __future__ import annotations

import errno
import shutil
from pathlib import Path

# errno values of a write that found no room: no space, a file over the limit, a quota
FULL = (errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC))
# what torch and safetensors say when a write found no room (their errors carry no errno)
FULL_TEXT = ("unexpected pos", "no space left", "file too large", "disk quota", "file write failed")


def size(amount: float) -> str:
    """Bytes for a person.

    >>> size(512), size(2_300_000), size(7.5e9)
    ('512 bytes', '2.3 MB', '7.5 GB')
    """
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if amount >= scale:
            return f"{amount / scale:.1f} {unit}"
    return f"{int(amount)} bytes"


class DiskFull(OSError):
    """A save that does not fit on the disk of ``folder`` (``needed``, ``free``: bytes; ``None``
    where unknown). The message is the command line's one line."""

    def __init__(self, folder: str | Path, needed: float | None = None, free: float | None = None):
        self.folder, self.needed = Path(folder), needed
        self.free = free_bytes(folder) if free is None else free
        need = f"saving needs about {size(needed)}" if needed else "saving needs more room"
        have = f"its disk has {size(self.free)} free" if self.free is not None else "it is full"
        super().__init__(
            errno.ENOSPC,
            f"no space left for {folder}: {need} and {have}; free some space (or pick another "
            "--out), then rerun the same command to resume",
        )

    def __str__(self) -> str:
        return self.strerror


def free_bytes(folder: str | Path) -> int | None:
    """Free bytes on the disk holding ``folder`` (its nearest existing parent); ``None`` if
    unknown.

    >>> free_bytes("/") > 0
    True
    """
    path = Path(folder).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def check_room(folder: str | Path, needed: float) -> None:
    """Refuse, before writing, a save of ``needed`` bytes into ``folder`` that its disk cannot
    hold (``DiskFull``).

    >>> check_room("/", 1)
    """
    free = free_bytes(folder)
    if free is not None and free < needed:
        raise DiskFull(folder, needed, free)


def is_disk_full(err: BaseException) -> bool:
    """Whether ``err`` is a write that found no room (an ``OSError`` with a full-disk errno, or
    torch's and safetensors' words for it).

    >>> is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    True
    >>> is_disk_full(RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64"))
    True
    >>> is_disk_full(ValueError("unexpected pos"))
    False
    """
    if isinstance(err, OSError):
        return err.errno in FULL
    named = type(err).__name__ in ("RuntimeError", "SafetensorError")
    return named and any(text in str(err).lower() for text in FULL_TEXT)


def tree_bytes(folder: str | Path) -> int:
    """Bytes of every file under ``folder`` (0 when it is absent): what saving it again needs.

    >>> tree_bytes("/no/such/folder")
    0
    """
    path = Path(folder)
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0

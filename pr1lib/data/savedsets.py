"""Saved data sets a command is handed (``sft --data``, ``export-verl --coldstart``): checked
before anything loads or is written, a damaged or empty one named in one line. Light: pyarrow
reads the Arrow files, never ``datasets``.

>>> check_dataset("/no/such/set")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: --data /no/such/set does not exist: pass the folder `coldstart` wrote ...
"""

from __future__ import annotations

import json
from pathlib import Path


def dataset_rows(folder: Path) -> int:
    """Rows of a data set saved with ``save_to_disk`` in ``folder``, reading its Arrow files
    (light: pyarrow, no ``datasets``); a file that is missing or cut short is a ``ValueError``
    naming it."""
    import pyarrow as pa
    import pyarrow.ipc

    try:
        state = json.loads((folder / "state.json").read_text())
        files = [f["filename"] for f in state["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError):
        files = sorted(p.name for p in folder.glob("*.arrow"))
    rows = 0
    for name in files:
        try:
            with pa.OSFile(str(folder / name)) as source:
                rows += pyarrow.ipc.open_stream(source).read_all().num_rows
        except (OSError, pa.ArrowException) as err:
            raise ValueError(
                f"{folder / name} is damaged or missing (a write cut short? {type(err).__name__}):"
                " rerun coldstart into a fresh --out, or restore the file"
            ) from None
    return rows


def dataset_sources(path: str | Path) -> set[str]:
    """The distinct ``source`` values of a saved cold-start set (``check_dataset``'s folder):
    which problems its rows are; empty when it has no such column. Light: pyarrow.

    >>> dataset_sources("/no/such/set")
    set()
    """
    import pyarrow as pa
    import pyarrow.ipc

    folder = Path(path).expanduser()
    folder = folder / "dataset" if (folder / "dataset").is_dir() else folder
    found: set[str] = set()
    for file in sorted(folder.glob("*.arrow")):
        try:
            with pa.OSFile(str(file)) as source:
                table = pyarrow.ipc.open_stream(source).read_all()
        except (OSError, pa.ArrowException):
            continue  # check_dataset names a damaged file
        if "source" in table.column_names:
            found.update(str(v) for v in table.column("source").unique().to_pylist())
    return found


def check_dataset(
    path: str | Path,
    flag: str = "--data",
    columns: tuple[str, ...] = ("question", "completion", "answer"),
) -> Path:
    """The folder of a saved cold-start set (``coldstart``'s ``--out``, or its ``dataset/``),
    after checking it exists, is not empty, is a saved data set and has ``columns``.

    >>> check_dataset("/no/such/set")
    Traceback (most recent call last):
    ...
    ValueError: --data /no/such/set does not exist: pass the folder `coldstart` wrote ...
    """
    folder, hint = Path(path).expanduser(), "pass the folder `coldstart` wrote (it holds dataset/)"
    if not folder.exists():
        raise ValueError(f"{flag} {path} does not exist: {hint}")
    if not folder.is_dir() or not any(folder.iterdir()):
        raise ValueError(f"{flag} {path} is {'a file' if folder.is_file() else 'empty'}: {hint}")
    data = folder / "dataset" if (folder / "dataset").is_dir() else folder
    try:
        features = json.loads((data / "dataset_info.json").read_text())["features"]
    except (OSError, ValueError, KeyError, TypeError):
        raise ValueError(
            f"{flag} {path} is not a saved data set (no dataset_info.json in it or "
            f"in its dataset/): {hint}"
        ) from None
    missing = [c for c in columns if c not in features]
    if missing:
        raise ValueError(
            f"{flag} {path}: the data set has no {missing[0]!r} column (a cold-start "
            f"set has {', '.join(columns)})"
        )
    if dataset_rows(data) == 0:
        raise ValueError(
            f"{flag} {path} holds 0 rows: nothing to train on (rerun coldstart; its last line "
            "says which filter took the rows)"
        )
    typed = {
        c: (features[c] or {}).get("dtype") if isinstance(features[c], dict) else None
        for c in columns
    }
    wrong = [c for c, dtype in typed.items() if dtype not in ("string", "large_string")]
    if wrong:
        raise ValueError(
            f"{flag} {path}: column {wrong[0]!r} holds {typed[wrong[0]] or 'no plain values'}, "
            "not text (a cold-start set's columns are strings)"
        )
    return folder

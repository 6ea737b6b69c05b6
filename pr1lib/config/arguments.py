"""What every command line of the project shares, ``python -m pr1lib`` and each ``benchmarks/*.py``:
a parser whose mistakes are one line (exit 2), and argument types that refuse a bad number before
anything runs. Light imports only (argparse).

>>> count(1)("3"), count(0, most=5)("5")
(3, 5)
>>> Parser(prog="demo").add_argument("--n", type=count(1)) is not None
True
"""

from __future__ import annotations

import argparse
import math


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose mistakes are one line (``--help`` still shows the usage) and
    that takes no abbreviations (``--overwrite`` is never taken for ``--overwrite-card``)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **{**kwargs, "allow_abbrev": False})

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    def sets(self, cls: type, items: list[str], **fixed) -> dict:
        """``--set KEY=VALUE`` items as typed overrides of ``cls``, after checking that
        ``cls.for_profile("tiny", **fixed, **overrides)`` takes them: a refused key or value is
        one line, exit 2 (a script's ``--set``).

        >>> from pr1lib.config import PretrainConfig
        >>> Parser(prog="demo").sets(PretrainConfig, ["max_steps=5"])
        {'max_steps': 5}
        """
        from pr1lib.config.checks import parse_sets

        try:
            overrides = parse_sets(cls, items)
            cls.for_profile("tiny", **{**fixed, **overrides})
        except ValueError as err:
            self.error(str(err))
        return overrides


def count(lowest: int = 1, most: int | None = None, why: str = ""):
    """An argparse ``type``: a whole number from ``lowest`` to ``most`` (``why``: what the upper
    limit is), else one clear line.

    >>> count(1, 8, "the CPUs here")("9")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a whole number from 1 to 8 (the CPUs here), got '9'
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is not None and lowest <= value and (most is None or value <= most):
            return value
        if most is None:
            raise argparse.ArgumentTypeError(
                f"must be a whole number of {lowest} or more, got {text!r}"
            )
        extra = f" ({why})" if why else ""
        raise argparse.ArgumentTypeError(
            f"must be a whole number from {lowest} to {most}{extra}, got {text!r}"
        )

    return parse


def seconds(text: str) -> float:
    """An argparse ``type``: a finite number of seconds above 0.

    >>> seconds("2.5")
    2.5
    >>> seconds("nan")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a number above 0, got 'nan'
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text!r}")
    return value


def rate(text: str) -> float:
    """An argparse ``type``: a finite number of 0 or more (0: no limit).

    >>> rate("0"), rate("30")
    (0.0, 30.0)
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a number of 0 or more, got {text!r}")
    return value


def model_folder(text: str) -> str:
    """An argparse ``type``: a model (a model folder, a run folder with ``merged/``, or a hub id)
    after ``checks.check_model``: a folder that is missing or damaged is one line.

    >>> model_folder("/no/such/model")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: model folder /no/such/model does not exist (a hub id looks like ...
    """
    from pr1lib.config.checks import check_model

    try:
        return check_model(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def out_folder(text: str) -> str:
    """An argparse ``type``: a folder a run may write into (``store.folders.check_out_path``:
    not empty, not a file, not holding committed files).

    >>> out_folder("")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: --out is empty: name a folder (or leave --out out for the default)
    """
    from pr1lib.store.folders import check_out_path

    try:
        return str(check_out_path(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def out_file(text: str) -> str:
    """An argparse ``type``: a file a command may write (not empty, not a folder, not under a
    file).

    >>> out_file(".")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: '.' is a folder: name a file to write
    """
    from pathlib import Path

    path = Path(text).expanduser()
    if not text.strip():
        raise argparse.ArgumentTypeError("the file name is empty: name a file to write")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder: name a file to write")
    above = next((p for p in path.absolute().parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise argparse.ArgumentTypeError(f"{text} lies under {above}, which is a file")
    return text

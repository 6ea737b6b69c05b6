"""Every flag of every command line, probed with a bad value (issue 53).

The command lines are read from the parsers themselves: ``python -m pr1lib``'s (every command,
every ``study NAME``) and each ``benchmarks/*.py``'s ``arguments()``. Each flag that takes a value
needs a bad-value case in ``BAD`` (by flag) or ``ONLY`` (by command line and flag); each ``--set``
key gets its cases from its field's type, range and choices (``set_cases``). Every case must exit
2 with one line that names what is wrong, before anything is written: the test's folder (its
``--out``, its runs, its result cards) is byte for byte as before. ``missing_cases`` lists what the
table lacks, so a flag added without a case fails ``test_every_flag_has_a_bad_value_case``;
``test_a_new_flag_without_a_case_is_caught`` shows it on a planted flag.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import io
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from _probes import quiet, snapshot

from pr1lib.cli.main import build_parser, main
from pr1lib.config import (
    ColdStartConfig,
    EvalConfig,
    GRPOStageConfig,
    PretrainConfig,
    SFTStageConfig,
)
from pr1lib.config.checks import CHECKERS, FLAG_FIELDS, RULES, allowed_values, kinds
from pr1lib.experiments import STUDIES
from pr1lib.store.paths import REPO_ROOT

BENCHMARKS = sorted((REPO_ROOT / "benchmarks").glob("*.py"))


@dataclass(frozen=True)
class Case:
    argv: tuple[str, ...]  # after the command line's own words (and its BASE unless whole)
    needle: str  # in the one line printed
    whole: bool = False  # the argv replaces BASE (a positional's case)


# --------------------------------------------------------------------------- the command lines
def _bench_module(path: Path):
    spec = importlib.util.spec_from_file_location(f"probe_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass in it looks its module up
    spec.loader.exec_module(module)
    return module


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_lines(cli: argparse.ArgumentParser | None = None) -> dict[str, tuple]:
    """``name -> (parser, run)``: every command line, ``run(argv)`` giving its exit code."""
    found: dict[str, tuple] = {}
    for name, parser in _subparsers(cli or build_parser()).items():
        inner = _subparsers(parser)
        for sub, subparser in inner.items() or [(None, parser)]:
            words = [name, sub] if sub else [name]
            found[" ".join(words)] = (subparser, lambda argv, w=words: main([*w, *argv]))
    for path in BENCHMARKS:
        module = _bench_module(path)
        parser = module.arguments()
        for sub, subparser in _subparsers(parser).items() or [(None, parser)]:
            words = [sub] if sub else []
            key = f"benchmarks/{path.name}" + (f" {sub}" if sub else "")
            found[key] = (subparser, lambda argv, m=module, w=words: m.main([*w, *argv]) or 0)
    return found


def flags(parser: argparse.ArgumentParser) -> list[str]:
    """The flags (and positionals) of ``parser`` that take a value: switches take none."""
    takes = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            continue
        takes.append(action.option_strings[0] if action.option_strings else action.dest)
    return takes


# --------------------------------------------------------------------------- the table
MODEL = Case(("/no/such/model",), "model folder /no/such/model does not exist")
BAD: dict[str, list[Case]] = {
    "--profile": [Case(("nope",), "invalid choice: 'nope'")],
    "--out": [Case(("",), "--out is empty")],
    "--seed": [Case(("-1",), "argument --seed"), Case(("4294967296",), "4294967295")],
    "--card": [Case(("Bad Name",), "--card 'Bad Name'")],
    "--model": [MODEL],
    "--init": [Case(("/no/such/init",), "model folder /no/such/init does not exist")],
    "--n": [Case(("-1",), "argument --n"), Case(("100000001",), "100000")],
    "--k": [Case(("0",), "argument --k"), Case(("1025",), "1024")],
    "--limit": [Case(("0",), "argument --limit"), Case(("999999999",), "100000")],
    "--steps": [Case(("0",), "argument --steps")],
    "--seeds": [Case(("-1",), "argument --seeds"), Case(("1", "1"), "repeats seed 1")],
    "--sft-seeds": [Case(("-1",), "argument --sft-seeds")],
    "--switch": [Case(("0",), "argument --switch")],
    "--repeats": [Case(("0",), "argument --repeats")],
    "--threads": [Case(("0",), "argument --threads"), Case(("100000",), "argument --threads")],
    "--path-len": [Case(("0",), "argument --path-len"), Case(("10000000",), "131072")],
    "--world": [Case(("nope",), "invalid choice: 'nope'")],
    "--variant": [Case(("nope",), "invalid choice: 'nope'")],
    "--stage": [Case(("4",), "invalid choice: '4'")],
    "--reward": [Case(("nope",), "invalid choice: 'nope'")],
    "--reward-mode": [Case(("nope",), "invalid choice: 'nope'")],
    "--arm": [Case(("nope",), "invalid choice: 'nope'")],
    "--mode": [Case(("nope",), "invalid choice: 'nope'")],
    "--data": [Case(("/no/such",), "/no/such")],
    "--teacher": [Case(("nope",), "invalid choice: 'nope'")],
    "--source": [Case(("nope",), "invalid choice: 'nope'")],
    "--split": [Case(("nope",), "invalid choice: 'nope'")],
    "--data-path": [Case(("/no/such",), "--data-path /no/such does not exist")],
    "--data-dir": [Case(("/no/such",), "/no/such does not exist")],
    "--coldstart": [Case(("/no/such",), "--coldstart /no/such does not exist")],
    "--prompt-style": [Case(("nope",), "--prompt-style 'nope'")],
    "--only": [Case(("99",), "--only 99 matches no notebook")],
    "--timeout": [Case(("-1",), "argument --timeout"), Case(("nan",), "argument --timeout")],
    "--deadline": [Case(("0",), "argument --deadline")],
    "--max-retries": [Case(("-1",), "argument --max-retries")],
    "--rpm": [Case(("-1",), "argument --rpm"), Case(("inf",), "argument --rpm")],
    "--concurrency": [Case(("0",), "argument --concurrency")],
    "--base-url": [
        Case(("notaurl", "--teacher", "openai", "--model", "m"), "'notaurl' is not an http(s)")
    ],
    "--branch": [Case(("bad..name",), "--branch 'bad..name' is not a git branch name")],
    "--serial": [MODEL],
    "--unseen": [MODEL],
    "--widths": [Case(("5",), "invalid choice: 5"), Case(("two",), "argument --widths")],
    "--timed": [Case(("0",), "argument --timed"), Case(("100000001",), "100000")],
}
ONLY: dict[str, list[Case]] = {  # by command line and flag: where the generic case does not fit
    "bench which": [Case(("nope",), "invalid choice: 'nope'", whole=True)],
    "repo-url url": [Case(("notaurl",), "not a GitHub repository URL", whole=True)],
    "coldstart --model": [
        Case(("/no/such/model", "--teacher", "hf"), "model folder /no/such/model does not exist")
    ],
    "export-verl --prompt-style": [
        Case(("nope", "--source", "tinygsm-easy"), "--prompt-style 'nope'")
    ],
    "export-verl --data-dir": [
        Case(("/no/such", "--source", "gsm8k"), "--data-dir /no/such does not exist")
    ],
    "benchmarks/gpu_check.py --models": [Case(("nope",), "unknown model(s) ['nope']")],
    "benchmarks/gpu_check.py --budget-s": [Case(("-5",), "argument --budget-s")],
    "benchmarks/gpu_check.py --out": [Case((".",), "'.' is a folder")],
    "benchmarks/limit.py --new": [Case(("0",), "argument --new"), Case(("10**9",), "--new")],
    "benchmarks/tinyworld.py eval --t": [Case(("-1",), "argument --t")],
    "benchmarks/tinyworld.py eval --max-len": [Case(("0",), "argument --max-len")],
    "benchmarks/tinyworld.py eval --max-path": [Case(("999999999",), "argument --max-path")],
    "benchmarks/tinyworld.py sft --base": [MODEL],
    "benchmarks/tinyworld.py sft --out": [Case(("",), "--out is empty")],
}
# what a command line needs besides the flag probed (a positional, a required flag)
BASE = {
    "bench": ("all",),
    "repo-url": ("https://github.com/pr1-tutorial/pr1",),
    "benchmarks/tinyworld.py eval": ("--model", "data/tinyworld-sft"),
    "benchmarks/tinyworld.py sft": ("--out", "{tmp}/out"),
}


def cases_of(line: str, flag: str) -> list[Case] | None:
    """The bad-value cases of ``flag`` in command line ``line`` (``None``: the table has none)."""
    return ONLY.get(f"{line} {flag}") or BAD.get(flag)


# --------------------------------------------------------------------------- --set keys
# the configs a command line's --set changes (a dict: a study's own keys and their types)
SETS: dict[str, type | dict[str, str]] = {
    "eval": EvalConfig,
    "coldstart": ColdStartConfig,
    "sft": SFTStageConfig,
    "grpo": GRPOStageConfig,
    "pretrain-tiny": PretrainConfig,
    "blockcost": STUDIES["blockcost"].sets,
    "benchmarks/pretrain_tiny.py": PretrainConfig,
    "benchmarks/tinyworld.py sft": SFTStageConfig,
    **{f"study {n}": s.sets if s.sets is not None else GRPOStageConfig for n, s in STUDIES.items()},
}
# text fields any value of which is allowed (a name, a path, a URL a server answers on)
FREE_TEXT = {"teacher_model": "an LLM teacher's hub id, folder or served name (checked on use)"}
# candidates for a number outside a field's range, tried in order
OUT_OF_RANGE = {"int": (-1, 0, 10**12), "float": (-1.0, 0.0, 2.0, 1e12)}


def field_types(config: type | dict[str, str]) -> dict[str, tuple[str, str]]:
    """key -> (annotation, owner class name) of the --set keys of ``config``."""
    if isinstance(config, dict):
        return {k: (v, "") for k, v in config.items()}
    return {
        f.name: (str(f.type), config.__name__)
        for f in dataclasses.fields(config)
        if f.name not in FLAG_FIELDS
    }


def bad_values(key: str, annotation: str, owner: str) -> list[str] | None:
    """Bad values of one --set key from its type, range and choices (``None``: free text)."""
    bases, _ = kinds(annotation)
    if {"int", "float"} & set(bases):
        rule = RULES.get(f"{owner}.{key}") or RULES.get(key)
        kind = "int" if "int" in bases else "float"
        outside = [v for v in OUT_OF_RANGE[kind] if rule and not rule[0](v)][:1]
        return ["x", *map(str, outside)]
    if "bool" in bases:
        return ["maybe"]
    if "tuple" in bases:
        return ["notatuple"]
    if allowed_values(key) is not None or key in CHECKERS:
        return ["nope"]
    return None


def set_cases(line: str) -> dict[str, list[Case]]:
    """``"--set KEY"`` -> its cases for command line ``line`` (an unknown key and a malformed
    item too); a free-text key has none."""
    out = {
        "--set ?": [
            Case(("--set", "nope_key=1"), "nope_key"),
            Case(("--set", "noequals"), "noequals"),
        ]
    }
    for key, (annotation, owner) in field_types(SETS.get(line, {})).items():
        values = bad_values(key, annotation, owner)
        if values is not None:
            out[f"--set {key}"] = [Case(("--set", f"{key}={v}"), key) for v in values]
    return out


# --------------------------------------------------------------------------- what is missing
def missing_cases(lines: dict[str, tuple]) -> list[str]:
    """``"LINE FLAG"`` of every flag taking a value that the table gives no case, and every
    --set key whose field is neither typed nor free text (it would take any value)."""
    missing = []
    for line, (parser, _) in lines.items():
        for flag in flags(parser):
            if flag == "--set":
                missing += _set_keys_missing(line)
            elif cases_of(line, flag) is None:
                missing.append(f"{line} {flag}")
    return missing


def _set_keys_missing(line: str) -> list[str]:
    if line == "tour":  # the notebooks' parameters: any name they do not declare is refused
        return []
    if line not in SETS:
        return [f"{line} --set (which config?)"]
    keys = field_types(SETS[line])
    return [
        f"{line} --set {k}"
        for k, (annotation, owner) in keys.items()
        if bad_values(k, annotation, owner) is None and k not in FREE_TEXT
    ]


# --------------------------------------------------------------------------- the tests
LINES = command_lines()


def test_every_flag_has_a_bad_value_case():
    assert missing_cases(LINES) == []


def test_a_new_flag_without_a_case_is_caught():
    """A flag added to a command (or a benchmark) without a bad-value case fails the table."""
    cli = build_parser()
    _subparsers(cli)["eval"].add_argument("--max-seconds", type=int)
    lines = command_lines(cli)
    bench, _ = lines["benchmarks/latency.py"]
    bench.add_argument("--warmup", type=int)
    assert missing_cases(lines) == ["eval --max-seconds", "benchmarks/latency.py --warmup"]


def test_a_free_text_key_is_text():
    """The keys that take any value are text fields without choices (a number cannot hide in
    the list), and each is a key of some command."""
    seen = set()
    for line, config in SETS.items():
        for key, (annotation, _) in field_types(config).items():
            if key in FREE_TEXT:
                assert kinds(annotation)[0] == ("str",), (line, key)
                assert allowed_values(key) is None and key not in CHECKERS, (line, key)
                seen.add(key)
    assert seen == set(FREE_TEXT)


def cases_for(line: str) -> list[tuple[str, Case]]:
    """``(flag, case)`` of every bad value command line ``line`` is probed with."""
    parser, _ = LINES[line]
    found = []
    for flag in flags(parser):
        table = set_cases(line) if flag == "--set" else {flag: cases_of(line, flag) or []}
        found += [(name, case) for name, cases in table.items() for case in cases]
    return found


def argv_of(line: str, flag: str, case: Case, tmp: Path) -> list[str]:
    """The arguments of one case: the line's BASE, the flag and its bad value, and an ``--out``
    in the test's folder where the line takes one."""
    parser, _ = LINES[line]
    base = () if case.whole else BASE.get(line, ())
    named = flag.startswith("-") and not flag.startswith("--set") and not case.whole
    argv = [*base, *((flag,) if named else ()), *case.argv]
    if any("--out" in a.option_strings for a in parser._actions) and "--out" not in argv:
        argv += ["--out", str(tmp / "out")]
    return [a.replace("{tmp}", str(tmp)) for a in argv]


@pytest.mark.parametrize("line", sorted(LINES))
def test_a_bad_value_is_one_line_before_anything_is_written(line, tmp_path, monkeypatch, capsys):
    """Every bad value of every flag of ``line`` (one test per command line: a case costs a
    parser, not a process): exit 2, one line naming it, the folder as it was."""
    quiet(monkeypatch, tmp_path)
    monkeypatch.chdir(REPO_ROOT)  # the shipped models and notebooks are where they always are
    _, run = LINES[line]
    wrong = []
    for flag, case in cases_for(line):
        argv = argv_of(line, flag, case, tmp_path)
        before = snapshot(tmp_path)
        code, lines = _run(run, argv, capsys)
        one = code == 2 and len(lines) == 1 and "Traceback" not in lines[0]
        if not (one and case.needle in lines[0]) or snapshot(tmp_path) != before:
            wrong.append((argv, code, lines[-3:]))
    assert wrong == []
    assert cases_for(line) or not flags(LINES[line][0])


def _run(run: Callable[[list[str]], int], argv: list[str], capsys) -> tuple[int, list[str]]:
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = run(argv)
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    text = out.getvalue() + err.getvalue() + captured.out + captured.err
    return code, [line for line in text.splitlines() if line.strip()]

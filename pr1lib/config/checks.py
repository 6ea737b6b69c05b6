"""What a user hands a command, checked before anything is written.

``--set KEY=VALUE`` values are parsed by the type of the config field they name (the dataclass
annotations: ``int``, ``float``, ``bool``, ``str``, ``X | None``, ``tuple[...]``); every config,
made by a command or in Python, passes ``check_fields`` (``Preset.__post_init__``): types, ranges
(``RULES``) and choices (``CHOICES``). Model folders are checked here too (saved data sets in
``pr1lib.data.savedsets``). Each failure is one ``ValueError`` sentence naming the field or path,
the value and what is allowed; the command line prints it as one line and exits 2. No heavy import:
``pr1lib.cli.main`` may use this.

>>> parse_value("limit", "int | None", "7"), parse_value("limit", "int | None", "None")
(7, None)
>>> parse_value("limit", "int | None", "abc")
Traceback (most recent call last):
...
ValueError: --set limit=abc: limit must be None or a whole number, got 'abc'
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import math
import numbers
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable

from pr1lib.format.grammar import LETTERS
from pr1lib.store.modelfiles import check_model_files
from pr1lib.store.paths import REPO_ROOT
from pr1lib.worlds.tasks import MAX_PROBLEMS

MAX_SEED = 2**32 - 1  # numpy (and so every seeded library) takes seeds in [0, 2**32)
# samples per problem: pass@k reads up to k (the paper's largest k is 16); beyond it a typo such
# as --k 100000000 would hold n * k completions in memory
MAX_SAMPLES = 1024
# tokens of one completion, path or training row: the longest context of any model here (Qwen3
# with YaRN); beyond it the key/value cache alone would not fit in memory
MAX_TOKENS = 131_072
# torch threads: one per CPU at most (torch.set_num_threads takes a million, then the first
# matmul never returns)
MAX_THREADS = os.cpu_count() or 1
# name -> (test, words): a number that fails the test is refused ("must be a number <words>")
_ABOVE_0 = (lambda v: v > 0, "above 0")
_AT_LEAST_0 = (lambda v: v >= 0, "0 or more")
_FRACTION = (lambda v: 0 <= v <= 1, "from 0 to 1")
_PROBLEMS = (
    lambda v: 0 < v <= MAX_PROBLEMS,
    f"from 1 to {MAX_PROBLEMS:,} (the most problems a world generates per request)",
)
_SAMPLES = (lambda v: 0 < v <= MAX_SAMPLES, f"from 1 to {MAX_SAMPLES} (samples per problem)")
_TOKENS = (
    lambda v: 0 < v <= MAX_TOKENS,
    f"from 1 to {MAX_TOKENS:,} (the longest context of any model here)",
)
RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    **{
        name: _ABOVE_0
        for name in (
            "batch_size per_device_train_batch_size gradient_accumulation_steps llm_batch_size "
            "num_paths concurrency logging_steps save_steps max_steps vocab_size "
            "hidden_size num_layers num_heads num_kv_heads intermediate_size "
            "max_position_embeddings length_buckets lora_r lora_alpha window "
            "path_len repeats sft_steps "
            "switch total scaffold_batch learning_rate timeout deadline "
            "num_train_epochs max_grad_norm budget_vram_gib budget_minutes"
        ).split()
    },
    **{
        name: _PROBLEMS
        for name in "n limit train_n eval_n nll_n table_n sft_train_n scaffold_eval_n".split()
    },
    **{name: _SAMPLES for name in "k eval_k table_k".split()},
    "num_threads": (lambda v: 0 < v <= 256, "from 1 to 256 (torch threads)"),
    **{
        name: _TOKENS
        for name in (
            "max_new_tokens max_completion_length max_path_length max_length max_tokens "
            "eval_max_new_tokens"
        ).split()
    },
    **{
        name: _AT_LEAST_0
        for name in (
            "warmup_steps weight_decay max_retries requests_per_minute "
            "max_consecutive_failures llm_limit temperature epsilon epsilon_high beta "
            "parallel_steps max_blocks show max_refills prefilter_k tiered_bonus"
        ).split()
    },
    **{
        name: _FRACTION
        for name in (
            "hard_fraction min_lr_ratio plain_share warmup_ratio lora_dropout adam_beta2"
        ).split()
    },
    "top_p": (lambda v: 0 < v <= 1, "above 0 and at most 1"),
    "seed": (lambda v: 0 <= v <= MAX_SEED, f"from 0 to {MAX_SEED} (numpy's seed range)"),
    "num_generations": (lambda v: v >= 2, "of 2 or more"),  # GRPO compares a group's samples
    "SFTStageConfig.max_length": (
        lambda v: 32 <= v <= MAX_TOKENS,
        f"from 32 (no prompt and completion is shorter) to {MAX_TOKENS:,}",
    ),
    "SFTStageConfig.max_steps": (
        lambda v: v == -1 or v > 0,
        "above 0, or -1 (train num_train_epochs)",
    ),
}
# name -> the allowed values, or a function giving them when they can grow (a world registered
# later); config and profiles add theirs through register_choices
CHOICES: dict[str, tuple | Callable[[], tuple]] = {
    "split": ("train", "test"),
    "teacher": ("rule", "hf", "openai"),
    "loss_reduction": ("sample", "token"),
    "engine": ("rollout", "generate", "auto"),
    "dtype": ("float32", "bfloat16", "float16"),
    "attn_implementation": ("sdpa", "eager", "flex_attention"),
    "stage": (2, 3),
}
# name -> a check of the value (what is wrong with it, None when nothing) for fields whose valid
# values are a rule rather than a list ("+"-joined sources, (mode, weight) pairs, a URL); the
# modules that know the rule add theirs through register_checks
CHECKERS: dict[str, Callable[[Any], str | None]] = {}
FLAG_FIELDS = {"profile": "--profile", "stage": "--stage"}  # set by a flag, never by --set
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
_WORDS = {
    "int": "a whole number",
    "float": "a number",
    "bool": "True or False",
    "str": "text",
    "tuple": "a tuple such as ('a', 'b')",
}


def register_choices(**choices: Iterable | Callable[[], Iterable]) -> None:
    """Add the allowed values of fields (by name) to ``CHOICES``: a collection, or a function that
    returns the current ones."""
    CHOICES.update({k: v if callable(v) else tuple(v) for k, v in choices.items()})


def register_checks(**checks: Callable[[Any], str | None]) -> None:
    """Add checks of fields (by name) to ``CHECKERS``: each returns what is wrong with a value
    (one sentence), ``None`` when nothing is."""
    CHECKERS.update(checks)


def url_problem(url: str) -> str | None:
    """What keeps ``url`` from being a server's base URL (``""``: none given, allowed).

    >>> url_problem("http://127.0.0.1:8000/v1") is None, url_problem("not a url")
    (True, "'not a url' is not an http(s) URL such as http://127.0.0.1:8000/v1")
    """
    from urllib.parse import urlsplit

    if url == "":
        return None
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        parts, port_ok = None, False
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        return f"{url!r} is not an http(s) URL such as http://127.0.0.1:8000/v1"
    return None


register_checks(base_url=url_problem)


def allowed_values(name: str) -> tuple | None:
    """The values a field called ``name`` may take (``CHOICES``), ``None`` when any will do.

    >>> allowed_values("split")
    ('train', 'test')
    """
    allowed = CHOICES.get(name)
    return tuple(allowed()) if callable(allowed) else allowed


# ----------------------------------------------------------------------------- annotations
def kinds(annotation: str) -> tuple[tuple[str, ...], bool]:
    """``("int",), True`` for ``"int | None"``: the base types of an annotation, and whether
    ``None`` is allowed.

    >>> kinds("tuple[tuple[str, float], ...]"), kinds("bool | None")
    ((('tuple',), False), (('bool',), True))
    """
    parts = [p.strip().split("[")[0] for p in str(annotation).split("|")]
    return tuple(p for p in parts if p != "None"), "None" in parts


def describe(annotation: str) -> str:
    """What an annotation allows, in words.

    >>> describe("int | None"), describe("float")
    ('None or a whole number', 'a number')
    """
    bases, optional = kinds(annotation)
    words = " or ".join(_WORDS.get(b, b) for b in bases)
    return f"None or {words}" if optional else words


def _matches(value: Any, base: str) -> bool:
    if base == "bool":
        return isinstance(value, bool)
    if base in ("int", "float"):
        number = numbers.Integral if base == "int" else numbers.Real
        return (
            isinstance(value, number)
            and not isinstance(value, bool)
            and (base == "int" or math.isfinite(value))
        )
    return isinstance(value, {"str": str, "tuple": tuple}.get(base, object))


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def _parse_one(base: str, raw: str) -> Any:
    if base == "str":
        return raw
    if base == "bool":
        return {"true": True, "false": False, "1": True, "0": False}[raw.strip().lower()]
    if base == "int":
        return int(raw.strip())
    if base == "float":
        return float(raw.strip())
    value = ast.literal_eval(raw)
    if not isinstance(value, (list, tuple)):
        raise ValueError(raw)
    return _tuples(value)


def parse_value(key: str, annotation: str, raw: str) -> Any:
    """``raw`` (the text after ``=``) as the field's type; ``"None"`` where the field allows it.

    >>> parse_value("use_lora", "bool", "true"), parse_value("lr", "float", "3e-4")
    (True, 0.0003)
    """
    bases, optional = kinds(annotation)
    if optional and raw.strip() in ("None", "none", "null"):
        return None
    for base in sorted(bases, key=lambda b: b == "str"):  # text last: "3" in int | str is 3
        try:
            value = _parse_one(base, raw)
        except (ValueError, KeyError, SyntaxError, TypeError):
            continue
        if base != "float" or math.isfinite(value):
            return value
    raise ValueError(f"--set {key}={raw}: {key} must be {describe(annotation)}, got {raw!r}")


# ----------------------------------------------------------------------------- configs
def field_names(cls: type) -> list[str]:
    """The fields ``--set`` may change (every field but those set by their own flag)."""
    return [f.name for f in dataclasses.fields(cls) if f.name not in FLAG_FIELDS]


def unknown_key(cls: type, key: str, hint: str = "") -> ValueError:
    """One line for a key ``cls`` has no field for: the valid keys, close matches first.

    >>> from pr1lib.config import EvalConfig
    >>> str(unknown_key(EvalConfig, "top-p"))[:53]
    "unknown key 'top-p' for EvalConfig; valid keys: top_p"
    """
    valid = field_names(cls)
    close = difflib.get_close_matches(key, valid, n=3, cutoff=0.6)
    ordered = close + [k for k in valid if k not in close]
    if key in FLAG_FIELDS:
        return ValueError(f"{key} is set with {FLAG_FIELDS[key]}, not --set")
    if key in ("name", "model", "model_name", "init") and not hint:
        hint = " (a model folder or hub id goes in --model DIR)"
    return ValueError(
        f"unknown key {key!r} for {cls.__name__}{hint}; valid keys: {', '.join(ordered)}"
    )


def parse_sets(cls: type, items: Iterable[str], hint: str = "") -> dict[str, Any]:
    """``--set KEY=VALUE`` items as typed overrides of ``cls``'s fields (one line per mistake).

    >>> from pr1lib.config import EvalConfig
    >>> parse_sets(EvalConfig, ["k=8", "grader=official", "n=None"])
    {'k': 8, 'grader': 'official', 'n': None}
    >>> parse_sets(EvalConfig, ["temprature=0"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown key 'temprature' for EvalConfig; valid keys: temperature, ...
    """
    types = {f.name: f.type for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
        if key not in types or key in FLAG_FIELDS:
            raise unknown_key(cls, key, hint)
        out[key] = parse_value(key, types[key], raw)
    return out


def parse_keys(items: Iterable[str], types: dict[str, str], who: str) -> dict[str, Any]:
    """``--set KEY=VALUE`` items of a command without a config class: each key one of ``types``
    (key -> annotation), typed by it and checked against ``RULES``.

    >>> parse_keys(["temperature=0.5"], {"temperature": "float"}, "blockcost")
    {'temperature': 0.5}
    >>> parse_keys(["max_blocks=-1"], {"max_blocks": "int"}, "blockcost")
    Traceback (most recent call last):
    ...
    ValueError: max_blocks must be a whole number 0 or more, got -1
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
        if key not in types and not types:
            raise ValueError(f"{who} takes no --set ({item}): it has no settings to change")
        if key not in types:
            raise ValueError(f"{who} --set {key}: choose from {', '.join(types)}")
        value = parse_value(key, types[key], raw)
        rule = RULES.get(key)
        if rule is not None and isinstance(value, numbers.Real) and not rule[0](value):
            raise ValueError(f"{key} must be {describe(types[key])} {rule[1]}, got {value!r}")
        allowed = allowed_values(key)
        if allowed is not None and value not in allowed:
            raise ValueError(f"{key} must be one of {allowed}, got {value!r}")
        out[key] = value
    return out


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["lr=1e-3", "name=abc"]`` -> ``{"lr": 0.001, "name": "abc"}`` (Python literals, else
    strings): ``--set`` values of a command without a config class (``blockcost``'s sampling
    settings); ``parse_sets`` types them by a config's fields.

    >>> parse_overrides(["max_steps=5", "name=data/tiny-base", "use_lora=True"])
    {'max_steps': 5, 'name': 'data/tiny-base', 'use_lora': True}"""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            out[key.strip()] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key.strip()] = raw
    return out


def check_fields(cfg: Any) -> None:
    """Refuse a config whose fields have the wrong type, are out of range or not a choice.

    >>> from pr1lib.config import EvalConfig
    >>> EvalConfig(temperature="hot")
    Traceback (most recent call last):
    ...
    ValueError: temperature must be a number, got 'hot'
    """
    for f in dataclasses.fields(cfg):
        value, (bases, optional) = getattr(cfg, f.name), kinds(f.type)
        if value is None and optional:
            continue
        if not any(_matches(value, b) for b in bases):
            raise ValueError(f"{f.name} must be {describe(f.type)}, got {value!r}")
        rule = RULES.get(f"{type(cfg).__name__}.{f.name}") or RULES.get(f.name)
        if rule is not None and isinstance(value, numbers.Real) and not rule[0](value):
            raise ValueError(f"{f.name} must be {describe(f.type)} {rule[1]}, got {value!r}")
        allowed = allowed_values(f.name)
        if allowed is not None and value not in allowed:
            raise ValueError(f"{f.name} must be one of {allowed}, got {value!r}")
        why = CHECKERS[f.name](value) if f.name in CHECKERS and value is not None else None
        if why:
            raise ValueError(f"{f.name}: {why}")
    for relation in RELATIONS:
        why = relation(cfg)
        if why:
            raise ValueError(why)


def letter_paths(cfg: Any) -> str | None:
    """What is wrong with a config whose paths open with letter headers, ``(B)`` to ``(Z)``, when
    it asks for more paths than there are letters after ``(A)`` (``None``: nothing).

    >>> from types import SimpleNamespace as S
    >>> letter_paths(S(path_headers=True, header_style="letter", num_paths=26))[:40]
    'num_paths=26: letter headers name at mos'
    """
    most = len(LETTERS) - 1  # (A) is what comes before the block
    lettered = getattr(cfg, "path_headers", False) and getattr(cfg, "header_style", "") == "letter"
    paths = getattr(cfg, "num_paths", None)
    if lettered and isinstance(paths, int) and paths > most:
        return (
            f"num_paths={paths}: letter headers name at most {most} paths, (B) to (Z) "
            f"(give num_paths {most} or fewer, or header_style='number')"
        )
    return None


# rules between a config's fields: each returns what is wrong (one sentence), None when nothing
RELATIONS: list[Callable[[Any], str | None]] = [letter_paths]  # config.rl adds hidden_plans


def check_count(flag: str, value: int | None, lowest: int = 1, none: str = "") -> None:
    """Refuse a count below ``lowest`` (``none``: what leaving it out means, for the message).

    >>> check_count("--threads", 0)
    Traceback (most recent call last):
    ...
    ValueError: --threads must be a whole number of 1 or more, got 0
    """
    if value is not None and value < lowest:
        extra = f" ({none})" if none else ""
        raise ValueError(f"{flag} must be a whole number of {lowest} or more{extra}, got {value}")


# ----------------------------------------------------------------------------- folders
def looks_like_path(name: str) -> bool:
    """True for a name that can only be a folder: absolute, starting with ``.`` or ``~``, or
    with a separator that does not make it a hub id ``org/name``.

    >>> [looks_like_path(n) for n in ("Qwen/Qwen3-4B-Base", "/models/qwen", "a/b/c", "./m")]
    [False, True, True, True]
    """
    text = str(name)
    if os.path.isabs(text) or text.startswith((".", "~")):
        return True
    separators = [s for s in (os.sep, os.altsep, "\\") if s]
    hub_id = re.fullmatch(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*", text) is not None
    return any(s in text for s in separators) and not hub_id


def local_folder(name: str | Path) -> Path | None:
    """The existing folder ``name`` names (relative: from here, else from the repo root)."""
    path = Path(str(name)).expanduser()
    for candidate in (path,) if path.is_absolute() else (path, REPO_ROOT / path):
        if candidate.exists():
            return candidate
    return None


def utf8_name(path: str | Path) -> bool:
    """Whether ``path`` is UTF-8 text (a name read from a disk that is not decodes to lone
    surrogates, which no UTF-8 library can open).

    >>> utf8_name("runs/sft"), utf8_name(os.fsdecode(b"runs/m\\xff"))
    (True, False)
    """
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_model(name: str | Path) -> str:
    """``name`` after checking it: a folder that does not exist (when ``name`` can only be a
    path), one without ``config.json`` and tokenizer files, or one whose files are damaged or do
    not match (``pr1lib.store.modelfiles.check_model_files``) is refused; a hub id passes.

    >>> check_model("Qwen/Qwen3-0.6B-Base")
    'Qwen/Qwen3-0.6B-Base'
    >>> check_model("/no/such/model")
    Traceback (most recent call last):
    ...
    ValueError: model folder /no/such/model does not exist (a hub id looks like org/name)
    """
    if not utf8_name(name):
        raise ValueError(
            f"model folder {str(name)!r} has a name that is not UTF-8 text (transformers and "
            "safetensors open folders by UTF-8 names): rename the folder, then pass the new name"
        )
    found = local_folder(name)
    if found is None:
        if looks_like_path(str(name)):
            raise ValueError(f"model folder {name} does not exist (a hub id looks like org/name)")
        return str(name)
    folder = found / "merged" if (found / "merged").is_dir() else found
    if not folder.is_dir():
        raise ValueError(f"model {name} is a file: pass a model folder or a run folder")
    missing = [
        what
        for what, files in (("config.json", ("config.json",)), ("tokenizer files", TOKENIZER_FILES))
        if not any((folder / f).is_file() for f in files)
    ]
    if missing:
        raise ValueError(
            f"{name} is not a model folder: it has no {' and no '.join(missing)} "
            "(pass a folder saved with save_pretrained, or a finished sft/grpo run "
            "folder with merged/)"
        )
    check_model_files(folder)
    return str(name)

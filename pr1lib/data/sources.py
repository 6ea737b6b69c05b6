"""Problem sources for the cold-start pipeline, all in one record shape.

Every loader returns a list of dicts ``{"id", "question", "answer_text", "answer", "source"}``:
``answer_text`` is a worked reference solution (GSM8K-style, ``<<a+b=c>>`` annotations and a final
``#### N``) or ``""`` where the source has none (DAPO-Math); ``answer`` is the gold final value.

Where the data comes from, in order: an explicit ``path`` (a JSONL file or a folder); the shared
data folder (``PR1_DATA_DIR``, else ``../shared/data`` next to the repo, layout as in its README:
``gsm8k/train.jsonl``, ``gsm8k/test.jsonl``, ``dapo/dapo_math_17k.jsonl``); the Hugging Face hub
through ``datasets.load_dataset`` when online. A source found nowhere raises ``DataNotFoundError``
naming both ways to fix it. A world's sources (``pr1lib.worlds``: ``tinygsm-easy``,
``tinyworld-hard``, ...) are generated, so they are always there.

>>> sources()[:8]
('gsm8k', 'dapo', 'tinygsm-easy', 'tinygsm-hard', 'tinyworld-easy', 'tinyworld-hard', \
'wideworld-easy', 'wideworld-hard')
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from pr1lib import worlds
from pr1lib.format.answers import non_finite
from pr1lib.store.jsonl import read_rows
from pr1lib.store.paths import shared_data_dir
from pr1lib.format.prompts import split_gsm8k_answer
from pr1lib.config.checks import register_checks

REAL_SOURCES = ("gsm8k", "dapo")  # real data sets (a file or the hub); the rest are worlds'
NO_SOLUTIONS = ("dapo",)  # answers only: no worked solution for the rule teacher to rewrite
# name -> (file under the data folder for each split, hub id, hub config)
LOCAL_FILES = {
    "gsm8k": {"train": "gsm8k/train.jsonl", "test": "gsm8k/test.jsonl"},
    "dapo": {"train": "dapo/dapo_math_17k.jsonl"},
}
HUB = {"gsm8k": ("openai/gsm8k", "main"), "dapo": ("BytedTsinghua-SIA/DAPO-Math-17k", None)}
# name -> the fields every row of its local file needs ("a|b": either; DAPO: local or hub layout)
FIELDS = {"gsm8k": ("question", "answer"), "dapo": ("problem|prompt", "answer|reward_model")}
WORLD_DEFAULT_N = 2000  # problems of a world source when no limit is given
# name -> what makes a row distinct. The hub's DAPO-Math-17k holds each of its 17.9k prompts about
# 100 times (1.79M rows); every loader keeps the first copy of each (local file or hub).
DISTINCT = {
    "dapo": lambda row: (
        row.get("index")
        or (row.get("extra_info") or {}).get("index")
        or str(row.get("problem") or row.get("prompt"))
    )
}


def _text(row: dict, field: str) -> str | None:
    """What is wrong with ``row[field]`` as text (``None``: nothing)."""
    value = row.get(field)
    if isinstance(value, str) and value.strip():
        return None
    got = "empty text" if isinstance(value, str) else f"{value!r}"
    return f'field "{field}" must be non-empty text, got {got}'


def _gold(value: Any, field: str) -> str | None:
    """What is wrong with a gold answer (text or a number; never null, a bool, empty, NaN or
    infinite: no answer could match it)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (str, int, float))
        or not str(value).strip()
    ):
        return f'field "{field}" must be the gold answer (text or a number), got {value!r}'
    if non_finite(value):
        return f'field "{field}" must be a finite gold answer, got {value!r}'
    return None


def check_gsm8k_row(row: dict) -> str | None:
    """What keeps ``row`` from being a GSM8K row (``None``: it is one).

    >>> check_gsm8k_row({"question": 123, "answer": "#### 5"})
    'field "question" must be non-empty text, got 123'
    """
    why = _text(row, "question") or _text(row, "answer")
    if why is None and "####" not in row["answer"]:
        return 'field "answer" has no "#### N" line (the final answer of a GSM8K solution)'
    final = row["answer"].rsplit("####", 1)[-1].strip() if why is None else ""
    if why is None and (not final or non_finite(final)):
        return f'field "answer" must end in a finite "#### N", got "#### {final}"'
    return why


def check_dapo_row(row: dict) -> str | None:
    """What keeps ``row`` from being a DAPO-Math row, local (``problem``, ``answer``) or hub
    layout (``prompt`` chat list, ``reward_model.ground_truth``); ``None``: it is one.

    >>> check_dapo_row({"problem": "Find x.", "answer": None})
    'field "answer" must be the gold answer (text or a number), got None'
    """
    if "problem" in row:
        return _text(row, "problem") or _gold(row.get("answer"), "answer")
    prompt = row.get("prompt")
    first = prompt[0] if isinstance(prompt, list) and prompt else None
    if not isinstance(first, dict) or _text(first, "content"):
        return f'field "prompt" must be a chat list of messages with "content", got {prompt!r:.80}'
    reward = row.get("reward_model")
    if not isinstance(reward, dict):
        return f'field "reward_model" must hold "ground_truth", got {reward!r:.80}'
    return _gold(reward.get("ground_truth"), "reward_model.ground_truth")


CHECKS = {"gsm8k": check_gsm8k_row, "dapo": check_dapo_row}  # name -> the check of one row


class DataNotFoundError(FileNotFoundError):
    """A data set that is neither in a local folder nor loadable from the hub."""


def read_jsonl(
    path: str | Path,
    required: Iterable[str] = (),
    check: Any = None,
    limit: int | None = None,
    key: Any = None,
) -> list[dict]:
    """Every JSON object of a JSON Lines file (blank lines skipped), or the first ``limit``
    (distinct by ``key``, when given) without reading further; a malformed or non-object line, a
    row without a ``required`` field or one ``check`` refuses, or an empty file is one
    ``pr1lib.store.jsonl.JsonlError`` naming the file, the line and the field
    (``pr1lib.store.jsonl.read_rows``)."""
    return read_rows(path, required, check, limit, key)


def check_split(name: str, split: str) -> None:
    """Refuse a split the source does not have (DAPO-Math has only ``train``).

    >>> check_split("dapo", "test")
    Traceback (most recent call last):
    ...
    ValueError: dapo has no 'test' split; choose one of ['train']
    """
    if name in LOCAL_FILES and split not in LOCAL_FILES[name]:
        raise ValueError(
            f"{name} has no {split!r} split; choose one of {sorted(LOCAL_FILES[name])}"
        )


def gsm8k_record(row: dict, index: int, split: str = "train", source: str = "gsm8k") -> dict:
    """A GSM8K-shaped row (``question``, ``answer`` with ``#### N``) in the common record shape.

    >>> gsm8k_record({"question": "1+1?", "answer": "1+1=<<1+1=2>>2\\n#### 2"}, 7)
    {'id': 'gsm8k-train-00007', 'question': '1+1?', 'answer_text': '1+1=<<1+1=2>>2\\n#### 2',
     'answer': '2', 'source': 'gsm8k'}
    """
    _, final = split_gsm8k_answer(row["answer"])
    return {
        "id": f"{source}-{split}-{index:05d}",
        "question": row["question"].strip(),
        "answer_text": row["answer"],
        "answer": final,
        "source": source,
    }


def dapo_problem(prompt: str) -> str:
    """The bare problem inside DAPO-Math's instruction wrapper (its middle paragraph), as the
    paper's preprocessing does; a prompt without the wrapper is returned unchanged.

    >>> dapo_problem("Solve the following math problem.\\n\\nWhat is 1+1?\\n\\nRemember to answer.")
    'What is 1+1?'
    """
    parts = prompt.split("\n\n")
    return parts[1].strip() if len(parts) >= 3 and parts[0].startswith("Solve") else prompt.strip()


def dapo_record(row: dict, index: int) -> dict:
    """A DAPO-Math row (local JSONL or hub layout) in the common record shape (no reference
    solution).

    >>> dapo_record({"problem": "Find x.", "answer": "3", "index": "ab-12"}, 0)["id"]
    'dapo-ab-12'
    """
    if "problem" in row:
        question, answer, uid = row["problem"], row["answer"], row.get("index")
    else:  # hub layout: chat prompt, reward_model.ground_truth, extra_info.index
        question = dapo_problem(row["prompt"][0]["content"])
        answer, uid = (
            row["reward_model"]["ground_truth"],
            (row.get("extra_info") or {}).get("index"),
        )
    return {
        "id": f"dapo-{uid or f'{index:05d}'}",
        "question": question.strip(),
        "answer_text": "",
        "answer": str(answer).strip(),
        "source": "dapo",
    }


def _local_file(name: str, split: str, path: str | Path | None) -> Path | None:
    """The JSONL file for ``name``/``split`` under ``path`` or the shared data folder, if
    present."""
    check_split(name, split)
    relative = LOCAL_FILES[name][split]
    roots = [Path(path).expanduser()] if path is not None else [d for d in [shared_data_dir()] if d]
    for root in roots:
        if root.is_file() and path is None:  # $PR1_DATA_DIR names a folder, never one file
            raise ValueError(
                f"PR1_DATA_DIR={root} is a file: it names the folder holding gsm8k/ and dapo/ "
                "(to read one file, pass it as --data-path)"
            )
        if root.is_file():
            return root
        for candidate in (root / relative, root / Path(relative).name):
            if candidate.is_file():
                return candidate
    return None


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE`` asks for no network."""
    return any(
        os.environ.get(k, "0").lower() not in ("", "0", "false", "no")
        for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


def _not_found(
    name: str, split: str, why: str, path: str | Path | None = None
) -> DataNotFoundError:
    """Where ``name`` was looked for and the two ways to get it (the folder given, else
    ``$PR1_DATA_DIR``; the hub)."""
    relative = LOCAL_FILES[name][split]
    hub_id, config = HUB[name]
    call = (
        f"datasets.load_dataset({hub_id!r}{', ' + repr(config) if config else ''}, split={split!r})"
    )
    if path is not None:
        where = f"{name} ({split}) is not in {path}: put the file at {Path(path) / relative}"
    else:
        now = shared_data_dir() or "not set"
        where = (
            f"{name} ({split}) not found: put the file at <folder>/{relative} and set "
            f"PR1_DATA_DIR=<folder> (now: {now})"
        )
    return DataNotFoundError(f"{where}, or go online so that {call} can download it (hub: {why}).")


def distinct(rows: Iterable[dict], key: Any, limit: int | None = None) -> list[dict]:
    """The first row of each ``key(row)``, in order, until ``limit`` rows (stops reading there).

    >>> distinct([{"k": 1}, {"k": 1}, {"k": 2}, {"k": 3}], lambda r: r["k"], limit=2)
    [{'k': 1}, {'k': 2}]
    """
    seen, kept = set(), []
    for row in rows:
        if limit is not None and len(kept) >= limit:
            break
        if key(row) not in seen:
            seen.add(key(row))
            kept.append(row)
    return kept


def _load_hub(
    name: str, split: str, limit: int | None = None, path: str | Path | None = None
) -> list[dict]:
    """Rows from the hub; any failure (offline, no network, unknown id) is a
    ``DataNotFoundError`` (saying where a local copy was looked for: ``path``, else
    ``$PR1_DATA_DIR``)."""
    if hub_offline():
        raise _not_found(name, split, "HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set", path)
    try:
        from datasets import load_dataset  # heavy: only a hub download needs it (CLI speed)

        hub_id, config = HUB[name]
        if name in DISTINCT:  # the whole split: its first `limit` rows may be copies of a few
            return distinct(load_dataset(hub_id, config, split=split), DISTINCT[name], limit)
        return list(load_dataset(hub_id, config, split=f"{split}[:{limit}]" if limit else split))
    except Exception as err:  # turned into one clear message
        raise _not_found(
            name, split, str(err).splitlines()[0] if str(err) else type(err).__name__, path
        ) from err


def load_rows(
    name: str, split: str = "train", path: str | Path | None = None, limit: int | None = None
) -> list[dict]:
    """Raw rows of ``gsm8k`` or ``dapo`` (the first ``limit``): the local file if there is one, else
    the hub."""
    if name not in LOCAL_FILES:
        raise ValueError(f"unknown source {name!r}; choose one of {sources()}")
    check_limit(limit)
    if path is not None and not Path(path).expanduser().exists():
        raise DataNotFoundError(
            f"{path} does not exist: name the folder holding {name}/ or the file"
        )
    local = _local_file(name, split, path)
    if local is None:
        rows = _load_hub(name, split, limit, path)
        for number, row in enumerate(rows):  # the hub's rows pass the same checks
            why = CHECKS[name](row) if isinstance(row, dict) else "not an object"
            if why:
                raise ValueError(f"{HUB[name][0]} ({split}) row {number}: {why}")
        return rows
    return read_jsonl(local, FIELDS[name], CHECKS[name], limit, DISTINCT.get(name))


def load_gsm8k(
    split: str = "train", path: str | Path | None = None, limit: int | None = None
) -> list[dict]:
    """GSM8K ``train`` (7,473) or ``test`` (1,319) problems as common records."""
    rows = load_rows("gsm8k", split, path, limit)
    return [gsm8k_record(row, i, split) for i, row in enumerate(rows)]


def load_dapo(path: str | Path | None = None, limit: int | None = None) -> list[dict]:
    """DAPO-Math-17k problems (17,917 distinct; answers only, no worked solutions) as common
    records; the hub copy's repeats are dropped (``DISTINCT``)."""
    rows = load_rows("dapo", "train", path, limit)
    return [dapo_record(row, i) for i, row in enumerate(rows)]


def sources() -> tuple[str, ...]:
    """Every source name: the real data sets, then each registered world's tiers."""
    return REAL_SOURCES + worlds.sources()


def load_world(name: str, n: int, split: str = "train", seed: int = 0) -> list[dict]:
    """``n`` problems of a world's source (``tinyworld-hard``) as common records.

    >>> load_world("tinyworld-hard", 2)[0]["id"], load_world("tinygsm-easy", 1, "test")[0]["source"]
    ('tinyworld-hard-train-00000', 'tinygsm-easy')
    """
    check_limit(n)
    found = worlds.find_source(name)
    if found is None:
        raise ValueError(f"{name!r} is no world's source; choose one of {worlds.sources()}")
    world, tier = found
    rows = world.generate(n, tier, split, seed)
    return [gsm8k_record(row, i, split, source=name) for i, row in enumerate(rows)]


def source_shares(source: str, n: int) -> dict[str, int]:
    """``cfg.source`` split into its parts, ``n`` rows shared as evenly as possible.

    >>> source_shares("tinygsm-easy+tinygsm-hard", 5)
    {'tinygsm-easy': 3, 'tinygsm-hard': 2}
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n must be a whole number of 0 or more, got {n!r}")
    parts = [p.strip() for p in source.split("+")]
    unknown = [p for p in parts if p not in sources()]
    if unknown or len(set(parts)) != len(parts):
        raise ValueError(
            f"source must be distinct names from {sources()} joined by '+', got {source!r}"
        )
    return {p: n // len(parts) + (i < n % len(parts)) for i, p in enumerate(parts)}


def check_limit(limit: Any) -> None:
    """Refuse a ``limit`` that is not ``None`` or a whole number of 1 or more (a negative one
    would cut rows from the end, 0 would mean the default)."""
    whole = isinstance(limit, int) and not isinstance(limit, bool)
    if limit is not None and not (whole and limit >= 1):
        raise ValueError(
            f"limit must be None (every problem) or a whole number of 1 or more, got {limit!r}"
        )


def source_problem(value: str) -> str | None:
    """What is wrong with a ``source`` (or ``data``) field: ``None`` for one of ``sources()`` or
    distinct ones joined by "+".

    >>> source_problem("tinygsm-easy+tinygsm-hard") is None, source_problem("gsm8k+gsm8k")[:24]
    (True, "'gsm8k+gsm8k' is not one")
    """
    parts = [p.strip() for p in str(value).split("+")]
    if all(p in sources() for p in parts) and len(set(parts)) == len(parts):
        return None
    return f"{value!r} is not one of {', '.join(sources())}, or distinct ones joined by '+'"


register_checks(source=source_problem, data=source_problem)


def rule_teacher_problem(source: str) -> str | None:
    """Why the rule teacher cannot make traces of ``source`` (``None``: it can): it rewrites
    worked solutions, and some sources have answers only.

    >>> rule_teacher_problem("gsm8k") is None, rule_teacher_problem("tinygsm-easy+dapo")[:40]
    (True, 'dapo has no worked solutions (answers on')
    """
    bare = [p.strip() for p in source.split("+") if p.strip() in NO_SOLUTIONS]
    if not bare:
        return None
    return (
        f"{bare[0]} has no worked solutions (answers only), so the rule teacher, which rewrites "
        "them, would keep no row: use an LLM teacher (--teacher hf or openai) for it"
    )


def load_source(
    name: str,
    split: str = "train",
    limit: int | None = None,
    path: str | Path | None = None,
    seed: int = 0,
) -> list[dict]:
    """Any of ``sources()`` by name (``limit`` caps the count; a world's default is 2,000), or
    several joined by "+" sharing ``limit`` (``source_shares``; no limit: each whole), one after
    the other.

    >>> len(load_source("tinygsm-hard", limit=3))
    3
    >>> source_counts(load_source("tinygsm-easy+tinygsm-hard", limit=5))
    {'tinygsm-easy': 3, 'tinygsm-hard': 2}
    >>> load_source("tinygsm-easy", limit=-5)
    Traceback (most recent call last):
    ...
    ValueError: limit must be None (every problem) or a whole number of 1 or more, got -5
    """
    check_limit(limit)
    if "+" in name:
        shares = source_shares(name, limit or 0)  # also checks the names
        sizes = {part: n for part, n in shares.items() if n} if limit else dict.fromkeys(shares)
        return [r for part, n in sizes.items() for r in load_source(part, split, n, path, seed)]
    check_split(name, split)
    if name == "gsm8k":
        return load_gsm8k(split, path, limit)
    if name == "dapo":
        return load_dapo(path, limit)
    if worlds.find_source(name) is not None:
        return load_world(name, limit or WORLD_DEFAULT_N, split, seed)
    raise ValueError(f"unknown source {name!r}; choose one of {sources()}")


def source_counts(records: Iterable[dict[str, Any]]) -> dict[str, int]:
    """How many records come from each source.

    >>> source_counts([{"source": "a"}, {"source": "b"}, {"source": "a"}])
    {'a': 2, 'b': 1}
    """
    counts: dict[str, int] = {}
    for rec in records:
        counts[rec["source"]] = counts.get(rec["source"], 0) + 1
    return counts

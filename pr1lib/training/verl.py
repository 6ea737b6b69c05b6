"""Graduating to verl: parquet export in verl's row layout, and a reward with verl's signature.

**Export.** ``python -m pr1lib export-verl --source gsm8k --source dapo --coldstart DIR --out OUT``
writes one folder per set, each a ``train.parquet`` (and a ``test.parquet`` where the source has a
test split). Every row has verl's five columns:

| column | value |
|---|---|
| ``data_source`` | ``pr1/<source>``: ``pr1/gsm8k``, ``pr1/dapo``, ``pr1/tinygsm-easy``, … |
| ``prompt`` | chat list ``[{"role": "user", "content": <the paper's v3 prompt around the problem>}]`` |
| ``ability`` | ``"math"`` |
| ``reward_model`` | ``{"style": "rule", "ground_truth": <gold final answer>}`` |
| ``extra_info`` | ``index``, ``id``, ``split``, ``stage``, ``problem``, ``question``, ``answer``, ``reward_mode`` |

``stage`` is ``rl`` or ``sft``; ``problem`` is the raw problem text, ``question`` the user turn
and ``answer`` a target response, so ``extra_info.question``/``extra_info.answer`` are always a
prompt/response pair and verl's SFT trainer reads the cold-start file with
``data.prompt_key=extra_info data.response_key=extra_info ++data.prompt_dict_keys=[question]
++data.response_dict_keys=[answer]`` (it adds the chat template and eos itself). Cold-start rows
also carry ``messages`` (user + assistant turns) for verl's multi-turn SFT dataset. In RL rows
``answer`` is the reference solution (``""`` for DAPO).

**Reward.** ``compute_score(data_source, solution_str, ground_truth, extra_info)`` is verl's
custom-reward signature around the same core as the TRL rewards (``pr1lib.rewards.functions.score``), so a
completion gets the same number in both frameworks. Point verl at this file:
``custom_reward_function.path=$(python -c "import pr1lib.training.verl as v; print(v.__file__)")`` and
``custom_reward_function.name=compute_score`` (recent verl documents both under ``reward.``).

The mode comes from ``reward_kwargs`` (``++custom_reward_function.reward_kwargs.mode=…``), else the
row's ``extra_info.reward_mode``, else ``accuracy``. ``alternating`` needs verl's step counter
in ``extra_info["global_steps"]`` (the official fork's key; ``global_step`` is accepted too). verl
counts from 1, TRL from 0, so verl step s uses ``pr1lib.rewards.functions.mode_at(s - 1)``: tiered on steps
9, 10, 19, 20, … as in the paper. Stock verl does not put the step there; without it the score
raises ``MissingStepError`` instead of quietly training with accuracy only (docs/scaling.md shows
the small reward-manager change that adds it).

>>> compute_score("pr1/gsm8k", "2+3=5\\nFinal Answer: 5", "5", {"reward_mode": "tiered"})
1.0
"""  # noqa: E501 - doctest output / table rows stay whole

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import load_from_disk

from pr1lib import worlds
from pr1lib.config import VERL_REWARDS
from pr1lib.data.sources import load_source
from pr1lib.format.prompts import prompt_text
from pr1lib.rewards.functions import mode_at, score, score_terms, terms
from pr1lib.rewards.modes import REWARD_MODES

SOURCE_PREFIX = "pr1/"
ABILITY = "math"
STEP_KEYS = ("global_steps", "global_step")  # verl's trainer counter, 1 on the first step
COLUMNS = ("data_source", "prompt", "ability", "reward_model", "extra_info")
EXTRA_KEYS = ("index", "id", "split", "stage", "problem", "question", "answer", "reward_mode")


def has_test_split(source: str) -> bool:
    """GSM8K and every world's sources have a held-out test split; DAPO-Math has none.

    >>> has_test_split("gsm8k"), has_test_split("tinygsm-hard"), has_test_split("dapo")
    (True, True, False)
    """
    return source == "gsm8k" or worlds.find_source(source) is not None


class MissingStepError(ValueError):
    """The alternating reward was asked for, but verl did not say which training step it is."""


# ---------------------------------------------------------------- the verl-signature reward
def verl_step(extra_info: Mapping[str, Any] | None) -> int | None:
    """verl's 1-based training step from ``extra_info`` (``global_steps``, else ``global_step``).

    >>> verl_step({"global_steps": 9}), verl_step({"index": 3}), verl_step(None)
    (9, None, None)
    """
    for key in STEP_KEYS:
        value = (extra_info or {}).get(key)
        if value is None:
            continue
        text = str(value).strip()
        whole = not isinstance(value, bool) and (
            text.isdigit() or (isinstance(value, float) and value.is_integer())
        )
        if not whole or int(float(text)) < 1:
            raise ValueError(
                f"extra_info[{key!r}] must be verl's training step, a whole number of 1 or "
                f"more, got {value!r}"
            )
        return int(float(text))
    return None


def resolve_mode(
    extra_info: Mapping[str, Any] | None,
    mode: str | None = None,
    window: int = 10,
    parallel_steps: int = 2,
) -> str:
    """The concrete reward mode (one of ``BASE_MODES``) for one row.

    ``mode`` (from ``reward_kwargs``) wins over ``extra_info["reward_mode"]``; ``alternating``
    becomes ``tiered`` or ``accuracy`` by verl's step.

    >>> (
    ...     resolve_mode({"reward_mode": "alternating", "global_steps": 9}),
    ...     resolve_mode({"global_steps": 11}, "alternating"),
    ... )
    ('tiered', 'accuracy')
    """
    mode = mode or (extra_info or {}).get("reward_mode") or "accuracy"
    if mode not in REWARD_MODES:
        raise ValueError(f"unknown reward mode {mode!r}; choose one of {', '.join(REWARD_MODES)}")
    if not REWARD_MODES[mode].scheduled:
        return mode
    step = verl_step(extra_info)
    if step is None:
        raise MissingStepError(
            "the alternating reward needs verl's training step in extra_info['global_steps'] (the "
            "official Parallel-R1 fork's key; 'global_step' also works). Stock verl does "
            "not pass it: "
            "add it in the reward manager (docs/scaling.md, 'The alternating step'), or set "
            "custom_reward_function.reward_kwargs.mode to accuracy or tiered."
        )
    return mode_at(step - 1, window, parallel_steps)


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping | None = None,
    *,
    mode: str | None = None,
    window: int = 10,
    parallel_steps: int = 2,
    solution_str_with_special_tokens: str | None = None,
    grader: str = "project",
    **_: Any,
) -> float:
    """verl's custom reward: the same number ``pr1lib.rewards.functions`` gives the completion in
    TRL.

    ``solution_str_with_special_tokens`` (passed by the official fork, whose tags are special
    tokens that stock decoding drops) is scored instead of ``solution_str`` when given. ``grader``
    (``reward_kwargs``) is ``pr1lib.rewards.graders``' name; ``data_source`` picks the official
    per-source answer check. Other keyword arguments verl may add are ignored.

    >>> block = (
    ...     "<Parallel><Path>6+6=12</Path><Path>2*6=12</Path></Parallel><Summary>12</Summary>\\n"
    ... )
    >>> [
    ...     compute_score(
    ...         "pr1/dapo",
    ...         block + "Final Answer: 12",
    ...         "12",
    ...         {"global_steps": s},
    ...         mode="alternating",
    ...     )
    ...     for s in (1, 9)
    ... ]
    [1.0, 1.2]
    """
    text = _scored_text(solution_str, solution_str_with_special_tokens)
    return score(
        text,
        ground_truth,
        resolve_mode(extra_info, mode, window, parallel_steps),
        grader,
        data_source,
    )


def _scored_text(solution_str: str, with_special: str | None) -> str:
    return with_special if with_special is not None else solution_str


def compute_score_detailed(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """``compute_score`` as a dict verl logs per key: ``score`` plus ``acc``, ``valid``, ``blocks``
    and ``tiered`` (1.0 when the tiered rule was used), so accuracy stays visible while alternating.

    >>> compute_score_detailed("pr1/gsm8k", "Final Answer: 7", "7", {"reward_mode": "tiered"})
    {'score': 1.0, 'acc': 1.0, 'valid': 1.0, 'blocks': 0, 'tiered': 1.0}
    """
    text = _scored_text(solution_str, kwargs.get("solution_str_with_special_tokens"))
    mode = resolve_mode(
        extra_info, kwargs.get("mode"), kwargs.get("window", 10), kwargs.get("parallel_steps", 2)
    )
    t = terms(text, ground_truth, kwargs.get("grader", "project"), data_source)
    return {
        "score": score_terms(t, mode),
        "acc": float(t.correct),
        "valid": float(t.valid),
        "blocks": t.blocks,
        "tiered": float(mode == "tiered"),
    }


def reward_file() -> str:
    """Absolute path of this module: the value for verl's ``custom_reward_function.path``."""
    return str(Path(__file__).resolve())


# ---------------------------------------------------------------- rows
def chat_prompt(problem: str, style: str = "v3") -> list[dict[str, str]]:
    """The ``prompt`` column: one user turn with the paper's prompt (verl adds the chat template).

    >>> chat_prompt("What is 2+3?", "tiny")
    [{'role': 'user', 'content': 'Problem: What is 2+3?\\nSolution:\\n'}]
    """
    return [{"role": "user", "content": prompt_text(problem, style)}]


def verl_row(
    source: str,
    problem: str,
    ground_truth: Any,
    index: int,
    *,
    split: str = "train",
    stage: str = "rl",
    response: str = "",
    reward_mode: str = "accuracy",
    uid: str = "",
    style: str = "v3",
) -> dict[str, Any]:
    """One row in verl's layout (see the module docstring for every field).

    >>> row = verl_row("gsm8k", "1+1?", "2", 0)
    >>> (
    ...     row["data_source"],
    ...     row["reward_model"],
    ...     row["extra_info"]["question"].endswith("Problem: 1+1?"),
    ... )
    ('pr1/gsm8k', {'style': 'rule', 'ground_truth': '2'}, True)
    """
    prompt = chat_prompt(problem, style)
    extra = {
        "index": int(index),
        "id": uid or f"{source}-{split}-{index:05d}",
        "split": split,
        "stage": stage,
        "problem": problem,
        "question": prompt[0]["content"],
        "answer": response,
        "reward_mode": reward_mode,
    }
    return {
        "data_source": SOURCE_PREFIX + source,
        "prompt": prompt,
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": str(ground_truth)},
        "extra_info": extra,
    }


def rl_rows(
    records: Iterable[Mapping[str, Any]],
    source: str,
    split: str = "train",
    reward_mode: str | None = None,
    style: str = "v3",
) -> list[dict[str, Any]]:
    """verl RL rows from ``pr1lib.data.sources`` records (``id, question, answer_text, answer``).
    Test splits are scored with ``accuracy`` (the paper's validation metric).

    >>> from pr1lib.data.sources import load_world
    >>> rows = rl_rows(load_world("tinygsm-easy", 2), "tinygsm-easy")
    >>> len(rows), rows[0]["extra_info"]["reward_mode"]
    (2, 'alternating')
    """
    mode = "accuracy" if split != "train" else (reward_mode or VERL_REWARDS.get(source, "accuracy"))
    return [
        verl_row(
            source,
            r["question"],
            r["answer"],
            i,
            split=split,
            stage="rl",
            response=r.get("answer_text", ""),
            reward_mode=mode,
            uid=r.get("id", ""),
            style=style,
        )
        for i, r in enumerate(records)
    ]


def sft_rows(dataset: Iterable[Mapping[str, Any]], style: str = "v3") -> list[dict[str, Any]]:
    """verl SFT rows from a cold-start set (``question``, ``completion``, ``answer``, ``source``):
    the prompt is rebuilt in ``style`` whatever style the set was made with."""
    rows = []
    for i, r in enumerate(dataset):
        bad = [c for c in ("question", "completion", "answer") if not isinstance(r.get(c), str)]
        if bad:
            raise ValueError(
                f"cold-start row {i}: {bad[0]!r} must be text, got {r.get(bad[0])!r:.60} "
                "(a damaged or hand-edited set: make it again with `coldstart`)"
            )
        row = verl_row(
            r.get("source") or "coldstart",
            r["question"],
            r["answer"],
            i,
            split="train",
            stage="sft",
            response=r["completion"],
            reward_mode="tiered",
            uid=r.get("id", ""),
            style=style,
        )
        row["messages"] = [*row["prompt"], {"role": "assistant", "content": r["completion"]}]
        rows.append(row)
    return rows


# ---------------------------------------------------------------- files
def write_parquet(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Rows as one parquet file (nested columns become parquet structs and lists)."""
    if not rows:
        raise ValueError(f"no rows to write to {path}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def schema_errors(frame: Any) -> list[str]:
    """What keeps a loaded parquet (a ``pandas.DataFrame``) from being a verl RL/SFT file; ``[]`` if
    ok.

    >>> import pandas as pd
    >>> schema_errors(pd.DataFrame({"prompt": ["hi"]}))[0]
    "missing column 'data_source'"
    """
    errors = [f"missing column {c!r}" for c in COLUMNS if c not in frame.columns]
    if errors:
        return errors
    for i, row in enumerate(frame.to_dict("records")):
        prompt, reward, extra = list(row["prompt"]), row["reward_model"], row["extra_info"]
        if not prompt or prompt[0].get("role") != "user" or not prompt[0].get("content"):
            errors.append(f"row {i}: prompt is not a chat list starting with a user turn")
        if not isinstance(reward, Mapping) or not str(reward.get("ground_truth", "")):
            errors.append(f"row {i}: reward_model.ground_truth is missing")
        if not isinstance(extra, Mapping) or any(k not in extra for k in EXTRA_KEYS):
            errors.append(f"row {i}: extra_info lacks one of {EXTRA_KEYS}")
        elif extra["reward_mode"] not in REWARD_MODES:
            errors.append(f"row {i}: unknown reward_mode {extra['reward_mode']!r}")
    return errors


def source_tables(
    source: str,
    out: str | Path,
    limit: int | None = None,
    reward_mode: str | None = None,
    data_path: str | Path | None = None,
    style: str = "v3",
) -> dict[str, tuple[Path, list[dict[str, Any]]]]:
    """``{"<source>/train": (out/<source>/train.parquet, rows), ...}`` (+ ``test`` when the source
    has one), nothing written yet. TinyGSM exports ``limit`` (default 2,000) problems."""
    tables = {}
    for split in ("train", "test" if has_test_split(source) else None):
        if split is None:
            continue
        records = load_source(source, split, limit, data_path)
        rows = rl_rows(records, source, split, reward_mode, style)
        tables[f"{source}/{split}"] = (Path(out) / source / f"{split}.parquet", rows)
    return tables


def export_source(
    source: str,
    out: str | Path,
    limit: int | None = None,
    reward_mode: str | None = None,
    data_path: str | Path | None = None,
    style: str = "v3",
) -> dict[str, dict[str, Any]]:
    """``out/<source>/train.parquet`` (+ ``test.parquet`` when the source has one); returns
    ``{"<source>/train": {"path", "rows"}, …}``."""
    return write_tables(source_tables(source, out, limit, reward_mode, data_path, style))


def coldstart_table(
    folder: str | Path, out: str | Path, limit: int | None = None, style: str = "v3"
) -> dict[str, tuple[Path, list[dict[str, Any]]]]:
    """The cold-start set saved by ``coldstart`` (``folder`` or ``folder/dataset``) as the rows
    of ``out/coldstart/train.parquet`` for verl's SFT trainer, nothing written yet."""
    folder = Path(folder)
    dataset = load_from_disk(str(folder / "dataset" if (folder / "dataset").is_dir() else folder))
    if limit is not None:
        dataset = dataset.select(range(min(limit, len(dataset))))
    return {
        "coldstart/train": (Path(out) / "coldstart" / "train.parquet", sft_rows(dataset, style))
    }


def export_coldstart(
    folder: str | Path, out: str | Path, limit: int | None = None, style: str = "v3"
) -> dict[str, dict[str, Any]]:
    """``out/coldstart/train.parquet`` from the cold-start set in ``folder``."""
    return write_tables(coldstart_table(folder, out, limit, style))


def write_tables(tables: dict[str, tuple[Path, list[dict[str, Any]]]]) -> dict[str, dict]:
    """Write each table's parquet file; ``{name: {"path", "rows"}}``."""
    return {
        name: {"path": str(write_parquet(rows, path)), "rows": len(rows)}
        for name, (path, rows) in tables.items()
    }


def export_verl(
    out: str | Path,
    sources: Iterable[str] = (),
    coldstart: str | Path | None = None,
    limit: int | None = None,
    reward_mode: str | None = None,
    data_path: str | Path | None = None,
    style: str = "v3",
) -> dict[str, Any]:
    """Every requested set plus the verl config values that go with them (printed by the CLI).
    Every set is read and checked before the first file is written."""
    tables: dict[str, tuple[Path, list[dict[str, Any]]]] = {}
    for source in sources:
        tables.update(source_tables(source, out, limit, reward_mode, data_path, style))
    if coldstart is not None:
        tables.update(coldstart_table(coldstart, out, limit, style))
    if not tables:
        raise ValueError("nothing to export: give --source and/or --coldstart")
    empty = [name for name, (_, rows) in tables.items() if not rows]
    if empty:
        raise ValueError(f"no rows to write for {empty[0]}")
    return {
        "out": str(out),
        "files": write_tables(tables),
        "prompt_style": style,
        "custom_reward_function.path": reward_file(),
        "custom_reward_function.name": "compute_score",
    }


# ---------------------------------------------------------------- command line
if __name__ == "__main__":  # pragma: no cover
    print(json.dumps({"custom_reward_function.path": reward_file()}))

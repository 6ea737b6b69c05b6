"""The rows a cold-start SFT trains on: the cold-start set (saved, or built with the rule
teacher), shaped by the run's config (a share of plain rows; the serial, plan-removed or numbered
trace style), rendered as prompt-completion pairs, and kept beside the run (``save_rows``) so what
was trained can be read back.

>>> from datasets import Dataset
>>> d = Dataset.from_dict({"completion": ["<Parallel><Path>a</Path><Path>b</Path></Parallel>"
...                                       "<Summary>s</Summary> end"]})
>>> with_trace_style(d, "serial")[0]["completion"]
'a\\nb\\ns end'
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from pathlib import Path

from datasets import Dataset, concatenate_datasets, load_from_disk

from pr1lib import worlds
from pr1lib.data.coldstart import run_coldstart, save_dataset
from pr1lib.config import ColdStartConfig, SFTStageConfig
from pr1lib.data.sources import source_shares
from pr1lib.format import plans
from pr1lib.format.grammar import PARALLEL, linearize, number_paths, parse, serialize
from pr1lib.format.prompts import chat_prompt
from pr1lib.config.runtime import is_main_process

ROWS_FILE = "train_rows.jsonl"  # beside a run: the rows it trained on, one JSON object a line


def load_coldstart(data: str | Path | None, cfg: SFTStageConfig, prompt_style: str, work_dir: Path):
    """The first ``cfg.train_n`` rows of the cold-start set saved by notebook 02 / ``coldstart`` (a
    folder, or its ``dataset/``); without one, build them with the rule teacher from
    ``cfg.source``."""
    if data is not None:
        folder = Path(data)
        dataset = load_from_disk(
            str(folder / "dataset" if (folder / "dataset").is_dir() else folder)
        )
        return dataset.select(range(min(cfg.train_n, len(dataset))))
    # Under accelerate, rank 0 builds and saves the set; the other ranks (same launcher, so the
    # same parent pid) wait for its marker and read what it saved.
    marker = work_dir / "coldstart" / f".built-by-{os.getppid()}"
    if is_main_process():
        dataset = build_coldstart(cfg, prompt_style, work_dir / "coldstart")
        marker.write_text("done")
        return dataset
    deadline = time.monotonic() + 1800
    while not marker.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"rank 0 did not build the cold-start set in {work_dir / 'coldstart'}"
            )
        time.sleep(0.5)
    return load_from_disk(str(work_dir / "coldstart" / "dataset"))


def build_coldstart(cfg: SFTStageConfig, prompt_style: str, folder: Path):
    """The rule teacher's cold-start set from each part of ``cfg.source`` (``folder/<part>/`` when
    there are several), shuffled together with ``cfg.seed`` and saved in ``folder/dataset``."""
    # a part a train_n smaller than the parts leaves without rows is left out
    shares = {k: n for k, n in source_shares(cfg.source, cfg.train_n).items() if n}
    config = ColdStartConfig(prompt_style=prompt_style, seed=cfg.seed)
    if len(shares) == 1:
        ((name, n),) = shares.items()
        return run_coldstart(config.replace(source=name, limit=n), folder).dataset
    parts = [
        run_coldstart(config.replace(source=name, limit=n), folder / name).dataset
        for name, n in shares.items()
    ]
    dataset = concatenate_datasets(parts).shuffle(seed=cfg.seed)
    save_dataset(dataset, folder)
    return dataset


def with_plain_share(dataset, share: float, seed: int = 0):
    """``dataset`` with ``round(share * len)`` rows, drawn with ``seed``, turned into plain
    solutions (a world's own ``plain_solution``, else ``format.linearize``); a ``parallel``
    column says which rows kept their block (none is added when ``share`` is 0).

    >>> from datasets import Dataset
    >>> d = Dataset.from_dict({"completion": ["<Parallel><Path>a</Path><Path>b</Path></Parallel>"
    ...                                       "<Summary>s</Summary> end"] * 4})
    >>> with_plain_share(d, 0.5)["parallel"].count(False)
    2
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"plain_share must be within [0, 1], got {share}")
    if share == 0.0:
        return dataset
    chosen = set(random.Random(seed).sample(range(len(dataset)), round(share * len(dataset))))

    def convert(row: dict, index: int) -> dict:
        if index not in chosen:
            return {"completion": row["completion"], "parallel": True}
        found = worlds.find_source(str(row.get("source", "")))
        plain = found[0].plain_solution if found else lambda _, completion: linearize(completion)
        return {"completion": plain(row.get("question", ""), row["completion"]), "parallel": False}

    return dataset.map(convert, with_indices=True, keep_in_memory=True)


def with_trace_style(dataset, style: str = "parallel", path_headers: bool = False):
    """``dataset`` with every row that has a block rewritten: ``style="serial"`` takes its tags
    out (``format.serialize``: the same search as one stream; a world's own ``serial_solution``
    where it has one), ``style="noplan"`` takes out the plan line before its block
    (``format.plans.drop_plans``: the same paths, nothing said before them), ``path_headers``
    numbers its paths (``format.number_paths``); rows without a block, and the default, stay as
    they are.

    >>> from datasets import Dataset
    >>> d = Dataset.from_dict({"completion": ["<Parallel><Path>a</Path><Path>b</Path></Parallel>"
    ...                                       "<Summary>s</Summary> end", "plain end"]})
    >>> list(with_trace_style(d, "serial")["completion"])
    ['a\\nb\\ns end', 'plain end']
    >>> with_trace_style(d, path_headers=True)[0]["completion"]
    '<Parallel><Path>(1) a</Path><Path>(2) b</Path></Parallel><Summary>s</Summary> end'
    """
    if style == "parallel" and not path_headers:
        return dataset

    def shape(row: dict) -> dict:
        text = row["completion"]
        if PARALLEL not in text:
            return {"completion": text}
        text = number_paths(text) if path_headers else text
        if style == "noplan":
            return {"completion": plans.drop_plans(text)}
        return {"completion": serial_form(row, text) if style == "serial" else text}

    return dataset.map(shape, keep_in_memory=True)


def serial_form(row: dict, text: str) -> str:
    """The serial form of a cold-start row's trace ``text``: its world's ``serial_solution`` (a
    world whose serial search stops at its answer), else ``format.serialize``."""
    found = worlds.find_source(str(row.get("source", "")))
    own = found[0].serial_solution if found else None
    return own(row.get("question", ""), text) if own else serialize(text)


def sft_rows(dataset, tokenizer, max_length: int):
    """``(Dataset[prompt, completion], dropped)``: prompts rendered as the model sees them
    (``chat_prompt``), rows longer than ``max_length`` tokens (eos included) dropped, never cut."""
    rows, dropped = {"prompt": [], "completion": []}, 0
    for i, row in enumerate(dataset):
        bad = [c for c in ("question", "completion") if not isinstance(row.get(c), str)]
        if bad:
            raise ValueError(
                f"cold-start row {i}: {bad[0]!r} must be text, got {row.get(bad[0])!r:.60} (a "
                "damaged or hand-edited set: make it again with `coldstart`)"
            )
        prompt = chat_prompt(row["question"], tokenizer, row.get("prompt_style") or "tiny")
        n = len(tokenizer(prompt + row["completion"], add_special_tokens=False)["input_ids"]) + 1
        if n > max_length:
            dropped += 1
            continue
        rows["prompt"].append(prompt)
        rows["completion"].append(row["completion"])
    return Dataset.from_dict(rows), dropped


def rows_widths(completions) -> dict[str, dict[int, int]]:
    """How wide the searches in SFT rows are: ``blocks`` counts the rows' blocks per number of
    paths, ``plans`` their plan lines (``format.plans``) per number of items (a serial arm's
    rows hold plans and no block).

    >>> rows_widths(["Check (A)-(C)\\n<Parallel><Path>a</Path><Path>b</Path><Path>c</Path>"
    ...              "</Parallel>", "Check (A), (B)\\n(A) 1+2=3", "no search"])
    {'blocks': {3: 1}, 'plans': {2: 1, 3: 1}}
    """
    blocks: Counter = Counter()
    planned: Counter = Counter()
    for text in completions:
        blocks.update(len(block.paths) for block in parse(text).blocks)
        found = (plans.plan_items(line) for line in text.splitlines())
        planned.update(len(items) for items in found if items)
    return {"blocks": dict(sorted(blocks.items())), "plans": dict(sorted(planned.items()))}


def save_rows(rows, run_dir: Path) -> Path:
    """Write the prompt-completion rows a run trains on to ``run_dir/train_rows.jsonl`` (what a
    test or a reader checks: a serial arm's rows carry no tag)."""
    path = Path(run_dir) / ROWS_FILE
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps({"prompt": row["prompt"], "completion": row["completion"]}) + "\n")
    return path


def load_rows(run_dir: str | Path) -> list[dict]:
    """The rows ``save_rows`` kept for the run in ``run_dir`` (``[]`` for a run from before)."""
    path = Path(run_dir) / ROWS_FILE
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]

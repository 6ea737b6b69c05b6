"""The paper's published numbers, and our results printed next to them without mixing the two.

``TABLE2`` (main results) and ``TABLE4`` (reward ablation) are data, transcribed from
the paper's Tables 2 and 4 (as in the official README, identical in the paper's
secondary summaries). Every paper number is for **Qwen3-4B-Base** at a 3,000-token budget, 16
samples per problem on AIME/AMC and 1 on "MATH" (a 316-problem integer-answer set). Our numbers
come from other models, budgets and often other benchmarks, so ``side_by_side`` puts them in
separate columns whose names carry the model, the benchmark actually run, k and the checker:
``paper: Qwen3-4B-Base | AIME25 mean@16`` next to ``ours: tiny | tinygsm-hard mean@4 (strict)``.

>>> TABLE2["rl-seen"]["AIME25 mean@16"], TABLE2["base"]["method"]
(19.2, 'Qwen3-4B-Base')
"""

from __future__ import annotations

import math
from typing import Any

PAPER_MODEL = "Qwen3-4B-Base"
SOURCE = (
    "Parallel-R1 (Zheng et al., arXiv 2509.07980); numbers as in the official README "
    "(zhengkid/Parallel-R1); docs/recipe.md#11-results"
)
TABLE2_SOURCE = SOURCE + ", Table 2. Avg = mean of the four mean@ columns."
TABLE4_SOURCE = SOURCE + ", Table 4 (Unseen, from Parallel-SFT-Unseen). 'parallel' Avg computed."
TABLE2_COLUMNS = (
    "parallel %",
    "AIME25 mean@16",
    "AIME25 pass@16",
    "AIME24 mean@16",
    "AIME24 pass@16",
    "AMC23 mean@16",
    "AMC23 pass@16",
    "MATH mean@1",
    "Avg",
)
TABLE4_COLUMNS = (
    "parallel %",
    "AIME25 mean@16",
    "AIME24 mean@16",
    "AMC23 mean@16",
    "MATH mean@1",
    "Avg",
)


def _rows(
    columns: tuple[str, ...], rows: dict[str, tuple[str, tuple[float, ...]]]
) -> dict[str, dict]:
    return {
        key: {"method": name, **dict(zip(columns, values, strict=True))}
        for key, (name, values) in rows.items()
    }


TABLE2 = _rows(
    TABLE2_COLUMNS,
    {  # stage key -> (the paper's row name, numbers in %)
        "base": ("Qwen3-4B-Base", (0.0, 1.3, 10.2, 2.9, 16.5, 8.1, 51.2, 13.9, 6.6)),
        "sft-seen": ("Parallel-SFT-Seen", (95.6, 8.0, 29.8, 10.6, 26.4, 48.9, 79.2, 76.6, 36.0)),
        "sft-unseen": ("Parallel-SFT-Unseen", (95.6, 5.2, 20.9, 8.5, 26.7, 41.7, 80.1, 71.5, 31.7)),
        "grpo": ("GRPO (DAPO)", (0.0, 14.8, 32.4, 18.5, 30.6, 63.6, 85.1, 83.5, 45.1)),
        "grpo-gsm8k": ("+ RL on GSM8K", (0.0, 13.3, 26.3, 18.8, 34.9, 66.4, 82.2, 82.6, 45.3)),
        "rl-seen": ("Parallel-R1-Seen", (27.3, 19.2, 38.9, 19.4, 37.1, 70.5, 85.0, 86.7, 48.9)),
        "rl-unseen-s1": (
            "Parallel-R1-Unseen (S1)",
            (13.6, 17.7, 37.8, 18.3, 33.2, 69.7, 88.9, 82.6, 47.1),
        ),
        "rl-unseen-s2": (
            "Parallel-R1-Unseen (S2)",
            (63.0, 19.0, 42.2, 16.3, 31.8, 67.5, 91.5, 84.5, 46.8),
        ),
    },
)
TABLE4 = _rows(
    TABLE4_COLUMNS,
    {  # reward -> (the paper's row name, numbers in %)
        "accuracy": ("Accuracy only (= Unseen S1)", (13.6, 17.7, 18.3, 69.7, 82.6, 47.1)),
        "parallel": ("Parallel only", (80.3, 17.7, 15.2, 59.4, 81.7, 43.5)),
        "alternating": (
            "Alternating acc./parallel (= Unseen S2)",
            (63.0, 19.0, 16.3, 67.5, 84.5, 46.8),
        ),
    },
)
STAGE_NAMES = {key: row["method"] for key, row in TABLE2.items()} | {"base": "base model"}


def stage_names(world: str | None = None) -> dict[str, str]:
    """Table 2's row names for our checkpoints. In a world the plain GRPO row is no RL on GSM8K:
    it is plain GRPO on the world's easy items, then its hard ones, and its name says so.

    >>> stage_names("tinyworld")["grpo-gsm8k"]
    'plain GRPO, tinyworld easy then hard (paper: + RL on GSM8K)'
    >>> stage_names()["grpo-gsm8k"]
    '+ RL on GSM8K'
    """
    if not world:
        return dict(STAGE_NAMES)
    plain = f"plain GRPO, {world} easy then hard (paper: {STAGE_NAMES['grpo-gsm8k']})"
    return STAGE_NAMES | {"grpo-gsm8k": plain}


def paper_table(which: int = 2):
    """The paper's Table 2 or 4 as a DataFrame; every column is labelled ``paper: Qwen3-4B-Base``.

    >>> paper_table(4).loc["Parallel only", "paper: Qwen3-4B-Base | parallel %"]
    np.float64(80.3)
    """
    import pandas as pd

    table, columns = (TABLE2, TABLE2_COLUMNS) if which == 2 else (TABLE4, TABLE4_COLUMNS)
    rows = [{f"paper: {PAPER_MODEL} | {c}": row[c] for c in columns} for row in table.values()]
    frame = pd.DataFrame(rows, index=[row["method"] for row in table.values()])
    frame.index.name = "method"
    return frame


def _percent(value: float | None) -> float:
    return math.nan if value is None else round(100.0 * value, 1)


def our_columns(results: dict[str, dict[str, Any]], model: str) -> dict[str, float]:
    """One stage's results (``{benchmark: summary}``, summaries from ``pr1lib.evaluation.evaluate``)
    as labelled columns in %: parallel ratio (pooled), mean@k and pass@k per benchmark, Avg of
    mean@k.

    >>> cols = our_columns({"gsm8k": {"accuracy": 0.5, "pass_at_k": 0.75, "parallel_ratio": 0.2,
    ...                               "n": 10, "k": 4, "checker": "strict"}}, "tiny")
    >>> list(cols.items())[1]
    ('ours: tiny | gsm8k mean@4 (strict)', 50.0)
    """
    label = f"ours: {model} |"
    total = sum(s["n"] * s["k"] for s in results.values())
    pooled = (
        sum(s["parallel_ratio"] * s["n"] * s["k"] for s in results.values()) / total
        if total
        else None
    )
    cols = {f"{label} parallel % (all benchmarks)": _percent(pooled)}
    for bench, s in results.items():
        cols[f"{label} {bench} mean@{s['k']} ({s['checker']})"] = _percent(s["accuracy"])
        cols[f"{label} {bench} pass@{s['k']} ({s['checker']})"] = _percent(s["pass_at_k"])
    means = [s["accuracy"] for s in results.values()]
    avg = sum(means) / len(means) if means else None
    cols[f"{label} Avg of mean@k ({', '.join(results)})"] = _percent(avg)
    return cols


def side_by_side(
    ours: dict[str, dict[str, dict[str, Any]]],
    model: str,
    paper: bool = True,
    world: str | None = None,
):
    """Table 2's layout: one row per stage (``TABLE2`` keys, in the paper's order, then any other
    keys of ``ours``), the paper's columns first, then ours, never sharing a column; rows named by
    ``stage_names(world)``.

    >>> t = side_by_side({"sft-seen": {"gsm8k": {"accuracy": 0.5, "pass_at_k": 1.0,
    ...     "parallel_ratio": 1.0, "n": 2, "k": 2, "checker": "robust"}}}, "tiny")
    >>> t.loc["Parallel-SFT-Seen", "ours: tiny | gsm8k mean@2 (robust)"], t.shape
    (np.float64(50.0), (8, 13))
    """
    import pandas as pd

    keys = list(TABLE2) + [key for key in ours if key not in TABLE2]
    rows = []
    for key in keys:
        row = {}
        if paper and key in TABLE2:
            row = {f"paper: {PAPER_MODEL} | {c}": TABLE2[key][c] for c in TABLE2_COLUMNS}
        rows.append(row | (our_columns(ours[key], model) if key in ours else {}))
    names = stage_names(world)
    frame = pd.DataFrame(rows, index=[names.get(key, key) for key in keys])
    frame.index.name = "method"
    return frame


def for_display(frame):
    """A table whose columns read ``"<whose> | <what>"`` (``side_by_side``, ``headline_table``,
    a world's headline) as a notebook shows it: two header rows, whose above what, and the
    columns compared first (ours, then the paper's parallel % and Avg, then its benchmarks), so
    they fit a 1400-px window instead of hiding past its right edge.

    >>> m = dict(accuracy=.5, pass_at_k=1.0, parallel_ratio=1.0, n=2, k=2, checker="strict")
    >>> shown = for_display(side_by_side({"sft-seen": {"gsm8k": m}}, "tiny"))
    >>> [who for who, _ in shown.columns][:5] == ["ours: tiny"] * 4 + ["paper: Qwen3-4B-Base"]
    True
    >>> list(shown.columns[4:6])
    [('paper: Qwen3-4B-Base', 'parallel %'), ('paper: Qwen3-4B-Base', 'Avg')]
    """
    import pandas as pd

    def rank(column: str) -> int:
        whose, what = column.split(" | ", 1)
        return 0 if whose.startswith("ours") else 1 if what in ("parallel %", "Avg") else 2

    columns = sorted(frame.columns, key=rank)  # stable: each group keeps its order
    shown = frame[columns].copy()
    shown.columns = pd.MultiIndex.from_tuples([tuple(c.split(" | ", 1)) for c in columns])
    return shown


def to_markdown(frame, nan: str = "–") -> str:
    """A DataFrame as a GitHub Markdown table (no extra dependency).

    >>> print(to_markdown(paper_table(4).iloc[:1, :2]))
    | method | paper: Qwen3-4B-Base \\| parallel % | paper: Qwen3-4B-Base \\| AIME25 mean@16 |
    |---|---|---|
    | Accuracy only (= Unseen S1) | 13.6 | 17.7 |
    """

    def cell(value: Any) -> str:
        if isinstance(value, float) and math.isnan(value):
            return nan
        return str(value).replace("|", "\\|")

    header = [frame.index.name or ""] + list(frame.columns)
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += [
        "| " + " | ".join(cell(v) for v in [idx, *row]) + " |"
        for idx, row in zip(frame.index, frame.itertuples(index=False))
    ]
    return "\n".join(lines)

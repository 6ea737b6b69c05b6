"""Scoring completions: the one scorer behind every evaluation path, and the paper's estimators.

``completion_metrics(texts, answers)`` is what training logs, the greedy before/after
evaluations and pretraining report: accuracy, parallel ratio, valid ratio. ``score_problem`` and
``summarize`` do the same for a results file of k samples per problem (every grader, pass@k,
blocks, positions, lengths, path overlap). All of them parse a completion the way the rewards do
(``pr1lib.rewards.functions.terms`` and ``pr1lib.format.grammar.parallel_stats``).

Simplifications relative to the paper: lengths and block positions are counted on the sampled
token ids (``Completion`` carries them), on a re-tokenisation of plain-text completions, or in
characters when no tokenizer is given (``length_unit`` says which); path similarity is word-level
Jaccard overlap rather than the paper's BLEU / embedding cosine.

>>> round(pass_at_k(n=4, c=1, k=2), 3)   # 1 - C(3,2)/C(4,2) = 1 - 3/6
0.5
"""

from __future__ import annotations

import random
import re
import statistics
from itertools import combinations
from typing import Any, Callable, Iterable, Sequence

from pr1lib import worlds
from pr1lib.decoding.tokens import has_tags
from pr1lib.evaluation.searchstats import mode_summary, sample_facts
from pr1lib.format.grammar import END_PATH, PARALLEL, PATH, parallel_stats, parse
from pr1lib.rewards.functions import BASE_MODES, completion_text, score_terms, terms
from pr1lib.rewards.graders import GRADERS, check, default_grader, get_grader
from pr1lib.rewards.modes import reward_range


# ----------------------------------------------------------------------------- estimators
def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of ``k`` samples drawn without replacement from ``n`` (of
    which ``c`` are correct) is correct: ``1 - C(n-c, k) / C(n, k)``.

    >>> pass_at_k(16, 0, 16), pass_at_k(16, 1, 16), pass_at_k(10, 5, 1)
    (0.0, 1.0, 0.5)
    """
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    miss = 1.0  # C(n-c, k) / C(n, k) as a product, stable for large n
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def pass_curve(counts: list[tuple[int, int]], k: int) -> dict[int, float]:
    """Mean pass@j over problems for j = 1, 2, 4, ... up to k (and k itself).

    >>> pass_curve([(4, 1), (4, 0)], 4)
    {1: 0.125, 2: 0.25, 4: 0.5}
    """
    js = sorted({j for j in (2**p for p in range(k.bit_length())) if j <= k} | {k})
    return (
        {j: sum(pass_at_k(n, c, j) for n, c in counts) / len(counts) for j in js} if counts else {}
    )


# -------------------------------------------------------------------------- per-sample statistics
_WORD_RE = re.compile(r"\w+|[^\w\s]")


def _grams(text: str) -> set[tuple[str, ...]]:
    words = _WORD_RE.findall(text.lower())
    return {(w,) for w in words} | set(zip(words, words[1:]))


def path_overlap(a: str, b: str) -> float:
    """Jaccard overlap of two paths' word unigrams and bigrams: 1 = same words, 0 = disjoint.

    >>> path_overlap("3 + 4 = 7", "3 + 4 = 7"), path_overlap("add them", "multiply first")
    (1.0, 0.0)
    """
    ga, gb = _grams(a), _grams(b)
    return 1.0 if not (ga or gb) else len(ga & gb) / len(ga | gb)


def sibling_overlap(text: str) -> float | None:
    """Mean ``path_overlap`` over every pair of sibling paths in every block; ``None`` without
    pairs.

    >>> sibling_overlap("<Parallel><Path>a b</Path><Path>a b</Path></Parallel><Summary>s</Summary>")
    1.0
    """
    pairs = [
        (p.text, q.text) for block in parse(text).blocks for p, q in combinations(block.paths, 2)
    ]
    return sum(path_overlap(p, q) for p, q in pairs) / len(pairs) if pairs else None


class Completion(str):
    """A completion's text that also carries its token ids, so lengths need no re-tokenising.

    >>> c = Completion("a<Parallel>", [7, 9]); c == "a<Parallel>", c.token_ids
    (True, (7, 9))
    """

    token_ids: tuple[int, ...] = ()

    def __new__(cls, text: str, token_ids: Iterable[int] = ()):
        obj = super().__new__(cls, text)
        obj.token_ids = tuple(token_ids)
        return obj


def _lengths(text: str, tokenizer: Any = None) -> tuple[int, float | None]:
    """(response length, start of the first ``<Parallel>`` / length): the sampled token ids when
    the text carries them, else a re-tokenisation, else characters (no tokenizer)."""
    ids = getattr(text, "token_ids", ())
    if ids and tokenizer is not None and has_tags(tokenizer):
        tag = tokenizer.convert_tokens_to_ids(PARALLEL)
        return len(ids), (ids.index(tag) / len(ids) if tag in ids else None)
    at = text.find(PARALLEL)
    if tokenizer is None:
        return len(text), (at / len(text) if at >= 0 else None)
    total = len(tokenizer.encode(text, add_special_tokens=False))
    if at < 0 or total == 0:
        return total, None
    return total, len(tokenizer.encode(text[:at], add_special_tokens=False)) / total


# how each rollout mode decodes a block's paths: side by side (the longest one sets the pace)
PARALLEL_DECODING = ("forked", "reread")


def parallel_saving(text: str, tokenizer: Any = None) -> int:
    """Decode steps a block's paths save when they are decoded side by side: per block, the sum of
    its paths' lengths minus the longest (tags included; tokens with a tokenizer, else chars).

    >>> parallel_saving("a<Parallel><Path>xyz</Path><Path>x</Path></Parallel><Summary>s</Summary>")
    14
    """
    response = parse(text)
    if not response.valid:
        return 0
    saving = 0
    for block in response.blocks:
        paths = [f"{PATH}{p.text}{END_PATH}" for p in block.paths]
        sizes = [_size(p, tokenizer) for p in paths]
        saving += sum(sizes) - max(sizes, default=0)
    return saving


def _size(text: str, tokenizer: Any = None) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False)) if tokenizer else len(text)


def sample_stats(text: str, tokenizer: Any = None, mode: str = "seen") -> dict[str, Any]:
    """Structure statistics of one completion (lengths in tokens with a tokenizer, else chars).
    ``sequential_steps`` is what decoding it took one after another in rollout ``mode``: every
    token in one causal stream (``seen``), the longest path of each block in place of all of them
    where paths decode side by side (``forked``, ``reread``).

    >>> block = "ab<Parallel><Path>x y</Path><Path>x z</Path></Parallel><Summary>s</Summary>"
    >>> s = sample_stats(block)
    >>> s["blocks"], s["valid"], round(s["first_block_position"], 3), round(s["path_overlap"], 2)
    (1, True, 0.027, 0.2)
    >>> s["length"], s["sequential_steps"], sample_stats(block, mode="forked")["sequential_steps"]
    (75, 75, 59)
    """
    stats = parallel_stats(text)
    length, first = _lengths(text, tokenizer)
    saving = parallel_saving(text, tokenizer) if mode in PARALLEL_DECODING else 0
    return {
        "blocks": stats["blocks"],
        "valid": stats["valid"],
        "valid_official": stats["valid_official"],
        "has_answer": stats["has_answer"],
        "length": length,
        "sequential_steps": length - saving,
        "first_block_position": first,
        "paths_per_block": stats["paths_per_block"],
        "path_overlap": sibling_overlap(text),
    }


def score_problem(
    record: dict,
    completions: list[str],
    benchmark: str,
    tokenizer: Any = None,
    mode: str = "seen",
) -> dict:
    """One results-file row: the problem, its completions (decoded in rollout ``mode``), both
    verdicts and statistics.

    >>> row = score_problem({"id": "q1", "question": "1+1?", "answer": "2"},
    ...                     ["Final Answer: 2", "\\\\boxed{2}"], "gsm8k")
    >>> row["correct_official"], row["correct_project"]
    ([True, False], [True, True])
    """
    samples = [
        {
            "text": text,
            **check(benchmark, text, record["answer"], record["question"]),
            **sample_stats(text, tokenizer, mode),
            **sample_facts(benchmark, record["question"], text),
        }
        for text in completions
    ]
    return {
        "id": record["id"],
        "question": record["question"],
        "answer": record["answer"],
        "k": len(samples),
        "length_unit": "tokens" if tokenizer is not None else "chars",
        **{f"correct_{name}": [s.pop(name) for s in samples] for name in GRADERS},
        "samples": samples,
    }


# ----------------------------------------------------------------------------- aggregation
_OLD_ROW_KEYS = {"official": "correct_strict", "project": "correct_robust"}  # files before graders


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [float(v) for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _correct(row: dict, grader: str) -> list[bool]:
    return row.get(f"correct_{grader}", row.get(_OLD_ROW_KEYS.get(grader, ""), []))


def _grader_columns(rows: list[dict], k: int) -> dict[str, Any]:
    """``accuracy_<grader>``, ``pass_at_k_<grader>`` and ``pass_curve_<grader>`` for every
    grader."""
    out: dict[str, Any] = {}
    for name in GRADERS:
        counts = [(row["k"], sum(_correct(row, name))) for row in rows]
        out[f"accuracy_{name}"] = _mean(c / n for n, c in counts)
        out[f"pass_at_k_{name}"] = _mean(pass_at_k(n, c, k) for n, c in counts) if k else None
        out[f"pass_curve_{name}"] = pass_curve(counts, k) if k else {}
    return out


def summarize(rows: list[dict], grader: str | None = None) -> dict[str, Any]:
    """The headline numbers over results rows; ``accuracy``/``pass_at_k`` use ``grader``
    (``None``: ``pr1lib.config.DEFAULT_GRADERS["eval"]``, the official one).

    Keys: ``accuracy`` (mean@k), ``pass_at_k`` (unbiased, k = samples per problem), ``grader``
    (which one fills them; ``checker`` repeats it for older readers), the same per grader
    (``*_official``: the official reward code's answer check; ``*_project``: this project's,
    which also reads a lone ``\\boxed{}``) plus ``pass_curve_*`` (pass@1, 2, 4, ... k), the
    ``ratios`` (parallel, strictly valid, valid with a block) and ``valid_official_ratio``,
    ``answer_rate``, ``blocks_per_response``, ``first_block_position`` (mean over samples with
    a block), ``mean_length`` in ``length_unit``, ``path_overlap`` / ``path_diversity``
    (sibling paths; ``None`` without blocks), ``n``, ``k``; where the benchmark's world reads
    them (``pr1lib.evaluation.searchstats``), ``answer_modes``, ``split_rate`` and ``n_blocks``.

    >>> rows = [score_problem({"id": i, "question": "", "answer": "2"}, t, "gsm8k")
    ...         for i, t in enumerate([["Final Answer: 2", "Final Answer: 3"], ["no", "no"]])]
    >>> s = summarize(rows)
    >>> s["accuracy"], s["pass_at_k"], s["n"], s["k"], s["parallel_ratio"], s["grader"]
    (0.25, 0.5, 2, 2, 0.0, 'official')
    """
    grader = get_grader(grader or default_grader("eval")).name
    samples = [s for row in rows for s in row["samples"]]
    k = min((row["k"] for row in rows), default=0)
    out = _grader_columns(rows, k)
    overlap = _mean(s["path_overlap"] for s in samples)
    return {
        "accuracy": out[f"accuracy_{grader}"],
        "pass_at_k": out[f"pass_at_k_{grader}"],
        **(ratios(samples) if samples else dict.fromkeys(RATIOS)),
        "n": len(rows),
        "k": k,
        "grader": grader,
        "checker": grader,
        **out,
        "valid_official_ratio": _mean(s["valid_official"] for s in samples),
        "answer_rate": _mean(s["has_answer"] for s in samples),
        "blocks_per_response": _mean(s["blocks"] for s in samples),
        "first_block_position": _mean(s["first_block_position"] for s in samples),
        "mean_length": _mean(s["length"] for s in samples),
        "mean_sequential_steps": _mean(s.get("sequential_steps") for s in samples),
        "accuracy_at_steps": accuracy_at_steps(rows, grader),
        "length_unit": rows[0]["length_unit"] if rows else None,
        "path_overlap": overlap,
        "path_diversity": None if overlap is None else 1.0 - overlap,
        "per_problem": per_problem(rows, grader),
        **mode_summary(rows, grader),
    }


STEP_CAPS = (16, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384)  # the curve's sequential budgets


def accuracy_at_steps(
    rows: list[dict], grader: str, caps: Sequence[int] = STEP_CAPS
) -> dict[int, float]:
    """Accuracy when decoding stops after ``cap`` sequential steps: a sample counts only if it is
    correct and its ``sequential_steps`` fit the cap (one that is cut off gives no answer). Rows
    from before the statistic was kept give ``{}``.

    >>> row = {"k": 2, "correct_official": [True, True],
    ...        "samples": [{"sequential_steps": 10}, {"sequential_steps": 40}]}
    >>> accuracy_at_steps([row], "official", caps=(16, 64))
    {16: 0.5, 64: 1.0}
    """
    pairs = [
        (ok, sample.get("sequential_steps"))
        for row in rows
        for ok, sample in zip(_correct(row, grader), row["samples"])
    ]
    if not pairs or any(steps is None for _, steps in pairs):
        return {}
    return {cap: sum(ok and steps <= cap for ok, steps in pairs) / len(pairs) for cap in caps}


def per_problem(rows: list[dict], grader: str) -> dict[str, list[float]]:
    """Each problem's share of samples that are correct (under ``grader``) and that open a block:
    what a bootstrap over problems resamples (``paired_bootstrap``).

    >>> per_problem([{"k": 2, "correct_official": [True, False],
    ...               "samples": [{"blocks": 1}, {"blocks": 0}]}], "official")
    {'accuracy': [0.5], 'parallel': [0.5]}
    """
    return {
        "accuracy": [round(sum(_correct(r, grader)) / r["k"], 4) for r in rows],
        "parallel": [round(sum(s["blocks"] > 0 for s in r["samples"]) / r["k"], 4) for r in rows],
    }


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], n_boot: int = 2000, seed: int = 0
) -> dict[str, float]:
    """Mean of ``a - b`` over problems measured both ways (``a``: the treatment, ``b``: the
    control), with a 95 % interval from resampling problems with replacement, each keeping both of
    its numbers (``n_boot`` times, percentile method). The one bootstrap every study uses.

    >>> d = paired_bootstrap([0.6, 0.7, 0.5, 0.6], [0.1, 0.2, 0.1, 0.0])
    >>> round(d["diff"], 3), d["low"] > 0
    (0.5, True)
    """
    if len(a) != len(b) or not a:
        raise ValueError(f"need the same problems both ways, got {len(a)} and {len(b)}")
    diffs = [x - y for x, y in zip(a, b)]
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(n_boot))
    return {
        "diff": statistics.fmean(diffs),
        "low": means[int(0.025 * n_boot)],
        "high": means[int(0.975 * n_boot) - 1],
    }


def mean_interval(values: Sequence[float], n_boot: int = 2000, seed: int = 0) -> dict[str, float]:
    """Mean of per-problem ``values`` with the same 95 % bootstrap interval over problems.

    >>> d = mean_interval([0.5, 0.5, 0.5])
    >>> d["mean"], d["low"], d["high"]
    (0.5, 0.5, 0.5)
    """
    d = paired_bootstrap(values, [0.0] * len(values), n_boot, seed)
    return {"mean": d["diff"], "low": d["low"], "high": d["high"]}


BOOTSTRAP = "paired bootstrap over problems, 2000 resamples, percentile 95% interval"


# ----------------------------------------------------------------------------- the scorer
RATIOS = ("parallel_ratio", "valid_ratio", "valid_block_rate")


def ratios(samples: Sequence[Any]) -> dict[str, float]:
    """Shares over per-sample facts (``rewards.Terms`` or ``sample_stats`` dicts): at least one
    ``<Parallel>`` (valid or not), strictly valid, and strictly valid with a block.

    >>> ratios([{"blocks": 1, "valid": True}, {"blocks": 0, "valid": False}])
    {'parallel_ratio': 0.5, 'valid_ratio': 0.5, 'valid_block_rate': 0.5}
    """
    facts = [s if isinstance(s, dict) else {"blocks": s.blocks, "valid": s.valid} for s in samples]
    n = max(len(facts), 1)
    return {
        "parallel_ratio": sum(f["blocks"] > 0 for f in facts) / n,
        "valid_ratio": sum(bool(f["valid"]) for f in facts) / n,
        "valid_block_rate": sum(bool(f["valid"]) and f["blocks"] > 0 for f in facts) / n,
    }


def completion_metrics(texts: Sequence[Any], answers: Sequence[Any]) -> dict[str, float]:
    """Accuracy, parallel ratio, valid ratio and valid-block rate of completions against their
    gold answers, parsed exactly as the rewards parse them.

    >>> m = completion_metrics(
    ...     [
    ...         "<Parallel><Path>1</Path><Path>1</Path></Parallel>\\n"
    ...         "<Summary>1</Summary>\\nFinal Answer: 1",
    ...         "Final Answer: 3",
    ...     ],
    ...     ["1", "2"],
    ... )
    >>> m["accuracy"], m["parallel_ratio"], m["valid_ratio"], m["n"]
    (0.5, 0.5, 1.0, 2)
    """
    parsed = [terms(t, a) for t, a in zip(texts, answers)]
    n = max(len(parsed), 1)
    return {"accuracy": sum(t.correct for t in parsed) / n, **ratios(parsed), "n": len(parsed)}


# ----------------------------------------------------------------------------- what training logs
def batch_metrics(
    completions: Sequence[Any],
    answer: Sequence[Any],
    grader: str = "project",
    sources: Sequence[Any] | None = None,
    questions: Sequence[Any] | None = None,
) -> dict[str, float]:
    """What the dashboard plots for one batch, parsed exactly as the rewards parse it (same
    grader; ``sources``: each completion's data source, for the official grader; with
    ``questions`` too, the blocks' shares where their world reads them: ``block_shape``).

    >>> block = "<Parallel><Path>a</Path><Path>b</Path></Parallel>\\n<Summary>s</Summary>\\n"
    >>> m = batch_metrics([block + "Final Answer: 2", "Final Answer: 3"], ["2", "2"])
    >>> m["accuracy"], m["parallel_ratio"], m["valid_ratio"], m["term/tiered"]
    (0.5, 0.5, 1.0, 0.1)
    """
    sources, questions = sources or [None] * len(answer), questions or [None] * len(answer)
    rows = zip(completions, answer, sources, questions)
    parsed = [terms(c, a, grader, src, q) for c, a, src, q in rows]
    n = max(len(parsed), 1)
    out = {
        "accuracy": sum(t.correct for t in parsed) / n,
        **{k: v for k, v in ratios(parsed).items() if k != "valid_block_rate"},
    }
    texts = [completion_text(c) for c in completions]
    stats = [parallel_stats(text) for text in texts]
    positions = [
        st["first_block_position"] for st in stats if st["first_block_position"] is not None
    ]
    if positions:
        out["block_position"] = statistics.fmean(positions)
    for mode in BASE_MODES:
        out[f"term/{mode}"] = round(sum(score_terms(t, mode) for t in parsed) / n, 6)
    widths = [st["paths_per_block"] for st in stats]
    return out | block_shape(texts, widths, questions, sources)


def block_shape(
    texts: Sequence[str],
    widths: Sequence[list[int]],
    questions: Sequence[Any],
    sources: Sequence[Any],
) -> dict[str, float]:
    """Where the problems' world reads its blocks' shares (``World.block_splits``: WideWorld,
    PlanWorld), how wide the blocks are (``mean_paths``, from each text's ``widths``: paths per
    block, as ``parallel_stats`` counts them) and the share whose paths took distinct, correct
    shares (``split_rate``); ``{}`` elsewhere (a TinyWorld block is always two paths wide) and for
    a batch without blocks.

    >>> q = "Deals of one pen and one bag: (A) 4 and 9, (B) 6 and 8. Al pays 14 coins for one deal."
    >>> b = "<Parallel><Path>(B) 6+8=14</Path><Path>(C) 1+2=3</Path></Parallel>"
    >>> block_shape([b], [[2]], [q], ["wideworld-hard"]), block_shape([b], [[2]], [q], [None])
    ({'mean_paths': 2.0, 'split_rate': 0.0}, {})
    """
    paths, splits = [], []
    for text, width, question, source in zip(texts, widths, questions, sources):
        found = worlds.find_source(str(source)) if question and source else None
        if found is not None and found[0].block_splits is not None:
            paths += width
            splits += found[0].block_splits(str(question), text)
    out = {"mean_paths": statistics.fmean(paths)} if paths else {}
    return out | ({"split_rate": statistics.fmean(splits)} if splits else {})


class Tracked:
    """A TRL reward function that scores with ``reward`` and logs ``batch_metrics`` (under the
    same grader) via TRL's ``log_metric``."""

    def __init__(self, reward: Callable, grader: str = "project") -> None:
        self.reward, self.grader = reward, grader
        self.__name__ = getattr(reward, "__name__", "reward")  # TRL's column: rewards/<name>/mean
        self.reward_range = getattr(reward, "reward_range", None)

    def range_at(self, global_step: int = 0):
        return reward_range(self.reward, global_step)

    def __call__(
        self, completions: list, answer: list, log_metric: Callable | None = None, **kwargs: Any
    ) -> list:
        if log_metric is not None:
            sources = kwargs.get("data_source")
            sources = (
                sources if isinstance(sources, list) and len(sources) == len(completions) else None
            )
            questions = kwargs.get("question")
            questions = questions if sources is not None and isinstance(questions, list) else None
            metrics = batch_metrics(completions, answer, self.grader, sources, questions)
            for name, value in metrics.items():
                log_metric(name, value)
        return self.reward(completions=completions, answer=answer, log_metric=log_metric, **kwargs)

"""Evaluation paths: a model's k samples per problem (``run_eval``, the ``eval`` command) and the
greedy before/after evaluation of the training stages (``evaluate_policy``), on one runner.

The runner sends each problem's prompt to a *generate function*, a small protocol that any
sampler fits: ``generate_fn(prompts: list[str], num_samples: int) -> list[list[str]]`` returns,
for every prompt, ``num_samples`` completion texts with the tags left in
(``pr1lib.evaluation.samplers``: the training rollout engine, or plain ``model.generate``).

Every problem becomes one line of a JSONL results file (one file per model x benchmark x mode):
its k completions, every grader's verdict (``pr1lib.rewards.graders.GRADERS``) and
per-sample statistics.
A rerun skips the problems already there, so an interrupted evaluation resumes; a torn last line
(a crash mid-write) is dropped. ``pr1lib.evaluation.metrics.summarize`` turns the rows into the
numbers the paper reports: mean@k, pass@k (the unbiased estimator, not a bootstrap), the parallel
ratio, tag validity, blocks per response, where the first block starts, lengths and path overlap.

>>> results_path("runs/eval", "tiny-base", "gsm8k", "seen").name
'tiny-base__gsm8k__seen.jsonl'
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any, Callable

from tqdm.auto import tqdm

from pr1lib import worlds
from pr1lib.config import (
    EVAL_SETS,
    EvalConfig,
    ModelConfig,
    RolloutConfig,
)
from pr1lib.config.checks import local_folder
from pr1lib.config.runtime import profile_threads, set_seed, set_threads
from pr1lib.data.evalsets import load_benchmark
from pr1lib.decoding.models import checkpoint_folder, load_policy
from pr1lib.decoding.tokens import add_parallel_tags, has_tags
from pr1lib.evaluation.metrics import score_problem, summarize
from pr1lib.evaluation.samplers import GenerateFn, make_generate_fn
from pr1lib.format.prompts import chat_prompt
from pr1lib.rewards.graders import default_grader, get_grader
from pr1lib.store.jsonl import JsonlLog, read_json
from pr1lib.store.modelfiles import model_hash


# ----------------------------------------------------------------------------- results file
def result_key(row: dict) -> str:
    """A results row's key, its problem id, after checking it is one: an ``id`` and a whole
    ``k`` (a ``KeyError`` or ``TypeError`` otherwise, which ``ResultsFile`` names by file and
    line).

    >>> result_key({"id": 3, "k": 1})
    '3'
    """
    if not isinstance(row["k"], int) or isinstance(row["k"], bool):
        raise TypeError(f"k must be a whole number, got {row['k']!r}")
    return str(row["id"])


class ResultsFile(JsonlLog):
    """An append-only JSONL file with one row per problem id; a torn last line is dropped.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "r.jsonl")
    >>> ResultsFile(path).append({"id": "a", "k": 2})
    >>> _ = open(path, "a").write('{"id": "b", "k"')  # a crash in the middle of a line
    >>> rf = ResultsFile(path); sorted(rf.rows), rf.dropped
    (['a'], 1)
    """

    def __init__(self, path: str | Path):
        super().__init__(path, key=result_key)

    def append(self, row: dict) -> None:
        """Write one row as a whole line, flushed and fsync'd."""
        super().append([row])

    def rows_for(self, records: list[dict]) -> tuple[dict[str, dict], int]:
        """The rows kept for ``records`` (by id) and how many were left out because they were
        made for another problem under the same id (question or answer differ): the results
        are keyed by the evaluation set's content, not only its ids."""
        by_id = {str(r["id"]): r for r in records}
        kept, stale = {}, 0
        for key, row in self.rows.items():
            record = by_id.get(key)
            same = record is None or all(
                f not in row or row[f] == record.get(f) for f in ("question", "answer")
            )
            if same:
                kept[key] = row
            else:
                stale += 1
        return kept, stale


def model_tag(name: str) -> str:
    """A file-name-safe tag for a model folder or hub id; a local folder's also carries the hash
    of its content (``pr1lib.store.modelfiles.model_hash``), so another model at the same path never
    reads these results.

    >>> model_tag("Qwen/Qwen3-4B-Base"), model_tag("runs/no-such-run/final/")
    ('Qwen3-4B-Base', 'no-such-run-final')
    >>> model_tag("data/tiny-base")[:10], len(model_tag("data/tiny-base"))
    ('tiny-base-', 26)
    """
    parts = [p for p in Path(str(name)).parts if p not in ("/", ".", "..")]
    keep = parts[-2:] if len(parts) >= 3 else parts[-1:]  # org/name -> name; a/run/ckpt -> run-ckpt
    tag = re.sub(r"[^A-Za-z0-9._-]+", "-", "-".join(keep)).strip("-") or "model"
    folder = local_folder(checkpoint_folder(name))
    return f"{tag}-{model_hash(folder)}" if folder and (folder / "config.json").is_file() else tag


def results_path(out_dir: str | Path, tag: str, benchmark: str, mode: str) -> Path:
    """``out_dir/<tag>__<benchmark>__<mode>.jsonl``.

    >>> results_path("runs/eval", "tiny-base", "gsm8k", "seen").name
    'tiny-base__gsm8k__seen.jsonl'
    """
    return Path(out_dir) / f"{tag}__{benchmark}__{mode}.jsonl"


# ----------------------------------------------------------------------------- runner
def evaluate_records(
    records: list[dict],
    generate_fn: GenerateFn,
    k: int,
    benchmark: str,
    prompt_fn: Callable[[str], str],
    path: str | Path | None = None,
    batch_size: int = 16,
    tokenizer: Any = None,
    progress: bool = True,
    mode: str = "seen",
    seed: int | None = None,
) -> list[dict]:
    """Rows for ``records`` (same order): k samples each (decoded in rollout ``mode``), generated
    only for problems not yet in the results file at ``path``; each new row is appended as soon
    as its batch is done. With ``seed``, batches are cut from ``records`` at fixed places and each
    is sampled with its own seed, so a resumed run makes the rows an uninterrupted one makes."""
    store = ResultsFile(path) if path is not None else None
    if store is not None and store.dropped:
        print(store.note(), file=sys.stderr, flush=True)  # never silent: those rows are redone
    rows, stale_rows = store.rows_for(records) if store else ({}, 0)
    if stale_rows:
        print(
            f"note: {path}: {stale_rows} row(s) were made for other problems under the same ids: "
            "made again",
            file=sys.stderr,
            flush=True,
        )
    stale = sorted({row["k"] for row in rows.values()} - {k})
    if stale:
        raise ValueError(
            f"{path} holds rows with k={stale}, not {k}; use another --out or delete it"
        )
    todo = [r for r in records if str(r["id"]) not in rows]
    bar = tqdm(
        total=len(records), initial=len(records) - len(todo), desc=benchmark, disable=not progress
    )
    for start, batch in _batches(records if seed is not None else todo, rows, batch_size):
        if seed is not None:  # this batch's own draw, however the run went
            set_seed(drawn := (seed * 1_000_003 + start) % 2**32)
            getattr(generate_fn, "reseed", lambda _: None)(drawn)
        outputs = generate_fn([prompt_fn(r["question"]) for r in batch], k)
        if len(outputs) != len(batch) or any(len(o) != k for o in outputs):
            raise ValueError(
                f"generate_fn must return {k} completions for each of {len(batch)} prompts"
            )
        for record, completions in zip(batch, outputs):
            if str(record["id"]) in rows:  # made before an interruption: the same row again
                continue
            row = score_problem(record, completions, benchmark, tokenizer, mode)
            rows[str(record["id"])] = row
            if store is not None:
                store.append(row)
            bar.update(1)
    bar.close()
    return [rows[str(r["id"])] for r in records]


def _batches(records: list[dict], done: dict, size: int):
    """``(start, batch)`` of ``records`` cut every ``size``, but batches done already."""
    for start in range(0, len(records), size):
        batch = records[start : start + size]
        if any(str(r["id"]) not in done for r in batch):
            yield start, batch


_RESUMABLE_FIELDS = ("n", "batch_size", "grader", "engine")  # may change between runs of one file


def save_run_config(cfg: EvalConfig, path: Path) -> None:
    """Save ``cfg`` next to its results; refuse when an earlier run sampled them differently.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "r.config.json"
    >>> save_run_config(EvalConfig(n=4), p)
    >>> save_run_config(EvalConfig(n=8), p)  # more problems: fine
    >>> save_run_config(EvalConfig(temperature=0.5), p)
    Traceback (most recent call last):
    ...
    ValueError: ... was written with temperature=1.0, not 0.5; use another --out or delete it
    """
    if path.exists():
        old = read_json(path, "use another --out, or move it away")
        for key, value in cfg.to_dict().items():
            if key not in _RESUMABLE_FIELDS and key in old and old[key] != value:
                raise ValueError(
                    f"{path.with_suffix('').with_suffix('.jsonl')} was written with "
                    f"{key}={old[key]}, not {value}; use another --out or delete it"
                )
    cfg.save(path)


def _prompt_style(cfg: EvalConfig) -> str:
    return cfg.prompt_style or ModelConfig.for_profile(cfg.profile).prompt_style


def run_eval(
    model: Any,
    tokenizer: Any,
    benchmark: str | None = None,
    k: int | None = None,
    mode: str | None = None,
    config: EvalConfig | None = None,
    out_dir: str | Path | None = None,
    tag: str = "model",
    generate_fn: GenerateFn | None = None,
    progress: bool = True,
) -> dict:
    """Evaluate ``model`` on a benchmark: k samples per problem, results file under ``out_dir``
    (none when ``None``), and the ``summarize`` numbers plus ``model``/``benchmark``/``mode``."""
    given = {"benchmark": benchmark, "k": k, "mode": mode}
    cfg = (config or EvalConfig()).replace(**{key: v for key, v in given.items() if v is not None})
    get_grader(cfg.grader or default_grader("eval"))  # an unknown grader fails before any sampling
    records = load_benchmark(cfg.benchmark, cfg.n, seed=cfg.seed)
    cache = {"fn": generate_fn} if generate_fn is not None else {}

    def sample(prompts: list[str], num_samples: int) -> list[list[str]]:  # built on first use only
        if "fn" not in cache:
            cache["fn"] = make_generate_fn(model, tokenizer, cfg)
        return cache["fn"](prompts, num_samples)

    if generate_fn is None:  # a batch's own seed reaches the engine's generator too (resume)
        sample.reseed = lambda seed: cache.update(  # type: ignore[attr-defined]
            fn=make_generate_fn(model, tokenizer, cfg.replace(seed=seed))
        )

    path = results_path(out_dir, tag, cfg.benchmark, cfg.mode) if out_dir is not None else None
    recorded = cfg.replace(prompt_style=_prompt_style(cfg))  # what the results were made with
    if path is not None:
        ResultsFile(path)  # a row that is not a results row: named before anything is written
        save_run_config(recorded, path.with_suffix(".config.json"))
    set_seed(cfg.seed)
    set_threads(profile_threads(cfg.profile))  # tiny: profiles.TINY_THREADS
    start = time.perf_counter()
    rows = evaluate_records(
        records,
        sample,
        cfg.k,
        cfg.benchmark,
        _prompter(tokenizer, cfg),
        path,
        cfg.batch_size,
        tokenizer,
        progress,
        cfg.mode,
        seed=cfg.seed,
    )
    return {
        "model": tag,
        "benchmark": cfg.benchmark,
        "mode": cfg.mode,
        **summarize(rows, cfg.grader),
        "seconds": round(time.perf_counter() - start, 1),  # wall time (a cached row costs none)
        "results": str(path) if path is not None else None,
        "config": recorded.to_dict(),
    }


def _prompter(tokenizer: Any, cfg: EvalConfig) -> Callable[[str], str]:
    style = _prompt_style(cfg)
    return lambda question: chat_prompt(question, tokenizer, style)  # the training prompt


# ----------------------------------------------------------------------------- stage evaluations
def held_out_set(profile: str, tier: str, source: str | None = None) -> str:
    """The held-out evaluation set of ``tier``: a world's own (``pr1lib.worlds``: its test split
    is the held-out set) when training reads one of its sources, else the profile's (``EVAL_SETS``).

    >>> held_out_set("tiny", "hard"), held_out_set("tiny", "hard", "tinyworld-easy+tinyworld-hard")
    ('tinygsm-hard', 'tinyworld-hard')
    """
    for part in (source or "").split("+"):
        found = worlds.find_source(part.strip())
        if found is not None:
            return found[0].source(tier)
    return EVAL_SETS[profile][tier]


def held_out_config(
    profile: str,
    tier: str,
    n: int,
    mode: str,
    max_new_tokens: int,
    k: int = 4,
    seed: int = 0,
    prompt_style: str | None = None,
    source: str | None = None,
    path_headers: bool = False,
    layout: dict[str, Any] | None = None,
) -> EvalConfig:
    """The training stages' held-out evaluation: the first ``n`` problems of the ``tier`` set
    (``held_out_set``: the profile's, or TinyWorld's when training read ``source`` from it),
    ``k`` samples each at T = 1 (the paper's protocol), in rollout ``mode`` (numbered paths when
    the model was trained with them); its blocks laid out as the world lays them out, or as
    ``layout`` says (``worlds.LAYOUT`` names: the blocks an RL stage trains with).

    >>> c = held_out_config("tiny", "hard", 8, "forked", 64, k=4); c.benchmark, c.k, c.temperature
    ('tinygsm-hard', 4, 1.0)
    """
    path_cap = RolloutConfig.for_profile(profile).max_path_length
    benchmark = held_out_set(profile, tier, source)
    found = worlds.find_source(benchmark)
    layout = {**(found[0].layout() if found else {}), **(layout or {})}  # as it trains them
    return EvalConfig.for_profile(
        profile,
        benchmark=benchmark,
        n=n,
        k=k,
        mode=mode,
        temperature=1.0,
        max_completion_length=max_new_tokens,
        max_path_length=min(path_cap, max_new_tokens),
        batch_size=32,
        engine="rollout",
        seed=seed,
        prompt_style=prompt_style,
        **{**layout, "path_headers": path_headers or layout.get("path_headers", False)},
    )


def sample_rows(model: Any, tokenizer: Any, cfg: EvalConfig) -> list[dict]:
    """The results rows of a model in memory on ``cfg``, nothing written: per problem its ``k``
    completions (``row["samples"]``) and every grader's verdicts; ``summarize`` gives the numbers.

    >>> from pr1lib.decoding.models import build_random_tiny
    >>> model, tok = build_random_tiny(seed=0)
    >>> cfg = EvalConfig(benchmark="tinyworld-hard", n=2, k=3, max_completion_length=4)
    >>> rows = sample_rows(model, tok, cfg)
    >>> len(rows), [len(r["samples"]) for r in rows], model.training
    (2, [3, 3], True)
    """
    records = load_benchmark(cfg.benchmark, cfg.n, seed=cfg.seed)
    was_training = model.training
    model.eval()
    try:
        return evaluate_records(
            records,
            make_generate_fn(model, tokenizer, cfg),
            cfg.k,
            cfg.benchmark,
            _prompter(tokenizer, cfg),
            None,
            cfg.batch_size,
            tokenizer,
            progress=False,
            mode=cfg.mode,
        )
    finally:
        model.train(was_training)


def evaluate_policy(model: Any, tokenizer: Any, cfg: EvalConfig) -> tuple[dict, list[dict]]:
    """``(metrics, samples)`` of a model in memory on ``cfg``: the ``summarize`` numbers, and per
    problem its question, first completion and gold answer."""
    rows = sample_rows(model, tokenizer, cfg)
    samples = [
        {"question": r["question"], "completion": r["samples"][0]["text"], "gold": r["answer"]}
        for r in rows
    ]
    return summarize(rows, cfg.grader), samples


GREEDY_KEYS = ("accuracy", "parallel_ratio", "valid_ratio", "valid_block_rate", "mean_length", "n")


def evaluate_stage(model: Any, tokenizer: Any, cfg: EvalConfig) -> tuple[dict, list[dict]]:
    """The one evaluation protocol of every stage: ``cfg.k`` samples per problem at T = 1
    (``accuracy`` is mean@k, with pass@k, the parallel ratio, validity, lengths), and greedy
    decoding of the same problems as a labelled second column (``greedy``). The samples returned
    are the greedy ones (what a reader compares before and after)."""
    sampled, _ = evaluate_policy(model, tokenizer, cfg)
    greedy, samples = evaluate_policy(model, tokenizer, cfg.replace(k=1, temperature=0.0))
    return {**sampled, "greedy": {key: greedy[key] for key in GREEDY_KEYS}}, samples


def load_for_eval(source: str | Path, profile: str, say: Callable[..., None] = print):
    """``(model, tokenizer)`` of a checkpoint in eval mode: a run folder's ``merged/``, a model
    folder, a hub id or the profile's model; the tags are added (rows initialised, nothing
    trained) when its tokenizer lacks them, as for the paper's base-model row."""
    mcfg = ModelConfig.for_profile(profile)
    if str(source) != mcfg.name:
        mcfg = mcfg.replace(name=checkpoint_folder(source), random_init=False)
    model, tokenizer, _ = load_policy(config=mcfg)
    if not has_tags(tokenizer):
        say(
            "the tokenizer lacks the parallel tags: adding them "
            "(pr1lib.decoding.tokens.add_parallel_tags)"
        )
        add_parallel_tags(tokenizer, model)
    return model.eval(), tokenizer

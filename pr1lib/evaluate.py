"""Evaluation: metrics, a resumable results file, the runner and the ``eval`` command.

The runner sends each problem's prompt to a *generate function*, a small protocol that any
sampler fits: ``generate_fn(prompts: list[str], num_samples: int) -> list[list[str]]`` returns,
for every prompt, ``num_samples`` completion texts with the tags left in. ``make_generate_fn``
builds one from a model: the training rollout engine (``pr1lib.rollout``, ``seen`` or ``forked``)
when the tokenizer has the tags, else plain ``model.generate`` (``hf_generate_fn``, ``seen`` only).

Every problem becomes one line of a JSONL results file (one file per model x benchmark x mode):
its k completions, both graders' verdicts (``pr1lib.graders``: official, project) and per-sample statistics.
A rerun skips the problems already there, so an interrupted evaluation resumes; a torn last line
(a crash mid-write) is dropped. ``summarize`` turns the rows into the numbers the paper reports:
mean@k, pass@k (the unbiased estimator, not a bootstrap), the parallel ratio, tag validity, blocks
per response, where the first block starts, response length and how alike sibling paths are.

Simplifications relative to the paper: lengths and block positions are counted on the sampled
token ids (both adapters return ``Completion`` strings that carry them), on a re-tokenisation of
plain-text completions, or in characters when no tokenizer is given (``length_unit`` says which);
path similarity is word-level Jaccard overlap rather than the paper's BLEU / embedding cosine.

>>> round(pass_at_k(n=4, c=1, k=2), 3)   # 1 - C(3,2)/C(4,2) = 1 - 3/6
0.5
"""

from __future__ import annotations

import json
import re
import sys
from itertools import combinations
from pathlib import Path
from typing import Any, Callable, Iterable

from pr1lib.benchmarks import BENCHMARKS, load_benchmark
from pr1lib.config import EvalConfig, ModelConfig, check_profile, runs_dir, set_seed
from pr1lib.format import PARALLEL, parse, parallel_stats
from pr1lib.graders import GRADERS, check, default_grader, get_grader
from pr1lib.jsonl import JsonlLog

GenerateFn = Callable[[list[str], int], list[list[str]]]
MODES = ("seen", "forked")


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
    js = sorted({j for j in (2 ** p for p in range(k.bit_length())) if j <= k} | {k})
    return {j: sum(pass_at_k(n, c, j) for n, c in counts) / len(counts) for j in js} if counts else {}


# ----------------------------------------------------------------------------- per-sample statistics
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
    """Mean ``path_overlap`` over every pair of sibling paths in every block; ``None`` without pairs.

    >>> sibling_overlap("<Parallel><Path>a b</Path><Path>a b</Path></Parallel><Summary>s</Summary>")
    1.0
    """
    pairs = [(p.text, q.text) for block in parse(text).blocks for p, q in combinations(block.paths, 2)]
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


def sample_stats(text: str, tokenizer: Any = None) -> dict[str, Any]:
    """Structure statistics of one completion (lengths in tokens with a tokenizer, else chars).

    >>> s = sample_stats("ab<Parallel><Path>x y</Path><Path>x z</Path></Parallel><Summary>s</Summary>")
    >>> s["blocks"], s["valid"], round(s["first_block_position"], 3), round(s["path_overlap"], 2)
    (1, True, 0.027, 0.2)
    """
    stats = parallel_stats(text)
    length, first = _lengths(text, tokenizer)
    return {"blocks": stats["blocks"], "valid": stats["valid"], "valid_official": stats["valid_official"],
            "has_answer": stats["has_answer"], "length": length, "first_block_position": first,
            "path_overlap": sibling_overlap(text)}


def score_problem(record: dict, completions: list[str], benchmark: str, tokenizer: Any = None) -> dict:
    """One results-file row: the problem, its completions, both graders' verdicts and statistics.

    >>> row = score_problem({"id": "q1", "question": "1+1?", "answer": "2"},
    ...                     ["Final Answer: 2", "\\\\boxed{2}"], "gsm8k")
    >>> row["correct_official"], row["correct_project"]
    ([True, False], [True, True])
    """
    samples = [{"text": text, **check(benchmark, text, record["answer"]), **sample_stats(text, tokenizer)}
               for text in completions]
    return {"id": record["id"], "question": record["question"], "answer": record["answer"],
            "k": len(samples), "length_unit": "tokens" if tokenizer is not None else "chars",
            **{f"correct_{name}": [s.pop(name) for s in samples] for name in GRADERS}, "samples": samples}


# ----------------------------------------------------------------------------- aggregation
_OLD_ROW_KEYS = {"official": "correct_strict", "project": "correct_robust"}  # results files before graders


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [float(v) for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _grader_columns(rows: list[dict], k: int) -> dict[str, Any]:
    """``accuracy_<grader>``, ``pass_at_k_<grader>`` and ``pass_curve_<grader>`` for every grader."""
    out: dict[str, Any] = {}
    for name in GRADERS:
        counts = [(row["k"], sum(row.get(f"correct_{name}", row.get(_OLD_ROW_KEYS[name], [])))) for row in rows]
        out[f"accuracy_{name}"] = _mean(c / n for n, c in counts)
        out[f"pass_at_k_{name}"] = _mean(pass_at_k(n, c, k) for n, c in counts) if k else None
        out[f"pass_curve_{name}"] = pass_curve(counts, k) if k else {}
    return out


def summarize(rows: list[dict], grader: str | None = None) -> dict[str, Any]:
    """The headline numbers over results rows; ``accuracy``/``pass_at_k`` use ``grader``
    (``None``: ``pr1lib.config.DEFAULT_GRADERS["eval"]``, the official one).

    Keys: ``accuracy`` (mean@k), ``pass_at_k`` (unbiased, k = samples per problem), ``grader``
    (which one fills them; ``checker`` repeats it for older readers), the same per grader
    (``*_official``: the official reward code's answer check; ``*_project``: this project's, which
    also reads a lone ``\\boxed{}``) plus ``pass_curve_*`` (pass@1, 2, 4, ... k),
    ``parallel_ratio`` (share of samples with >= 1 ``<Parallel>``), ``valid_ratio`` (strict
    grammar) and ``valid_official_ratio``, ``answer_rate``, ``blocks_per_response``,
    ``first_block_position`` (mean over samples with a block), ``mean_length`` in ``length_unit``,
    ``path_overlap`` / ``path_diversity`` (sibling paths; ``None`` without blocks), ``n``, ``k``.

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
        "accuracy": out[f"accuracy_{grader}"], "pass_at_k": out[f"pass_at_k_{grader}"],
        "parallel_ratio": _mean(s["blocks"] > 0 for s in samples),
        "valid_ratio": _mean(s["valid"] for s in samples),
        "n": len(rows), "k": k, "grader": grader, "checker": grader, **out,
        "valid_official_ratio": _mean(s["valid_official"] for s in samples),
        "answer_rate": _mean(s["has_answer"] for s in samples),
        "blocks_per_response": _mean(s["blocks"] for s in samples),
        "first_block_position": _mean(s["first_block_position"] for s in samples),
        "mean_length": _mean(s["length"] for s in samples),
        "length_unit": rows[0]["length_unit"] if rows else None,
        "path_overlap": overlap, "path_diversity": None if overlap is None else 1.0 - overlap,
    }


# ----------------------------------------------------------------------------- results file
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
        super().__init__(path, key=lambda r: str(r["id"]))

    def append(self, row: dict) -> None:
        """Write one row as a whole line, flushed and fsync'd."""
        super().append([row])


def model_tag(name: str) -> str:
    """A file-name-safe tag for a model folder or hub id.

    >>> model_tag("Qwen/Qwen3-4B-Base"), model_tag("runs/sft-seen/final/"), model_tag("data/tiny-base")
    ('Qwen3-4B-Base', 'sft-seen-final', 'tiny-base')
    """
    parts = [p for p in Path(str(name)).parts if p not in ("/", ".", "..")]
    keep = parts[-2:] if len(parts) >= 3 else parts[-1:]  # org/name -> name; a/run/ckpt -> run-ckpt
    return re.sub(r"[^A-Za-z0-9._-]+", "-", "-".join(keep)).strip("-") or "model"


def results_path(out_dir: str | Path, tag: str, benchmark: str, mode: str) -> Path:
    """``out_dir/<tag>__<benchmark>__<mode>.jsonl``.

    >>> results_path("runs/eval", "tiny-base", "gsm8k", "seen").name
    'tiny-base__gsm8k__seen.jsonl'
    """
    return Path(out_dir) / f"{tag}__{benchmark}__{mode}.jsonl"


# ----------------------------------------------------------------------------- runner
def evaluate_records(records: list[dict], generate_fn: GenerateFn, k: int, benchmark: str,
                     prompt_fn: Callable[[str], str], path: str | Path | None = None,
                     batch_size: int = 16, tokenizer: Any = None, progress: bool = True) -> list[dict]:
    """Rows for ``records`` (same order): k samples each, generated only for problems not yet in
    the results file at ``path``; each new row is appended as soon as its batch is done."""
    from tqdm.auto import tqdm

    store = ResultsFile(path) if path is not None else None
    rows = dict(store.rows) if store else {}
    stale = sorted({row["k"] for row in rows.values()} - {k})
    if stale:
        raise ValueError(f"{path} holds rows with k={stale}, not {k}; use another --out or delete it")
    todo = [r for r in records if str(r["id"]) not in rows]
    bar = tqdm(total=len(records), initial=len(records) - len(todo), desc=benchmark, disable=not progress)
    for start in range(0, len(todo), batch_size):
        batch = todo[start:start + batch_size]
        outputs = generate_fn([prompt_fn(r["question"]) for r in batch], k)
        if len(outputs) != len(batch) or any(len(o) != k for o in outputs):
            raise ValueError(f"generate_fn must return {k} completions for each of {len(batch)} prompts")
        for record, completions in zip(batch, outputs):
            row = score_problem(record, completions, benchmark, tokenizer)
            rows[str(record["id"])] = row
            if store is not None:
                store.append(row)
        bar.update(len(batch))
    bar.close()
    return [rows[str(r["id"])] for r in records]


# ----------------------------------------------------------------------------- generate functions
def decode_completion(ids: list[int], tokenizer: Any) -> str:
    """Completion ids -> text with the tags kept: cut at the first eos, drop pad, keep the rest
    (a ``Completion``: the text plus the ids it was decoded from).

    >>> class Tok:
    ...     eos_token_id, pad_token_id = 0, 0
    ...     def decode(self, ids, skip_special_tokens=False): return "|".join(map(str, ids))
    >>> decode_completion([5, 6, 0, 0], Tok())
    '5|6'
    """
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    eos_ids = set(eos) if isinstance(eos, (list, tuple)) else {eos}
    cut = next((i for i, t in enumerate(ids) if t in eos_ids), len(ids))
    kept = [t for t in ids[:cut] if t != pad]
    return Completion(tokenizer.decode(kept, skip_special_tokens=False), kept)


def hf_generate_fn(model: Any, tokenizer: Any, max_new_tokens: int, temperature: float = 1.0,
                   top_p: float = 1.0) -> GenerateFn:
    """A ``GenerateFn`` over plain ``model.generate``: one causal stream per sample (``seen``)."""
    import torch

    def generate(prompts: list[str], num_samples: int) -> list[list[str]]:
        enc = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left").to(model.device)
        with torch.no_grad():
            out = model.generate(**enc, do_sample=True, temperature=temperature, top_p=top_p, top_k=0,
                                 max_new_tokens=max_new_tokens, num_return_sequences=num_samples,
                                 pad_token_id=tokenizer.pad_token_id)  # (B * num_samples, L + T)
        texts = [decode_completion(row, tokenizer) for row in out[:, enc["input_ids"].shape[1]:].tolist()]
        return [texts[i * num_samples:(i + 1) * num_samples] for i in range(len(prompts))]

    return generate


def rollout_generate_fn(model: Any, tokenizer: Any, cfg: EvalConfig) -> GenerateFn:
    """A ``GenerateFn`` over ``pr1lib.rollout.generate`` (the training engine) in ``cfg.mode``."""
    from pr1lib.config import RolloutConfig
    from pr1lib.rollout import generate as rollout

    rcfg = RolloutConfig(mode=cfg.mode, num_paths=cfg.num_paths, max_blocks=cfg.max_blocks,
                         max_completion_length=cfg.max_completion_length,
                         max_path_length=cfg.max_path_length, temperature=cfg.temperature, top_p=cfg.top_p)

    def generate(prompts: list[str], num_samples: int) -> list[list[str]]:
        repeated = [p for p in prompts for _ in range(num_samples)]  # k rows per prompt
        drop = {tokenizer.eos_token_id, tokenizer.pad_token_id}  # as the engine's own decoding
        texts = [Completion(r.text, [t for t in r.completion_ids if t not in drop])
                 for r in rollout(model, tokenizer, repeated, rcfg)]
        return [texts[i * num_samples:(i + 1) * num_samples] for i in range(len(prompts))]

    return generate


def has_tags(tokenizer: Any) -> bool:
    """True when every parallel tag is a single token of ``tokenizer`` (the engine needs that)."""
    from pr1lib.format import TAGS

    ids = [tokenizer.convert_tokens_to_ids(tag) for tag in TAGS]
    return all(i is not None and i != getattr(tokenizer, "unk_token_id", None) for i in ids)


def make_generate_fn(model: Any, tokenizer: Any, cfg: EvalConfig) -> GenerateFn:
    """``cfg.engine``: ``rollout`` (both modes), ``generate`` (plain ``model.generate``, ``seen``
    only) or ``auto`` = rollout when the tokenizer has the tags, else generate."""
    if cfg.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {cfg.mode!r}")
    engine = cfg.engine if cfg.engine != "auto" else ("rollout" if has_tags(tokenizer) else "generate")
    if engine == "rollout":
        return rollout_generate_fn(model, tokenizer, cfg)
    if engine != "generate":
        raise ValueError(f"engine must be auto, rollout or generate, got {cfg.engine!r}")
    if cfg.mode == "forked":
        raise ValueError("forked mode needs the rollout engine, and this tokenizer lacks the parallel "
                         "tags (add them with pr1lib.tokens.add_parallel_tags), or engine='generate' "
                         "was asked; use --mode seen for plain model.generate")
    return hf_generate_fn(model, tokenizer, cfg.max_completion_length, cfg.temperature, cfg.top_p)


_RESUMABLE_FIELDS = ("n", "batch_size", "grader", "engine")  # may change between runs of one file


def save_run_config(cfg: EvalConfig, path: Path) -> None:
    """Save ``cfg`` next to its results; refuse when an earlier run sampled them differently.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "r.config.json"
    >>> save_run_config(EvalConfig(n=4), p); save_run_config(EvalConfig(n=8), p)  # more problems: fine
    >>> save_run_config(EvalConfig(temperature=0.5), p)
    Traceback (most recent call last):
    ...
    ValueError: ... was written with temperature=1.0, not 0.5; use another --out or delete it
    """
    if path.exists():
        old = json.loads(path.read_text())
        for key, value in cfg.to_dict().items():
            if key not in _RESUMABLE_FIELDS and key in old and old[key] != value:
                raise ValueError(f"{path.with_suffix('').with_suffix('.jsonl')} was written with "
                                 f"{key}={old[key]}, not {value}; use another --out or delete it")
    cfg.save(path)


def run_eval(model: Any, tokenizer: Any, benchmark: str | None = None, k: int | None = None,
             mode: str | None = None, config: EvalConfig | None = None, out_dir: str | Path | None = None,
             tag: str = "model", generate_fn: GenerateFn | None = None, progress: bool = True) -> dict:
    """Evaluate ``model`` on a benchmark: k samples per problem, results file under ``out_dir``
    (none when ``None``), and the ``summarize`` numbers plus ``model``/``benchmark``/``mode``."""
    from pr1lib.prompts import chat_prompt

    given = {"benchmark": benchmark, "k": k, "mode": mode}
    cfg = (config or EvalConfig()).replace(**{key: v for key, v in given.items() if v is not None})
    get_grader(cfg.grader or default_grader("eval"))  # an unknown grader fails before any sampling
    style = cfg.prompt_style or ModelConfig.for_profile(None).prompt_style
    records = load_benchmark(cfg.benchmark, cfg.n, seed=cfg.seed)
    cache = {"fn": generate_fn} if generate_fn is not None else {}

    def sample(prompts: list[str], num_samples: int) -> list[list[str]]:  # built on first use only
        if "fn" not in cache:
            cache["fn"] = make_generate_fn(model, tokenizer, cfg)
        return cache["fn"](prompts, num_samples)

    path = results_path(out_dir, tag, cfg.benchmark, cfg.mode) if out_dir is not None else None
    if path is not None:
        save_run_config(cfg.replace(prompt_style=style), path.with_suffix(".config.json"))
    set_seed(cfg.seed)
    prompt_fn = lambda q: chat_prompt(q, tokenizer, style)  # noqa: E731 - the training prompt
    rows = evaluate_records(records, sample, cfg.k, cfg.benchmark, prompt_fn, path, cfg.batch_size,
                            tokenizer, progress)
    return {"model": tag, "benchmark": cfg.benchmark, "mode": cfg.mode, **summarize(rows, cfg.grader),
            "results": str(path) if path is not None else None}


# ----------------------------------------------------------------------------- command line
def cli_register(subparsers: Any) -> None:
    """``python -m pr1lib eval``: mean@k / pass@k and structure metrics of one model on one benchmark."""
    from pr1lib.cli import add_common

    p = subparsers.add_parser("eval", help="evaluate a model: mean@k, pass@k, parallel ratio, validity",
                              description="Sample k completions per problem and score them with the "
                                          "official grader and this project's (both reported); resumable.")
    p.add_argument("--model", default=None, help="folder or hub id (default: the profile's model)")
    p.add_argument("--data", choices=list(BENCHMARKS), default=None, help="benchmark (default: config's)")
    p.add_argument("--n", type=int, default=None, help="first N problems (0: all)")
    p.add_argument("--k", type=int, default=None, help="samples per problem")
    p.add_argument("--mode", choices=MODES, default=None, help="seen (causal) or forked (engine)")
    p.add_argument("--json", action="store_true", help="print only the final JSON line")
    add_common(p)
    p.set_defaults(func=_cli_eval)


def _cli_eval(args: Any) -> int:
    from pr1lib.cli import print_json

    try:
        result = _cli_run(args)
    except (ValueError, OSError) as err:  # missing data or model, a refused resume, a bad mode
        print(f"eval: error: {err}", file=sys.stderr)
        return 2
    print_json(result)
    return 0


def _cli_run(args: Any) -> dict:
    from pr1lib.analytics import checkpoint_folder, write_eval_outputs
    from pr1lib.cli import parse_overrides
    from pr1lib.models import load_policy
    from pr1lib.tokens import add_parallel_tags

    profile = check_profile(args.profile)
    flags = {"benchmark": args.data, "n": args.n, "k": args.k, "mode": args.mode, "seed": args.seed}
    overrides = {**parse_overrides(args.overrides), **{key: v for key, v in flags.items() if v is not None}}
    if overrides.get("n") == 0:
        overrides["n"] = None
    mcfg = ModelConfig.for_profile(profile)
    if args.model:  # a run folder means its merged/ model
        mcfg = mcfg.replace(name=checkpoint_folder(args.model), random_init=False)
    cfg = EvalConfig.for_profile(profile, **overrides)
    cfg = cfg.replace(prompt_style=cfg.prompt_style or mcfg.prompt_style)
    say = (lambda *a, **kw: None) if args.json else print
    say(f"profile={profile} model={mcfg.name}\n{cfg}", flush=True)
    model, tokenizer, _ = load_policy(config=mcfg)
    if not has_tags(tokenizer):  # as the paper's base row: the tags added, rows initialised
        say("the tokenizer lacks the parallel tags: adding them (pr1lib.tokens.add_parallel_tags)")
        add_parallel_tags(tokenizer, model)
    model.eval()
    out = Path(args.out) if args.out else runs_dir() / "eval"
    result = run_eval(model, tokenizer, config=cfg, out_dir=out, tag=model_tag(args.model or mcfg.name),
                      progress=not args.json)
    return {**result, **write_eval_outputs(result, out, run_dir=args.model)}  # + table (.md), plots (.html)

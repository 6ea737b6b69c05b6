"""Speed of the rollout engine and of unseen training, tiny model on CPU; prints one JSON object.

    .venv/bin/python benchmarks/rollout.py [--repeats 5] [--path-len 48] [--threads 1] [--quick]
    .venv/bin/python -m pr1lib bench rollout        # the same, through the CLI

Measured (medians over ``--repeats``; the machine is shared and noisy, so ratios matter more
than seconds):

- ``forked``: one prompt whose model is steered (a fixed logit bias on its output layer) to open
  ``<Parallel>`` at once and to never close a path early, so every path has exactly
  ``--path-len`` tokens. Forked decoding of k = 2, 4, 8 paths versus one path
  (``forked_over_single_path``, target <= 1.5 at k = 4) and versus decoding the k paths one after
  another (``speedup_vs_sequential``).
- ``summary_reprefill_tokens``: path tokens a re-prefill summary (the official vLLM loop) runs
  through the model again at k = 4, next to ``summary_merge_reprocessed_tokens``, the count this
  engine's KV merge re-processes (measured from the tokens it fed).
- ``reread_over_forked``: seconds of a ``reread`` rollout (the paper's Seen engine: paths forked,
  then re-read causally for the summary) over a ``forked`` one on the same batch and lengths
  (8 prompts, one block of 2 paths of ``--path-len`` tokens, a summary of as many; > 1 = slower),
  with both tokens/s and ``reread_tokens_per_block`` (paths 2..k: (k - 1) x ``--path-len``).
- ``seen_engine_over_generate``: tokens/s of ``seen`` mode over ``model.generate`` on the same
  model, batch and lengths (sampling, eos suppressed so every row runs to the end).
- ``unseen_train_over_seen``: mask build + forward + backward at batch 8 x 512 tokens, unseen
  versus the plain causal forward (also versus a 4D causal ``seen`` mask).

The model is ``data/tiny-base`` when it exists, else a random model of the same shape
(``model_source`` says which); the tags are added with ``pr1lib.decoding.tokens.add_parallel_tags``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Callable

import torch

from pr1lib.config import RolloutConfig
from pr1lib.config.arguments import Parser, count
from pr1lib.config.checks import MAX_THREADS, MAX_TOKENS
from pr1lib.config.runtime import quiet_known_noise
from pr1lib.decoding.rollout import generate
from pr1lib.decoding.steering import steer_logits
from pr1lib.decoding.structure import attention_inputs, tag_ids
from pr1lib.store.paths import REPO_ROOT

PROMPT = "Question: Tom has 3 apples and buys 5 more. How many apples does he have?\nAnswer:"


def load_model() -> tuple[Any, Any, str]:
    """``(model, tokenizer, source)``: the shipped tiny model if present, else a random one of its
    shape."""
    from pr1lib.decoding.models import TINY_MODEL_DIR, build_random_tiny
    from pr1lib.decoding.tokens import add_parallel_tags

    folder = REPO_ROOT / TINY_MODEL_DIR
    if (folder / "config.json").exists():
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(folder))
        model, source = (
            AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32),
            TINY_MODEL_DIR,
        )
    else:
        model, tok = build_random_tiny(seed=0)
        source = "random (tiny-base shape)"
    add_parallel_tags(tok, model)
    return model.eval(), tok, source


def medians(fns: dict[Any, Callable[[], Any]], repeats: int) -> dict[Any, tuple[float, Any]]:
    """Median seconds (and the last result) of each function; the repeats are interleaved
    round-robin so that load from other processes hits every variant alike."""
    outs = {name: fn() for name, fn in fns.items()}  # warm-up
    times: dict[Any, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            outs[name] = fn()
            times[name].append(time.perf_counter() - start)
    return {name: (statistics.median(times[name]), outs[name]) for name in fns}


def bench_forked(model: Any, tok: Any, n: int, repeats: int) -> dict[str, Any]:
    """Forked k paths of exactly ``n`` tokens each, versus one path, from the same prompt."""
    t = tag_ids(tok)
    undo = steer_logits(
        model, {t.parallel: 30.0, t.end_path: -30.0, tok.eos_token_id: -30.0, t.end_summary: -30.0}
    )
    tail = 2 + len(tok.encode("\n", add_special_tokens=False))  # </Parallel> \n <Summary>
    prompt = [tok.encode(PROMPT, add_special_tokens=False)]
    stats: dict[int, dict[str, int]] = {k: {} for k in (1, 2, 4, 8)}

    def one(k: int) -> Callable[[], Any]:
        cfg = RolloutConfig(
            num_paths=k, max_blocks=1, max_path_length=n, max_completion_length=1 + k * n + tail
        )
        return lambda: generate(
            model,
            tok,
            prompt,
            cfg,
            stats=stats[k],
            generator=torch.Generator(device=model.device).manual_seed(0),
        )[0]

    try:
        timed = medians({k: one(k) for k in stats}, repeats)
    finally:
        undo()
    out: dict[int, dict[str, Any]] = {}
    for k, (sec, r) in timed.items():
        assert r.path_lengths == [[n] * k], r.path_lengths  # equal lengths, as intended
        fed_once = len(r.prompt_ids) + len(r.completion_ids) - 1  # the last token is never fed
        out[k] = {
            "seconds": sec,
            "reprocessed": stats[k]["fed_tokens"] - fed_once,
            "path_tokens": k * n,
        }
    single = out[1]["seconds"]
    return {
        "path_len": n,
        "single_path_s": round(single, 4),
        "forked": {
            str(k): {
                "seconds": round(v["seconds"], 4),
                "over_single_path": round(v["seconds"] / single, 3),
                "speedup_vs_sequential": round(k * single / v["seconds"], 3),
            }
            for k, v in out.items()
            if k > 1
        },
        "forked_over_single_path": round(out[4]["seconds"] / single, 3),
        "summary_reprefill_tokens": out[4]["path_tokens"],
        "summary_merge_reprocessed_tokens": out[4]["reprocessed"],
    }


def bench_reread(
    model: Any, tok: Any, batch: int, n: int, repeats: int, k: int = 2
) -> dict[str, Any]:
    """``reread`` versus ``forked``: ``batch`` prompts, one block of k paths of exactly ``n`` tokens
    each, then a summary that never closes, up to the same completion length in both modes."""
    t = tag_ids(tok)
    never = {t.end_path: -30.0, tok.eos_token_id: -30.0, t.end_summary: -30.0}
    undo = steer_logits(model, {t.parallel: 30.0, **never})
    tail = 2 + len(tok.encode("\n", add_special_tokens=False))  # </Parallel> \n <Summary>
    length = 1 + k * n + tail + n  # the summary has n tokens too
    prompts = [
        tok.encode(f"Question {i}: " + PROMPT[: 30 + 7 * i], add_special_tokens=False)
        for i in range(batch)
    ]
    cfg = RolloutConfig(num_paths=k, max_blocks=1, max_path_length=n, max_completion_length=length)
    stats: dict[str, dict[str, int]] = {"forked": {}, "reread": {}}

    def one(mode: str) -> Callable[[], Any]:
        gen = torch.Generator(device=model.device)
        return lambda: generate(
            model, tok, prompts, cfg, stats=stats[mode], mode=mode, generator=gen.manual_seed(0)
        )

    try:
        timed = medians({mode: one(mode) for mode in stats}, repeats)
    finally:
        undo()
    for _, rs in timed.values():
        assert all(r.path_lengths == [[n] * k] and len(r.completion_ids) == length for r in rs)
    tokens, (forked_s, _), (reread_s, _) = batch * length, timed["forked"], timed["reread"]
    per_block = stats["reread"]["reprefill_tokens"] / batch
    assert per_block == (k - 1) * n, per_block
    extra = stats["reread"]["fed_tokens"] - stats["forked"]["fed_tokens"]  # the re-read tokens
    return {
        "batch": batch,
        "num_paths": k,
        "path_len": n,
        "summary_len": n,
        "completion_len": length,
        "forked_tokens_per_s": round(tokens / forked_s, 1),
        "reread_tokens_per_s": round(tokens / reread_s, 1),
        "reread_over_forked": round(reread_s / forked_s, 3),
        "reread_tokens_per_block": per_block,
        "reread_extra_fed_tokens": extra,
    }


def bench_seen(model: Any, tok: Any, batch: int, n: int, repeats: int) -> dict[str, Any]:
    """Engine ``seen`` mode versus ``model.generate``: same prompts, sampling, exactly ``n`` new
    tokens each."""
    undo = steer_logits(model, {tok.eos_token_id: -30.0})
    prompts = [
        tok.encode(f"Question {i}: " + PROMPT[: 30 + 7 * i], add_special_tokens=False)
        for i in range(batch)
    ]
    width = max(len(p) for p in prompts)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    # (B, W) left-padded for generate
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])  # (B, W)
    cfg = RolloutConfig(mode="seen", max_completion_length=n, max_blocks=10**6)
    fns = {
        "engine": lambda: generate(
            model, tok, prompts, cfg, generator=torch.Generator(device=model.device).manual_seed(0)
        ),
        "generate": lambda: model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=True,
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            max_new_tokens=n,
            min_new_tokens=n,
            pad_token_id=pad,
        ),
    }
    try:
        timed = medians(fns, repeats)
    finally:
        undo()
    (engine_s, rs), (hf_s, out) = timed["engine"], timed["generate"]
    assert all(len(r.completion_ids) == n for r in rs) and out.shape[1] == width + n
    tokens = batch * n
    return {
        "batch": batch,
        "new_tokens": n,
        "engine_tokens_per_s": round(tokens / engine_s, 1),
        "generate_tokens_per_s": round(tokens / hf_s, 1),
        "seen_engine_over_generate": round(hf_s / engine_s, 3),
    }


def parallel_batch(
    tok: Any, batch: int, length: int, seed: int = 0
) -> tuple[torch.Tensor, list[int]]:
    """Random token sequences with two blocks of two paths each in the response."""
    t, g = tag_ids(tok), torch.Generator().manual_seed(seed)
    vocab = min(t[:6])  # ordinary tokens only (the tags were added last)
    prompt_len, p = 64, (length - 64) // 8
    rows = []
    for _ in range(batch):
        text = lambda m: torch.randint(1, vocab, (m,), generator=g).tolist()  # noqa: E731
        paths = [t.path, *text(p - 2), t.end_path, t.path, *text(p - 2), t.end_path]
        block = [t.parallel, *paths, t.end_parallel, t.summary]
        body = text(prompt_len) + text(p) + block + text(p) + block
        rows.append((body + text(length))[:length])
    return torch.tensor(rows), [prompt_len] * batch


def bench_train(model: Any, tok: Any, batch: int, length: int, repeats: int) -> dict[str, Any]:
    """Mask build + forward + backward: unseen versus plain causal (and versus a 4D seen mask)."""
    ids, starts = parallel_batch(tok, batch, length)
    model.train()

    def step(mode: str | None) -> None:
        extra = (
            attention_inputs(ids, tok, mode, starts)
            if mode
            else {"attention_mask": torch.ones_like(ids)}
        )
        model(input_ids=ids, labels=ids, use_cache=False, **extra).loss.backward()
        model.zero_grad(set_to_none=True)

    fns = {
        "plain": lambda: step(None),
        "seen": lambda: step("seen"),
        "unseen": lambda: step("unseen"),
        "build": lambda: attention_inputs(ids, tok, "unseen", starts),
    }
    try:
        timed = {name: sec for name, (sec, _) in medians(fns, repeats).items()}
    finally:
        model.eval()
    plain, seen4d, unseen, build = timed["plain"], timed["seen"], timed["unseen"], timed["build"]
    return {
        "batch": batch,
        "tokens": length,
        "seen_s": round(plain, 4),
        "seen_4d_mask_s": round(seen4d, 4),
        "unseen_s": round(unseen, 4),
        "unseen_mask_build_s": round(build, 4),
        "unseen_train_over_seen": round(unseen / plain, 3),
        "unseen_over_seen_4d_mask": round(unseen / seen4d, 3),
    }


def run(
    repeats: int = 5, path_len: int = 48, threads: int = 1, quick: bool = False
) -> dict[str, Any]:
    """All measurements as one dict (``quick``: fewer repeats and shorter sequences, for a smoke
    run)."""
    torch.set_num_threads(threads)
    if quick:
        repeats, path_len = 1, 8
    model, tok, source = load_model()
    with torch.no_grad():
        forked = bench_forked(model, tok, path_len, repeats)
        reread = bench_reread(model, tok, 8, path_len, repeats)
        seen = bench_seen(model, tok, 8, 16 if quick else 64, repeats)
    train = bench_train(model, tok, 2 if quick else 8, 128 if quick else 512, repeats)
    return {
        "benchmark": "rollout",
        "model_source": source,
        "threads": threads,
        "repeats": repeats,
        "forked_over_single_path": forked["forked_over_single_path"],
        "seen_engine_over_generate": seen["seen_engine_over_generate"],
        "summary_reprefill_tokens": forked["summary_reprefill_tokens"],
        "summary_merge_reprocessed_tokens": forked["summary_merge_reprocessed_tokens"],
        "unseen_train_over_seen": train["unseen_train_over_seen"],
        "reread_over_forked": reread["reread_over_forked"],
        "reread_tokens_per_block": reread["reread_tokens_per_block"],
        "forked_detail": forked,
        "seen_detail": seen,
        "train_detail": train,
        "reread_detail": reread,
    }


def arguments() -> argparse.ArgumentParser:
    """This script's flags, each checked as it is parsed (a bad one: one line, exit 2)."""
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=count(1), default=5)
    parser.add_argument("--path-len", type=count(1, MAX_TOKENS), default=48)
    parser.add_argument(
        "--threads",
        type=count(1, MAX_THREADS),
        default=1,
        help="torch CPU threads (1: steadiest on a shared CPU)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repeat (a smoke run)")
    return parser


def main(argv: list[str] | None = None) -> None:
    quiet_known_noise()  # the notes the CLI drops (pr1lib.config.runtime.NOISE_LOGS)
    args = arguments().parse_args(argv)
    print(json.dumps(run(args.repeats, args.path_len, args.threads, args.quick)))


if __name__ == "__main__":
    main()

"""Block cost: on the same held-out problems, is an answer more often right with a block or without?

For each tier, every problem is answered ``k`` times with a **forced block** (the first completion
token is ``<Parallel>``: the place where the TinyWorld teacher opens its block; the model writes
the rest, at most ``max_blocks`` blocks) and ``k`` times **forced plain** (``<Parallel>`` banned:
``RolloutConfig(max_blocks=0)``), sampled at T = 1 with ``pr1lib.decoding.rollout`` in ``seen`` or
``forked`` mode. Correctness is the accuracy reward's (``pr1lib.rewards.functions.terms``: the last
``Final Answer:`` outside the paths equals the gold answer). The difference is block minus plain;
its 95 % interval is a **paired bootstrap over problems** (problems are resampled with
replacement, each keeping both of its per-problem means), so it reflects problem-to-problem
variation as well as sampling noise.

Why it matters (notebook 04): with the tiered reward a block raises the expected reward only if its
accuracy cost d is below b * p / (2 + b); a world where blocks cost accuracy teaches RL to drop
them.

``python -m pr1lib blockcost --model RUN --data tinyworld-easy,tinyworld-hard --n 200 --k 4 --mode
seen`` prints one JSON object last: ``{tier: {acc_block, acc_plain, diff, ci95, n, k, ...}}``.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from pr1lib.config import RolloutConfig
from pr1lib.data.evalsets import load_benchmark
from pr1lib.decoding.rollout import generate
from pr1lib.decoding.structure import tag_ids
from pr1lib.evaluation.metrics import BOOTSTRAP, completion_metrics, paired_bootstrap, sample_stats
from pr1lib.experiments import STUDIES, StudyRun
from pr1lib.format.prompts import chat_prompt

# the sampling settings ``sample`` (and so ``blockcost --set``) takes
SAMPLING_KEYS = STUDIES["blockcost"].sets


class _OpenFirst(torch.nn.Module):
    """The output layer, plus a huge ``<Parallel>`` logit on its first call only (the prefill,
    whose logits choose every row's first completion token); later calls pass through."""

    def __init__(self, head: torch.nn.Module, token: int):
        super().__init__()
        self.head, self.token, self.armed = head, token, True

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.head(hidden)  # (B, L, V)
        if self.armed:
            self.armed = False
            logits = logits.clone()
            logits[..., self.token] = logits.max() + 100.0  # softmax puts ~all mass on <Parallel>
        return logits


@contextlib.contextmanager
def open_with_block(model: Any, token: int) -> Iterator[None]:
    """Inside the ``with``, the next generation call starts every completion with ``token``.

    >>> from transformers import Qwen3Config, Qwen3ForCausalLM
    >>> m = Qwen3ForCausalLM(Qwen3Config(vocab_size=16, hidden_size=8, head_dim=4,
    ...     intermediate_size=8, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1))
    >>> with open_with_block(m, 3):
    ...     first, second = [int(m(torch.tensor([[1, 2]])).logits[0, -1].argmax())
    ...                      for _ in range(2)]
    >>> first, type(m.lm_head).__name__
    (3, 'Linear')
    """
    head = model.lm_head
    model.lm_head = _OpenFirst(head, token)
    try:
        yield
    finally:
        model.lm_head = head


def sample(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    k: int,
    block: bool,
    mode: str = "seen",
    temperature: float = 1.0,
    max_completion_length: int = 256,
    max_path_length: int = 96,
    max_blocks: int = 1,
    batch_size: int = 64,
    seed: int = 0,
    path_headers: bool = False,
    num_paths: int = 2,
    header_style: str = "number",
    hide_plan: bool = False,
) -> list[list[str]]:
    """``k`` completions per prompt, forced to open with a block (``block=True``) or to have
    none (``path_headers``: forked paths open with their numbers, for a model trained so;
    ``num_paths`` per block, a world's ``layout``; ``hide_plan`` for a model trained with it)."""
    cfg = RolloutConfig(
        mode=mode,
        temperature=temperature,
        max_completion_length=max_completion_length,
        max_path_length=max_path_length,
        max_blocks=max_blocks if block else 0,
        at_block_limit="mask",
        path_headers=path_headers,
        num_paths=num_paths,
        header_style=header_style,
        hide_plan=hide_plan,
    )  # after its block the answer still follows
    rows = [p for p in prompts for _ in range(k)]  # k rows per prompt, kept together
    gen = torch.Generator(device=model.device).manual_seed(seed)
    texts: list[str] = []
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        guard = (
            open_with_block(model, tag_ids(tokenizer).parallel)
            if block
            else contextlib.nullcontext()
        )
        with guard, torch.no_grad():
            texts += [r.text for r in generate(model, tokenizer, chunk, cfg, generator=gen)]
    return [texts[i * k : (i + 1) * k] for i in range(len(prompts))]


def score(
    texts: list[list[str]], golds: Sequence[str], tokenizer: Any = None, mode: str = "seen"
) -> dict[str, Any]:
    """Per-problem accuracy and the pooled metrics of the one scorer (``metrics``), with the mean
    tokens and sequential decode steps of a sample (``metrics.sample_stats`` in ``mode``)."""
    rows = [completion_metrics(row, [g] * len(row)) for row, g in zip(texts, golds)]
    flat = [t for row in texts for t in row]
    pooled = completion_metrics(flat, [g for row, g in zip(texts, golds) for _ in row])
    stats = [sample_stats(t, tokenizer, mode) for t in flat]
    return {
        "per_problem": [r["accuracy"] for r in rows],
        **pooled,
        "tokens": statistics.fmean(s["length"] for s in stats) if stats else 0.0,
        "sequential_steps": statistics.fmean(s["sequential_steps"] for s in stats)
        if stats
        else 0.0,
    }


def tier_cost(
    model: Any,
    tokenizer: Any,
    records: list[dict],
    k: int = 4,
    mode: str = "seen",
    seed: int = 0,
    **sampling: Any,
) -> dict[str, Any]:
    """Forced block vs forced plain on ``records``: accuracies, difference, its interval, rates,
    mean tokens and sequential decode steps per sample, and the seconds each condition took."""
    prompts = [chat_prompt(r["question"], tokenizer, "tiny") for r in records]
    golds = [r["answer"] for r in records]
    runs = {}
    for block in (True, False):
        start = time.perf_counter()
        texts = sample(model, tokenizer, prompts, k, block, mode, seed=seed, **sampling)
        runs[block] = {
            **score(texts, golds, tokenizer, mode),
            "seconds": time.perf_counter() - start,
        }
    with_block, plain = runs[True], runs[False]
    ci = paired_bootstrap(with_block.pop("per_problem"), plain.pop("per_problem"), seed=seed)
    return {
        "acc_block": round(with_block["accuracy"], 4),
        "acc_plain": round(plain["accuracy"], 4),
        "diff": round(with_block["accuracy"] - plain["accuracy"], 4),
        "ci95": [round(ci["low"], 4), round(ci["high"], 4)],
        "ci_method": BOOTSTRAP,
        "n": len(records),
        "k": k,
        "mode": mode,
        "valid_block": round(with_block["valid_ratio"], 4),
        "valid_plain": round(plain["valid_ratio"], 4),
        "parallel_ratio_block": round(with_block["parallel_ratio"], 4),
        "parallel_ratio_plain": round(plain["parallel_ratio"], 4),
        **{
            f"{key}_{name}": round(run[key], 1)
            for name, run in (("block", with_block), ("plain", plain))
            for key in ("tokens", "sequential_steps", "seconds")
        },
    }


def blockcost(
    model: Any,
    tokenizer: Any,
    tiers: Sequence[str] = ("tinyworld-easy", "tinyworld-hard"),
    n: int = 200,
    k: int = 4,
    mode: str = "seen",
    seed: int = 0,
    **sampling: Any,
) -> dict[str, dict]:
    """``{tier: tier_cost(...)}`` on the first ``n`` held-out problems of each benchmark in
    ``tiers`` (``pr1lib.data.evalsets``); ``sampling`` goes to ``sample`` (``temperature``, lengths,
    ...).

    >>> from pr1lib.decoding.models import build_random_tiny
    >>> from pr1lib.decoding.tokens import add_parallel_tags
    >>> model, tok = build_random_tiny(seed=0); _ = add_parallel_tags(tok, model)
    >>> out = blockcost(model.eval(), tok, ["tinyworld-easy"], n=2, k=1, max_completion_length=12,
    ...                 max_path_length=4)
    >>> out["tinyworld-easy"]["parallel_ratio_block"], out["tinyworld-easy"]["parallel_ratio_plain"]
    (1.0, 0.0)
    """
    was_training = model.training
    model.eval()
    try:
        return {
            tier: tier_cost(
                model, tokenizer, load_benchmark(tier, n, seed=seed), k, mode, seed, **sampling
            )
            for tier in tiers
        }
    finally:
        model.train(was_training)


# the rollout mode a forced block is sampled in, per variant: the seen SFT reads its paths in one
# causal stream (as its traces were written), the unseen one forks them (as its mask trained it)
BLOCK_MODES = {"seen": "seen", "unseen": "forked"}


def main(run: StudyRun) -> list[dict]:
    """``study blockcost``: the world's tiers, from its shipped SFT of ``--variant`` (or
    ``--model``), with its budgets; one result per seed (the seed draws the samples)."""
    from pr1lib import worlds
    from pr1lib.evaluation.evaluate import load_for_eval

    variant = run.option("variant", "seen")
    world = worlds.get(run.world or "tinyworld")
    name = run.option("model") or run.option("init") or world.init(variant)
    if name is None:
        raise ValueError(f"{world.name} ships no {variant} SFT: give --model")
    sampling = {**world.budgets, **run.overrides}
    model, tokenizer = load_for_eval(name, run.profile)
    results = []
    for seed in run.seeds:
        result = blockcost(
            model,
            tokenizer,
            world.sources(),
            run.option("n", 200),
            run.option("k", 4),
            BLOCK_MODES[variant],
            seed,
            **sampling,
        )
        results.append({"model": name, "variant": variant, "seed": seed, **result})
    return results

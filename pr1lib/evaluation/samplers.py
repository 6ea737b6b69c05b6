"""Generate functions: what an evaluation samples with. ``generate_fn(prompts, num_samples)``
returns, for every prompt, ``num_samples`` completion texts with the tags left in (``Completion``:
the text plus its ids). ``make_generate_fn`` builds one from a model: the training rollout engine
(``pr1lib.decoding.rollout``, ``seen`` or ``forked``) when the tokenizer has the tags, else plain
``model.generate`` (``seen`` only). ``pr1lib.evaluation.evaluate`` runs them over a benchmark.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from pr1lib.config import ROLLOUT_MODES, EvalConfig, RolloutConfig
from pr1lib.decoding.rollout import generate as rollout
from pr1lib.decoding.tokens import has_tags
from pr1lib.evaluation.metrics import Completion

GenerateFn = Callable[[list[str], int], list[list[str]]]


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


def hf_generate_fn(
    model: Any, tokenizer: Any, max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0
) -> GenerateFn:
    """A ``GenerateFn`` over plain ``model.generate``: one causal stream per sample (``seen``)."""

    def generate(prompts: list[str], num_samples: int) -> list[list[str]]:
        enc = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left").to(
            model.device
        )
        with torch.no_grad():
            out = model.generate(
                **enc,
                do_sample=True,
                temperature=temperature,
                top_p=top_p,
                top_k=0,
                max_new_tokens=max_new_tokens,
                num_return_sequences=num_samples,
                pad_token_id=tokenizer.pad_token_id,
            )  # (B * num_samples, L + T)
        texts = [
            decode_completion(row, tokenizer)
            for row in out[:, enc["input_ids"].shape[1] :].tolist()
        ]
        return [texts[i * num_samples : (i + 1) * num_samples] for i in range(len(prompts))]

    return generate


def rollout_generate_fn(
    model: Any, tokenizer: Any, cfg: EvalConfig, cache: str | None = None
) -> GenerateFn:
    """A ``GenerateFn`` over ``pr1lib.decoding.rollout.generate`` (the training engine) in
    ``cfg.mode``, sampling from its own generator seeded with ``cfg.seed`` (the global RNG is left
    alone); ``cache``: the rows' cache (``pr1lib.decoding.engine.pick_streams``; ``None``: the
    fastest)."""
    rcfg = RolloutConfig.of(cfg, cfg.mode)
    gen = torch.Generator(device=model.device).manual_seed(cfg.seed)

    def generate(prompts: list[str], num_samples: int) -> list[list[str]]:
        repeated = [p for p in prompts for _ in range(num_samples)]  # k rows per prompt
        drop = {tokenizer.eos_token_id, tokenizer.pad_token_id}  # as the engine's own decoding
        texts = [
            Completion(r.text, [t for t in r.completion_ids if t not in drop])
            for r in rollout(model, tokenizer, repeated, rcfg, generator=gen, cache=cache)
        ]
        return [texts[i * num_samples : (i + 1) * num_samples] for i in range(len(prompts))]

    return generate


def make_generate_fn(model: Any, tokenizer: Any, cfg: EvalConfig) -> GenerateFn:
    """``cfg.engine``: ``rollout`` (both modes), ``generate`` (plain ``model.generate``, ``seen``
    only) or ``auto`` = rollout when the tokenizer has the tags, else generate."""
    if cfg.mode not in ROLLOUT_MODES:
        raise ValueError(f"mode must be one of {ROLLOUT_MODES}, got {cfg.mode!r}")
    engine = (
        cfg.engine if cfg.engine != "auto" else ("rollout" if has_tags(tokenizer) else "generate")
    )
    if engine == "rollout":
        return rollout_generate_fn(model, tokenizer, cfg)
    if engine != "generate":
        raise ValueError(f"engine must be auto, rollout or generate, got {cfg.engine!r}")
    if cfg.mode == "forked":
        raise ValueError(
            "forked mode needs the rollout engine, and this tokenizer lacks the parallel "
            "tags (add them with pr1lib.decoding.tokens.add_parallel_tags), or engine='generate' "
            "was asked; use --mode seen for plain model.generate"
        )
    return hf_generate_fn(model, tokenizer, cfg.max_completion_length, cfg.temperature, cfg.top_p)

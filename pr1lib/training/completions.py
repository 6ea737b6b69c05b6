"""How GRPO's trainer gets its completions: the engine as TRL's ``rollout_func``, a merged LoRA
policy to sample from, and signal-dense batches (DAPO's dynamic sampling).

* ``EngineRollout`` samples with ``pr1lib.decoding.rollout.generate`` from the live policy. With
  ``merge_rollout_lora`` it samples from ``MergedPolicy``: a copy of the LoRA policy with the
  adapters folded into its weights, refreshed before every rollout, and run without PEFT's
  wrappers (the bare modules under them). It is the same model with one matmul per layer instead
  of three; the rounding differs in the last bits, and nothing reads the rollout's log-probs when
  TRL runs one iteration per batch (its loss uses the trainer's own).
* ``DynamicSampler`` (``dynamic_sampling``): a group whose rewards are all equal has zero
  advantage, so it trains nothing (DAPO, arXiv 2503.14476). The sampler rolls out the batch,
  scores it with the trainer's own reward functions, drops those groups and refills the batch
  with groups of fresh training prompts, for at most ``max_refills`` rounds; when the rounds run
  out, the dropped groups fill what is left. The batch keeps TRL's shape
  (``per_device_train_batch_size`` completions in groups of ``num_generations``), and the trainer
  scores it once more as usual. Logged: ``sampling/zero_std_before`` (the first round's share of
  groups without spread, TRL's ``frac_reward_zero_std`` before filtering), ``sampling/refills``
  (rounds after the first) and ``sampling/groups`` (groups rolled out).
* ``prefilter`` (``prefilter_k``): before training, ``k`` samples per training prompt from the
  start checkpoint; only prompts whose pass rate lies in ``prefilter_range`` stay, the edge of
  competence where groups have spread. It costs ``k`` rollouts per prompt (mind ``train_n``).

>>> zero_spread(torch.tensor([1.0, 1.0, -1.0, 1.0]), 2).tolist()
[True, False]
"""

from __future__ import annotations

import copy
import math
import random
import time
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import Any, Iterator

import torch

from pr1lib.config import GRPOStageConfig, RolloutConfig
from pr1lib.decoding.rollout import as_columns, generate
from pr1lib.rewards.modes import reward_for


def rollout_config(cfg: GRPOStageConfig) -> RolloutConfig:
    """The engine's settings for this stage's rollouts (mode, paths, blocks, lengths, sampling)."""
    return RolloutConfig.of(
        cfg, cfg.rollout_mode, fast_cache=cfg.fast_cache, width_temperature=cfg.width_temperature
    )


# ----------------------------------------------------------------------- the policy to sample from
def mergeable(model: Any) -> bool:
    """A PEFT model whose adapters can be folded in exactly enough (not 4-bit: that would round)."""
    return hasattr(model, "merge_adapter") and not any(
        type(m).__name__ == "Linear4bit" for m in model.modules()
    )


def bare_layer(module: Any) -> Any:
    """The plain layer under PEFT's wrappers (a LoRA layer, a trainable-tokens wrapper)."""
    module = getattr(module, "token_adapter", module)
    while hasattr(module, "base_layer"):
        module = module.base_layer
    return module


def bare_model(peft_model: Any) -> Any:
    """The model under a PEFT model with every wrapper replaced by the layer it wraps: it shares
    their weights, so after ``merge_adapter`` it runs the merged model without the wrappers'
    per-call Python overhead, which dominates a tiny model's decoding step on the CPU."""
    inner = peft_model.get_base_model()
    bare = _shallow(inner)
    bare.__dict__.pop("forward", None)  # TRL's forward, patched on the instance, runs ``inner``
    copies, replaced = {"": bare}, ()
    for name, child in inner.named_modules():  # parents before children
        if not name or name.startswith(replaced) or bare_layer(child) is child:
            continue  # the root, a module inside a replaced wrapper, or a plain one
        parent, _, leaf = name.rpartition(".")
        _copied(copies, parent)._modules[leaf] = bare_layer(child)
        replaced += (name + ".",)
    return bare


def _shallow(module: Any) -> Any:
    """A copy of ``module`` that shares its parameters but has its own list of children."""
    twin = copy.copy(module)
    twin._modules = dict(module._modules)
    return twin


def _copied(copies: dict[str, Any], path: str) -> Any:
    """The bare tree's module at ``path``, made a ``_shallow`` copy on first use (``copies``: the
    ones made so far), so that swapping its child leaves the model it came from as it was."""
    if path not in copies:
        parent, _, leaf = path.rpartition(".")
        holder = _copied(copies, parent)
        copies[path] = holder._modules[leaf] = _shallow(holder._modules[leaf])
    return copies[path]


class MergedPolicy:
    """A copy of a LoRA policy with the adapters merged in, to sample from (other models: as is).

    >>> from pr1lib.decoding.models import load_training_policy
    >>> from pr1lib.config import ModelConfig
    >>> from peft import get_peft_model
    >>> model, tok, lora = load_training_policy(ModelConfig.for_profile("smoke", use_lora=True))
    >>> policy = get_peft_model(model, lora)
    >>> with MergedPolicy().use(policy) as merged:
    ...     type(merged).__name__, any("lora_A" in n for n, _ in merged.named_parameters())
    ('Qwen3ForCausalLM', False)
    """

    def __init__(self) -> None:
        self.copy: Any = None
        self.bare: Any = None

    @contextmanager
    def use(self, model: Any) -> Iterator[Any]:
        if not mergeable(model):
            yield model
            return
        with torch.no_grad():
            if self.copy is None:
                self.copy = copy.deepcopy(model).eval().requires_grad_(False)
                self.bare = bare_model(self.copy)
            self.copy.load_state_dict(model.state_dict())  # exact weights, then fold in the LoRA
            self.copy.merge_adapter()
        try:
            yield self.bare
        finally:
            with torch.no_grad():
                self.copy.unmerge_adapter()


class EngineRollout:
    """TRL ``rollout_func``: ``(prompts, trainer) -> {prompt_ids, completion_ids, logprobs}``
    (and ``env_mask``).

    Samples with ``pr1lib.decoding.rollout.generate`` from the live policy (no gradients, eval
    mode), with the global torch RNG, which the trainer seeds and restores on resume. With
    ``train_forced_tokens`` every token gets loss (the official choice); otherwise ``env_mask``
    keeps the engine's tags out. ``cache``: the rows' cache
    (``pr1lib.decoding.engine.pick_streams``; ``None``, the fastest; ``bench grpo`` sets the class
    attribute to time another).
    """

    cache: str | None = None

    def __init__(self, cfg: GRPOStageConfig, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.train_forced = cfg.train_forced_tokens
        self.config = rollout_config(cfg)
        self.merged = MergedPolicy() if cfg.merge_rollout_lora else None
        self.seconds = 0.0

    def __call__(self, prompts: list, trainer: Any) -> dict[str, list]:
        model = trainer.accelerator.unwrap_model(trainer.model)
        was_training, start = model.training, time.perf_counter()
        model.eval()
        try:
            if self.merged is None:
                rollouts = generate(model, self.tokenizer, prompts, self.config, cache=self.cache)
            else:
                with self.merged.use(model) as policy:
                    rollouts = generate(
                        policy, self.tokenizer, prompts, self.config, cache=self.cache
                    )
        finally:
            model.train(was_training)
        self.seconds += time.perf_counter() - start
        columns = as_columns(rollouts)
        columns.pop("text")
        if self.train_forced:
            columns.pop("env_mask")
        return columns


# ----------------------------------------------------------------------------- dynamic sampling
def zero_spread(rewards: torch.Tensor, num_generations: int) -> torch.Tensor:
    """``(groups,)`` True where a group's rewards are all equal (TRL's zero-std test)."""
    std = rewards.view(-1, num_generations).std(dim=1)  # (groups,)
    return torch.isclose(std, torch.zeros_like(std))


def score(
    trainer: Any, rows: list[dict], completions: list[str], completion_ids: list
) -> torch.Tensor:
    """``(N,)``: the trainer's reward functions, weighted and summed as TRL sums them (a ``None``
    reward counts 0; a row with no reward at all is NaN). Nothing is logged."""
    skip = ("prompt", "completion", "completion_ids")
    kwargs = {k: [r[k] for r in rows] for k in rows[0] if k not in skip}
    prompts = [r["prompt"] for r in rows]
    columns = []
    for fn in trainer.reward_funcs:
        out = fn(
            prompts=prompts,
            completions=completions,
            completion_ids=completion_ids,
            trainer_state=trainer.state,
            **kwargs,
        )
        columns.append([math.nan if x is None else float(x) for x in out])
    per_func = torch.tensor(columns, dtype=torch.float32).T  # (N, F)
    total = (per_func * trainer.reward_weights.cpu()[None, :]).nansum(dim=1)  # (N,)
    return total.masked_fill(per_func.isnan().all(dim=1), math.nan)


@dataclass
class Group:
    """The ``num_generations`` rows of one prompt, their rollout columns, whether they differ."""

    rows: list[dict]
    columns: dict[str, list]
    spread: bool


class DynamicSampler:
    """Fills a generation batch with groups whose rewards differ (see the module docstring).

    Fresh prompts are drawn from the training set with a ``random.Random`` seeded by ``seed``,
    the optimizer step and the round, so a resumed run draws the same ones.
    """

    def __init__(self, max_refills: int = 3, seed: int = 0) -> None:
        self.max_refills, self.seed = max_refills, seed

    def fill(self, trainer: Any, inputs: list[dict]) -> tuple[list[dict], dict[str, list]]:
        """The batch's rows and rollout columns (TRL's ``rollout_func`` output), groups in order."""
        size = trainer.num_generations
        want = len(inputs) // size
        groups = self.sample(trainer, inputs)
        zero_before = 1 - sum(g.spread for g in groups) / len(groups)
        sampled, refills = len(groups), 0
        kept, spare = [g for g in groups if g.spread], [g for g in groups if not g.spread]
        while len(kept) < want and refills < self.max_refills:
            refills += 1
            draw = min(want, math.ceil((want - len(kept)) / max(len(kept) / sampled, 0.25)))
            groups = self.sample(trainer, self.fresh(trainer, inputs, draw, refills))
            sampled += len(groups)
            kept += [g for g in groups if g.spread]
            spare += [g for g in groups if not g.spread]
        chosen = (kept + spare)[:want]
        metrics = trainer._metrics["train"]
        metrics["sampling/zero_std_before"].append(zero_before)
        metrics["sampling/refills"].append(float(refills))
        metrics["sampling/groups"].append(float(sampled))
        columns = {k: [x for g in chosen for x in g.columns[k]] for k in chosen[0].columns}
        return [r for g in chosen for r in g.rows], columns

    def sample(self, trainer: Any, rows: list[dict]) -> list[Group]:
        """Roll out ``rows`` (groups of ``num_generations``), score them, split them into groups."""
        size = trainer.num_generations
        columns = trainer.rollout_func([r["prompt"] for r in rows], trainer)
        ids = columns["completion_ids"]
        texts = trainer.processing_class.batch_decode(ids, skip_special_tokens=True)
        flat = zero_spread(score(trainer, rows, texts, ids), size).tolist()
        return [
            Group(
                rows[i : i + size],
                {k: v[i : i + size] for k, v in columns.items()},
                not flat[i // size],
            )
            for i in range(0, len(rows), size)
        ]

    def fresh(self, trainer: Any, inputs: list[dict], groups: int, refill: int) -> list[dict]:
        """``groups`` training prompts not in ``inputs`` (fewer if the set runs out), each repeated
        ``num_generations`` times."""
        data = trainer.train_dataset
        rng = random.Random(self.seed * 1_000_003 + trainer.state.global_step * 1_009 + refill)
        taken = {r["prompt"] for r in inputs}
        order = rng.sample(range(len(data)), len(data))
        picks = list(islice((i for i in order if data[i]["prompt"] not in taken), groups))
        return [data[i] for i in picks for _ in range(trainer.num_generations)]


# ----------------------------------------------------------------------------- prompt pre-filter
def prefilter(
    dataset: Any, model: Any, tokenizer: Any, cfg: GRPOStageConfig, grader: str, scorer: Any = None
) -> Any:
    """The rows of ``dataset`` whose pass rate over ``cfg.prefilter_k`` samples of ``model`` lies
    in ``cfg.prefilter_range`` (both ends included); ``scorer`` (default: the accuracy reward
    under ``grader``) marks a completion right when it scores above 0."""
    k, (low, high) = cfg.prefilter_k, cfg.prefilter_range
    scorer = scorer or reward_for("accuracy", grader=grader)
    keep, chunk, was_training = [], max(1, 128 // k), model.training
    model.eval()
    try:
        for start in range(0, len(dataset), chunk):
            rows = dataset[start : start + chunk]  # columns of up to `chunk` prompts
            many = {key: [v for v in values for _ in range(k)] for key, values in rows.items()}
            with torch.no_grad():
                out = generate(model, tokenizer, many["prompt"], rollout_config(cfg))
            scores = scorer(
                completions=[r.text for r in out],
                answer=many["answer"],
                data_source=many["data_source"],
            )
            rates = [sum(s > 0 for s in scores[i : i + k]) / k for i in range(0, len(scores), k)]
            keep += [start + i for i, rate in enumerate(rates) if low <= rate <= high]
    finally:
        model.train(was_training)
    if not keep:
        raise ValueError(
            f"prefilter kept no prompt: none of {len(dataset)} has a pass rate in "
            f"{cfg.prefilter_range} over {k} samples (widen prefilter_range)"
        )
    return dataset.select(keep)

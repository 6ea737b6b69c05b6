"""Pre-flight checks for "why is my reward zero?", run before a long GRPO job.

Each check is a small function returning a ``Check``; ``doctor(...)`` runs every check whose inputs
it was given (the others come back as skipped) and ``table(checks)`` prints the verdicts. Anything
model-dependent comes in as an argument (a tokenizer, a ``render`` function, sampled completions),
so the same checks run on toy inputs in tests and on a real model in the notebooks.

>>> from pr1lib.rewards.functions import tiered_reward
>>> checks = doctor(tiered_reward, gold_completions=["Final Answer: 5"], answers=["5"],
...                 batch={"per_device_train_batch_size": 8, "num_generations": 3})
>>> print(table(checks))  # doctest: +ELLIPSIS
check                  status  detail
gold_max               FAIL    1/1 gold completions score below the reward's maximum 1.2 (scores:
1.0)
                               -> check the answer column ...
prompt_prefill         skipped needs render
truncation             skipped needs tokenizer, max_completion_length
batch_groups           FAIL    generation batch 8 = 8 per device x ... is not divisible by
num_generations 3
                               -> batch sizes count completions, not prompts; ... one of [2, 4, 8]
group_variance         skipped needs groups, group_answers
tags_survive_decoding  skipped needs tokenizer
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from pr1lib.format.grammar import TAGS, parallel_stats
from pr1lib.rewards.modes import reward_range

PROBE = "PR1-DOCTOR-PROBE-PROBLEM"  # stands in for the problem text when rendering a prompt


@dataclass(frozen=True)
class Check:
    """One verdict: ``ok`` is True (pass), False (fail) or None (skipped: inputs missing)."""

    name: str
    ok: bool | None
    detail: str
    hint: str = ""  # what to do about a failure

    @property
    def status(self) -> str:
        return {True: "ok", False: "FAIL", None: "skipped"}[self.ok]


def _call(reward: Callable, completions: list, answers: list, step: int) -> list:
    """Call a reward the way TRL does, with a stand-in ``trainer_state`` at ``step``."""
    noop = lambda *args, **kwargs: None  # noqa: E731
    return reward(
        completions=completions,
        answer=answers,
        prompts=[""] * len(completions),
        trainer_state=SimpleNamespace(global_step=step),
        log_metric=noop,
        log_extra=noop,
    )


# ---------------------------------------------------------------- the checks
def check_gold(
    reward: Callable, gold_completions: Sequence[str], answers: Sequence[Any], step: int = 0
) -> Check:
    """Every gold completion must get the reward's top score (else the gold or the parser is off).

    >>> from pr1lib.rewards.functions import accuracy_reward
    >>> check_gold(accuracy_reward, ["2+3=5\\nFinal Answer: 5"], ["5"]).ok
    True
    """
    scores = _call(reward, list(gold_completions), list(answers), step)
    top = (reward_range(reward, step) or (None, None))[1]
    if top is None:
        return Check("gold_max", None, f"reward declares no range; gold scores {scores[:5]}")
    low = [i for i, s in enumerate(scores) if s is None or s < top - 1e-9]
    if not low:
        return Check(
            "gold_max", True, f"all {len(scores)} gold completions score the maximum {top}"
        )
    shown = ", ".join(str(scores[i]) for i in low[:5])
    return Check(
        "gold_max",
        False,
        f"{len(low)}/{len(scores)} gold completions score below the reward's "
        f"maximum {top} (scores: {shown})",
        "check the answer column (a bare value or '#### N'), the 'Final Answer:' line and, "
        "for parallel rewards, that the gold has a strictly valid block (format.validate)",
    )


def check_prefill(render: Callable[[str], str], tags: Sequence[str] = TAGS) -> Check:
    """The prompt's generation prefix (what follows the problem) must not open a tag for the model.

    >>> check_prefill(lambda p: f"Problem: {p}\\nSolution:\\n").ok
    True
    >>> check_prefill(lambda p: f"Problem: {p}\\n<Parallel>").detail
    "the prompt ends by pre-filling ['<Parallel>']: completions will not contain it"
    """
    prompt = render(PROBE)
    if PROBE not in prompt:
        return Check(
            "prompt_prefill", False, "render() dropped the problem text", "render must include it"
        )
    tail = prompt[prompt.rindex(PROBE) + len(PROBE) :]
    found = [t for t in tags if t in tail]
    if not found:
        return Check(
            "prompt_prefill", True, "no tag after the problem text: the model writes every tag"
        )
    return Check(
        "prompt_prefill",
        False,
        f"the prompt ends by pre-filling {found}: completions will not contain it",
        "TRL scores the completion only; remove the tag from the generation prompt",
    )


def _n_tokens(tokenizer: Any, text: str) -> int:
    ids = tokenizer.encode(text, add_special_tokens=False)
    return len(getattr(ids, "ids", ids))  # HF tokenizers return a list, `tokenizers` an Encoding


def check_truncation(
    samples: Sequence[str], tokenizer: Any, max_completion_length: int, max_rate: float = 0.05
) -> Check:
    """Share of sample completions (+1 token for EOS) that would not fit
    ``max_completion_length``."""
    if not samples:
        return Check("truncation", None, "no sample completions given")
    lengths = [_n_tokens(tokenizer, s) + 1 for s in samples]
    cut = [n > max_completion_length for n in lengths]
    par = [c for c, s in zip(cut, samples) if parallel_stats(s)["blocks"]]
    rate = sum(cut) / len(cut)
    detail = (
        f"{sum(cut)}/{len(cut)} samples ({rate:.0%}) exceed {max_completion_length} tokens"
        f" (longest {max(lengths)})"
    )
    if par:
        detail += f"; {sum(par)}/{len(par)} with a parallel block"
    ok = rate <= max_rate
    hint = (
        ""
        if ok
        else (
            f"raise max_completion_length to about {_quantile(lengths, 0.95)}: a cut "
            "completion has no Final Answer, so it scores -1 whatever it did"
        )
    )
    return Check("truncation", ok, detail, hint)


def _quantile(values: Sequence[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _get(config: Any, key: str, default: Any = None) -> Any:
    if isinstance(config, Mapping):
        return config.get(key, default)
    return getattr(config, key, default)


def check_batch(batch: Any) -> Check:
    """TRL's group rule: the generation batch must hold whole groups of ``num_generations``.

    ``batch`` is a GRPOConfig-like object or a dict with ``per_device_train_batch_size``,
    ``num_generations`` and optionally ``gradient_accumulation_steps``, ``steps_per_generation``,
    ``generation_batch_size``, ``world_size``.

    >>> check_batch({"per_device_train_batch_size": 8, "num_generations": 4}).detail
    'generation batch 8 = 8 per device x 1 process(es) x 1 step(s) per generation = 2 prompts x 4 completions'
    """  # noqa: E501 - doctest output / table rows stay whole
    per_device, g = _get(batch, "per_device_train_batch_size"), _get(batch, "num_generations")
    world = _get(batch, "world_size", 1) or 1
    steps = (
        _get(batch, "steps_per_generation") or _get(batch, "gradient_accumulation_steps", 1) or 1
    )
    gen = _get(batch, "generation_batch_size") or per_device * world * steps
    formula = (
        f"{gen} = {per_device} per device x {world} process(es) x {steps} step(s) per generation"
    )
    if g is None or g < 2:
        return Check(
            "batch_groups",
            False,
            f"num_generations={g}",
            "GRPO needs at least 2 completions per prompt",
        )
    if gen % (per_device * world):
        return Check(
            "batch_groups",
            False,
            f"generation_batch_size {gen} is not a multiple of the "
            f"global batch {per_device} x {world}",
            "pick a generation_batch_size that is",
        )
    if gen % g == 0:
        return Check(
            "batch_groups",
            True,
            f"generation batch {formula} = {gen // g} prompts x {g} completions",
        )
    valid = [d for d in range(2, gen + 1) if gen % d == 0]
    return Check(
        "batch_groups",
        False,
        f"generation batch {formula} is not divisible by num_generations {g}",
        f"batch sizes count completions, not prompts; num_generations could be one of {valid}",
    )


def check_group_variance(
    reward: Callable,
    groups: Sequence[Sequence[str]],
    answers: Sequence[Any],
    step: int = 0,
    max_zero_std: float = 0.5,
) -> Check:
    """Share of prompt groups whose completions all score the same (they give GRPO no gradient).

    >>> from pr1lib.rewards.functions import accuracy_reward
    >>> check_group_variance(accuracy_reward, [["Final Answer: 5", "Final Answer: 6"]], ["5"]).ok
    True
    """
    if not any(groups):
        return Check("group_variance", None, "no groups given")
    flat = [c for grp in groups for c in grp]
    golds = [a for grp, a in zip(groups, answers) for _ in grp]
    scores = iter(_call(reward, flat, golds, step))
    per_group = [[next(scores) for _ in grp] for grp in groups]
    flat_groups = sum(1 for s in per_group if len(set(s)) <= 1)
    frac = flat_groups / len(per_group)
    mean = statistics.fmean(s for grp in per_group for s in grp)
    detail = (
        f"frac_reward_zero_std = {frac:.2f} ({flat_groups}/{len(per_group)} groups), "
        f"mean reward {mean:+.2f}"
    )
    ok = frac <= max_zero_std
    hint = (
        ""
        if ok
        else (
            "most groups teach nothing: prime the format with SFT, use easier problems, "
            "more generations or a higher temperature"
        )
    )
    return Check("group_variance", ok, detail, hint)


def check_tags_survive(tokenizer: Any, tags: Sequence[str] = TAGS) -> Check:
    """TRL decodes completions with ``skip_special_tokens=True``: the tags must still be in the
    text."""
    probe = "a " + " b ".join(tags) + " c"
    text = tokenizer.decode(
        tokenizer.encode(probe, add_special_tokens=False), skip_special_tokens=True
    )
    lost = [t for t in tags if t not in text]
    if not lost:
        return Check(
            "tags_survive_decoding", True, "all tags survive decode(skip_special_tokens=True)"
        )
    return Check(
        "tags_survive_decoding",
        False,
        f"decoding drops {lost}: every parallel reward would see no tags",
        "add the tags as normal added tokens (special=False), not as special tokens",
    )


# ---------------------------------------------------------------- one call, one table
def doctor(
    reward: Callable | None = None,
    *,
    gold_completions: Sequence[str] | None = None,
    answers: Sequence[Any] | None = None,
    render: Callable[[str], str] | None = None,
    tokenizer: Any = None,
    samples: Sequence[str] | None = None,
    max_completion_length: int | None = None,
    batch: Any = None,
    groups: Sequence[Sequence[str]] | None = None,
    group_answers: Sequence[Any] | None = None,
    step: int = 0,
) -> list[Check]:
    """Run every check whose inputs are given; the rest are reported as skipped.

    ``step`` is the ``global_step`` the reward sees (for ``alternating_reward``, a tiered step such
    as 8 makes the gold check demand the parallel maximum). ``samples`` default to the gold ones.
    """
    samples = samples if samples is not None else gold_completions
    given = dict(
        reward=reward,
        gold_completions=gold_completions,
        answers=answers,
        render=render,
        tokenizer=tokenizer,
        samples=samples,
        max_completion_length=max_completion_length,
        batch=batch,
        groups=groups,
        group_answers=group_answers,
    )
    plan: list[tuple[str, tuple[str, ...], Callable[[], Check]]] = [
        (
            "gold_max",
            ("reward", "gold_completions", "answers"),
            lambda: check_gold(reward, gold_completions, answers, step),
        ),
        ("prompt_prefill", ("render",), lambda: check_prefill(render)),
        (
            "truncation",
            ("samples", "tokenizer", "max_completion_length"),
            lambda: check_truncation(samples, tokenizer, max_completion_length),
        ),
        ("batch_groups", ("batch",), lambda: check_batch(batch)),
        (
            "group_variance",
            ("reward", "groups", "group_answers"),
            lambda: check_group_variance(reward, groups, group_answers, step),
        ),
        ("tags_survive_decoding", ("tokenizer",), lambda: check_tags_survive(tokenizer)),
    ]
    checks = []
    for name, needs, run in plan:
        missing = [k for k in needs if given[k] is None]
        checks.append(run() if not missing else Check(name, None, "needs " + ", ".join(missing)))
    return checks


def dry_run(
    generate: Callable[[str, int], Sequence[str]], prompts: Sequence[str], num_generations: int
) -> list[list[str]]:
    """Groups for ``check_group_variance``: ``generate(prompt, n)`` returns n sampled
    completions."""
    return [list(generate(p, num_generations)) for p in prompts]


def table(checks: Sequence[Check], width: int = 96) -> str:
    """Checks as an aligned text table, lines at most ``width`` characters: a long detail wraps
    between words under its own column, and a failure's hint follows on an indented line.

    >>> print(table([Check("gold_max", True, "all 8 gold completions score " * 3)], width=60))
    check     status  detail
    gold_max  ok      all 8 gold completions score all 8 gold
                      completions score all 8 gold completions
                      score
    """
    import textwrap

    name = max([len("check"), *(len(c.name) for c in checks)])
    indent = " " * (name + 10)  # under the detail column
    lines = [f"{'check':<{name}}  {'status':<7} detail"]
    for c in checks:
        rows = [(f"{c.name:<{name}}  {c.status:<7} ", c.detail)]
        if c.ok is False and c.hint:
            rows.append((indent, f"-> {c.hint}"))
        for first, text in rows:
            lines += textwrap.wrap(
                text, width, initial_indent=first, subsequent_indent=indent, break_long_words=False
            ) or [first.rstrip()]
    return "\n".join(lines)

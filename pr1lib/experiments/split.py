"""Do parallel paths split a search? The share of forced blocks whose paths take the shares they
were assigned (a world's ``block_splits``: WideWorld's path j checks deal (j+1)).

For each held-out hard problem whose teacher trace opens a block, the model gets the prompt and
the trace's text before the block (WideWorld: the guess, deal (0), checked and failed), its first
completion token is forced to ``<Parallel>`` (``blockcost.open_with_block``) and it writes the
rest: one sample per problem at T = 1, in the rollout mode of its variant (unseen: forked, the
engine writing each path's number; in a layout that forces nothing, ``header_style="none"``, the
text before the block loses its plan line too). ``split_rate`` is the share of those blocks in
which every path checked its own deal with that deal's prices; ``path_rate`` the share of single
paths that did; ``accuracy`` how often the forced block's answer was right.

``python -m pr1lib study split --world wideworld --model RUN --variant unseen --n 250`` prints
one JSON object last.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from pr1lib import worlds
from pr1lib.data.evalsets import load_benchmark
from pr1lib.evaluation.metrics import completion_metrics
from pr1lib.experiments import StudyRun
from pr1lib.experiments.blockcost import BLOCK_MODES, sample
from pr1lib.format.grammar import PARALLEL
from pr1lib.format.plans import drop_plans
from pr1lib.format.prompts import chat_prompt


def forced_prefixes(world: Any, records: list[dict]) -> list[tuple[dict, str]]:
    """``(record, text before its block)`` for every record whose teacher trace opens one."""
    teacher, out = world.rule_teacher(), []
    for i, record in enumerate(records):
        problem = {"id": f"split-{i}", "question": record["question"]}
        text = teacher.trace({**problem, "answer_text": record["answer"]})["text"]
        if PARALLEL in text:
            out.append((record, text[: text.index(PARALLEL)]))
    return out


def unplanned(prefix: str) -> str:
    """The text before a block without the plan line that closes it (``plans.drop_plans``).

    >>> unplanned("Check (A), (B)\\n"), unplanned("(A) 1+2=3 vs 4 ✗\\n")
    ('', '(A) 1+2=3 vs 4 ✗\\n')
    """
    return drop_plans(prefix + PARALLEL)[: -len(PARALLEL)]


def forced_split(
    model: Any,
    tokenizer: Any,
    world: Any,
    n: int = 250,
    mode: str = "forked",
    seed: int = 0,
    temperature: float = 1.0,
    **sampling: Any,
) -> dict[str, Any]:
    """The split rate of ``n`` forced blocks on ``world``'s held-out hard problems (module doc).

    >>> from pr1lib import worlds
    >>> from pr1lib.decoding.models import build_random_tiny
    >>> from pr1lib.decoding.tokens import add_parallel_tags
    >>> model, tok = build_random_tiny(seed=0); _ = add_parallel_tags(tok, model)
    >>> out = forced_split(model.eval(), tok, worlds.get("wideworld"), n=2,
    ...                    max_completion_length=40, max_path_length=4)
    >>> out["n_blocks"], out["split_rate"]  # random weights: no path names its deal
    (2, 0.0)
    """
    if world.block_splits is None:
        raise ValueError(f"{world.title} assigns its paths no shares: it has no split rate")
    records = load_benchmark(world.source("hard"), 2 * n + 20, seed=0)
    layout = {**world.budgets, **sampling}  # its lengths and its blocks' layout
    chosen = forced_prefixes(world, records)[:n]
    if layout.get("header_style") == "none":  # paths told nothing: the prefix says nothing either
        chosen = [(r, unplanned(pre)) for r, pre in chosen]
    prompts = [chat_prompt(r["question"], tokenizer, "tiny") + pre for r, pre in chosen]
    texts = [
        pre + row[0]
        for (_, pre), row in zip(
            chosen,
            sample(model, tokenizer, prompts, 1, True, mode, temperature, seed=seed, **layout),
        )
    ]
    splits = [world.block_splits(r["question"], t)[:1] for (r, _), t in zip(chosen, texts)]
    firsts = [s[0] for s in splits if s]
    scored = completion_metrics(texts, [r["answer"] for r, _ in chosen])
    return {
        "split_rate": round(statistics.fmean(firsts), 4) if firsts else 0.0,
        "n_blocks": len(firsts),
        "accuracy": round(scored["accuracy"], 4),
        "valid_ratio": round(scored["valid_ratio"], 4),
        "mode": mode,
        "temperature": temperature,
        "example": texts[0] if texts else None,
    }


def main(run: StudyRun) -> list[dict]:
    """``study split``: the forced split rate of ``--model`` (or the world's shipped SFT of
    ``--variant``) per seed, at T = 1 and greedy."""
    from pr1lib import worlds
    from pr1lib.evaluation.evaluate import load_for_eval

    variant = run.option("variant", "unseen")
    world = worlds.get(run.world or "wideworld")
    name = run.option("model") or run.option("init") or world.init(variant)
    if name is None:
        raise ValueError(f"{world.name} ships no {variant} SFT: give --model")
    model, tokenizer = load_for_eval(name, run.profile)
    results = []
    for seed in run.seeds:
        sampled = forced_split(
            model, tokenizer, world, run.option("n", 250), BLOCK_MODES[variant], seed
        )
        greedy = forced_split(
            model, tokenizer, world, run.option("n", 250), BLOCK_MODES[variant], seed, 0.0
        )
        results.append(
            {"model": name, "variant": variant, "seed": seed, **sampled, "greedy": greedy}
        )
        print({k: sampled[k] for k in ("split_rate", "n_blocks", "accuracy")}, flush=True)
    return results


# ----------------------------------------------------- kept per model, read by the controls study
def measure_split(
    profile: str, world: str, variant: str, model: str, folder: Path, n: int = 250, **layout: Any
) -> dict:
    """``forced_split`` of the run folder ``model`` at T = 1 (greedy beside it), in the rollout
    mode its variant trains with and the blocks' ``layout`` its arm samples with (``num_paths``,
    ``header_style``; none: the world's), with hidden plans where it was trained with them; kept in
    ``folder/splits.json`` (one entry per model) and reused."""
    from pr1lib.config import VARIANT_ROLLOUT
    from pr1lib.training.runs import decoded_hidden

    chosen = worlds.get(world)
    mode = chosen.rollout(variant) or VARIANT_ROLLOUT[variant]
    if decoded_hidden(model, mode):  # decoded as it was trained
        layout = {**layout, "hide_plan": True}
    path = Path(folder) / "splits.json"
    kept = json.loads(path.read_text()) if path.is_file() else {}
    old = kept.get(str(model)) or {}
    if (old.get("n_asked"), old.get("mode"), old.get("layout", {})) == (n, mode, layout):
        return old  # the same model, number of blocks, rollout mode and blocks' layout
    from pr1lib.evaluation.evaluate import load_for_eval

    policy, tokenizer = load_for_eval(model, profile, say=lambda *a, **k: None)
    result = {
        "model": model,
        "n_asked": n,
        **({"layout": layout} if layout else {}),
        **forced_split(policy, tokenizer, chosen, n, mode, **layout),
        "greedy": forced_split(policy, tokenizer, chosen, n, mode, temperature=0.0, **layout),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**kept, str(model): result}, indent=1))
    return result


def split_columns(sft_root: Path, rl_root: Path) -> dict[str, Any]:
    """``split_rate`` (after RL) and ``split_rate_sft`` with their block counts, pooled over the
    measured models in ``splits.json`` files (``measure_split``), and ``splits`` / ``splits_sft``:
    each model's own rate at T = 1 and greedy, by its folder (``sft``, ``sft-s1``; ``seed0``, ...);
    ``{}`` where none was measured."""
    out: dict[str, Any] = {}
    for key, folder, pick in (("", rl_root, "/seed"), ("_sft", sft_root, "/sft")):
        path = folder / "splits.json"
        kept = json.loads(path.read_text()) if path.is_file() else {}
        found = {m: v for m, v in kept.items() if pick in m}
        if found:
            blocks = sum(v["n_blocks"] for v in found.values())
            rate = sum(v["split_rate"] * v["n_blocks"] for v in found.values()) / max(blocks, 1)
            out.update({f"split_rate{key}": round(rate, 4), f"n_blocks{key}": blocks})
            out[f"splits{key}"] = {_split_name(m): _split_pair(v) for m, v in found.items()}
    return out


def _split_name(model: str) -> str:
    """A measured model's short name: its seed folder (``seed1``) or its SFT folder (``sft-s1``)."""
    parts = Path(model).parts
    return next((p for p in parts if p.startswith("seed")), parts[-1])


def _split_pair(measured: dict) -> dict[str, float | None]:
    """One model's forced split rate at T = 1 (``t1``) and greedy, and how often its forced
    block's answer was right at T = 1 (``accuracy``)."""
    greedy = (measured.get("greedy") or {}).get("split_rate")
    return {"t1": measured["split_rate"], "greedy": greedy, "accuracy": measured.get("accuracy")}

"""Solutions to the exercises of notebook 00 (two tiny worlds: TinyWorld, TinyGSM and their base
models).

Each ``exercise_N(profile)`` does the exercise and returns what it found; its docstring answers
the question in words. ``check_exercise_N(found)`` states what a right answer must show (the tests
call both). Run them all with ``python solutions/00_tiny_world.py [profile]``.

Exercises 1 and 2 sample the project's shipped TinyWorld models (``data/tinyworld-base``,
``data/tinyworld-sft``) on every profile: a random model has no check to bend or keep, so it could
not show the difference; the smoke profile only asks fewer items.
"""

from __future__ import annotations

import shutil

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from pr1lib import worlds
from pr1lib.config import EvalConfig, ModelConfig, NotebookConfig, PretrainConfig
from pr1lib.config.runtime import set_seed
from pr1lib.decoding.models import base_model_dir, load_policy
from pr1lib.evaluation.evaluate import sample_rows
from pr1lib.evaluation.metrics import summarize
from pr1lib.format.prompts import prompt_text
from pr1lib.store.paths import runs_dir
from pr1lib.training.pretrain import encode_batch, pretrain, step_records
from pr1lib.worlds.tasks import generate
from pr1lib.worlds.tinyworld import parse_hard, read_guess, solve_pair, split_paths

WORLD = worlds.get("tinyworld")


def items(profile: str) -> list[dict]:
    """Held-out hard TinyWorld items: 8 on smoke, the notebook's ``eval_n`` otherwise."""
    n = 8 if profile == "smoke" else NotebookConfig.for_profile(profile).eval_n
    return WORLD.generate(n, "hard", "test", seed=0)


def load(folder: str):
    """A shipped tiny model (eval mode, one thread) and its tokenizer."""
    torch.set_num_threads(1)
    model, tok, _ = load_policy(config=ModelConfig.for_profile("tiny").replace(name=folder))
    return model.eval(), tok


# ----------------------------------------------------------------------------- exercise 1
def wrong_starts(record: dict) -> list[str]:
    """The starts of a guess line (``Toy 9, book 50: ``) for every pair that is not the answer."""
    shop, total = parse_hard(record["question"])
    (one, _), (other, _) = shop.names
    good = solve_pair(shop, total)
    pairs = [pair for path in split_paths(shop) for pair in path if pair != good]
    return [f"{one.capitalize()} {a}, {other} {b}: " for a, b in pairs]


def finish_greedily(model, tok, prompts: list[str], max_new_tokens: int = 40) -> list[str]:
    """Greedy continuations of ``prompts`` (left-padded, one batch)."""
    tok.padding_side = "left"
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(
            **enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id
        )  # (B, P + T)
    return tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)


def exercise_1(profile: str = "smoke") -> dict:
    """A wrong pair forced into the start of the solution: an honest check, or a bent one?

    The **base** model bends it: made to start ``Toy 9, book 50: `` when 9 + 50 is not the total,
    it almost always still writes ✓ (measured on 50 items x 3 wrong pairs: 146 of 150). Its sum
    is wrong four times in five, often the total itself (``9+50=<<9+50=45>>45. check: 45 vs 45
    ✓``), and it marks ✓ even where the two numbers it compares differ (``check: 46 vs 45 ✓``).
    Pretraining only ever showed checks that pass, so the model learned that a check line ends
    in ✓, not what the comparison means. **After the cold-start SFT** (``data/tinyworld-sft``,
    whose block paths show three failed checks for every passing one) the same start gets the true
    sum and ✗ almost always (137 of 150): the model now computes the check and reports it. That
    honest ✗ is what lets a block keep the one path whose check passes.
    """
    records = items(profile)
    found = {}
    for name, folder in (("base", base_model_dir("tinyworld")), ("sft", WORLD.init("seen"))):
        model, tok = load(folder)
        prompts, rows = [], []
        for record in records:
            for start in wrong_starts(record):
                prompts.append(prompt_text(record["question"], "tiny") + start)
                rows.append((record["question"], start))
        texts = finish_greedily(model, tok, prompts)
        read = [read_guess(q, start + text) for (q, start), text in zip(rows, texts)]
        read = [g for g in read if g is not None]
        found[name] = {
            "forced": len(prompts),
            "read": len(read),
            "check says ✓": sum(g["mark"] == "✓" for g in read) / len(read),
            "sum right": sum(g["sum_right"] for g in read) / len(read),
            "example": prompts[0].rsplit("\n", 1)[-1] + texts[0].splitlines()[0],
        }
    return found


def check_exercise_1(found: dict) -> None:
    for name in ("base", "sft"):
        assert found[name]["read"] >= 0.9 * found[name]["forced"], name  # a guess line each
    assert found["base"]["check says ✓"] > 0.8  # the base bends the check ...
    assert found["sft"]["check says ✓"] < 0.4  # ... the SFT reports the failure
    assert found["sft"]["sum right"] > found["base"]["sum right"]


# ----------------------------------------------------------------------------- exercise 2
def exercise_2(profile: str = "smoke") -> dict:
    """mean@8 and pass@8 of the TinyWorld base on hard items at T = 0.5, 1.0 and 1.5.

    **mean@8 falls** as the temperature rises (measured on 50 items: 42 %, 36 %, 11 %): a flatter
    distribution picks wrong prices and digits more often. **pass@8 first rises, then falls**
    (68 %, 78 %, 58 %): at 0.5 the eight samples are mostly the same guess, so a second candidate
    rarely differs; at 1.5 they differ, but too many are broken. For GRPO a group of 8 samples
    teaches only when it holds a right *and* a wrong answer: an item with no right sample (1 −
    pass@8) gives every sample the same reward and no advantage, and one with only right samples
    neither. Those mixed items (``found[t]["mixed"]``: 52 %, 74 %, 58 %) are most common near
    T = 1, the paper's sampling temperature; at 0.5 more items get eight copies of one guess (all
    right or all wrong), at 1.5 more get no right sample at all.
    """
    model, tok = load(base_model_dir("tinyworld"))
    n = 12 if profile == "smoke" else NotebookConfig.for_profile(profile).eval_n
    found = {"n": n}
    for temperature in (0.5, 1.0, 1.5):
        cfg = EvalConfig(benchmark=WORLD.source("hard"), n=n, k=8, temperature=temperature, seed=0)
        set_seed(0)
        rows = sample_rows(model, tok, cfg)
        numbers = summarize(rows)
        found[temperature] = {
            "mean@8": numbers["accuracy"],
            "pass@8": numbers["pass_at_k"],
            "mixed": sum(0 < sum(r["correct_official"]) < 8 for r in rows) / n,
        }
    return found


def check_exercise_2(found: dict) -> None:
    means = [found[t]["mean@8"] for t in (0.5, 1.0, 1.5)]
    assert means[0] > means[1] > means[2], means
    assert found[1.0]["pass@8"] > found[1.5]["pass@8"]
    assert found[1.0]["pass@8"] >= found[1.0]["mean@8"]


# ----------------------------------------------------------------------------- exercise 3
def held_out_loss(folder, n: int = 32) -> dict[str, float]:
    """Mean solution-token loss of a saved model on ``n`` held-out problems per tier."""
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    with torch.no_grad():
        return {
            tier: model(**encode_batch(tok, generate(n, tier, "test", 0))).loss.item()
            for tier in ("easy", "hard")
        }


def exercise_3(profile: str = "smoke", steps: int | None = None) -> dict:
    """``pretrain-tiny`` with ``hard_fraction=0.5``, against the default 0.2, same steps.

    Each batch now holds half hard problems instead of a fifth, so the model spends more of its
    steps on long multi-step solutions: **hard improves relative to easy, and easy pays** (it
    sees fewer easy problems per step). Here both runs train ``steps`` steps from scratch (the
    smoke sizes, 20 steps: seconds) and are compared on held-out loss per tier: the 0.5 run has
    the higher easy loss and the smaller gap between hard and easy. Any other profile runs the
    full exercise, the tiny sizes for 300 steps (about five minutes each on a laptop CPU), and
    adds each card's ``accuracy``; so does ``python -m pr1lib pretrain-tiny --set
    hard_fraction=0.5 --set max_steps=300``. Compare the two runs, not the shipped 1,100-step
    card, and read a few points' difference against the noise of 200 problems.
    """
    smoke, runs = profile == "smoke", {}
    for share in (0.2, 0.5):
        cfg = PretrainConfig.for_profile(
            "smoke" if smoke else "tiny",
            hard_fraction=share,
            max_steps=steps or (20 if smoke else 300),
        )
        out = runs_dir() / f"00_tiny_world-{profile}" / f"pretrain-hard{int(share * 100)}"
        shutil.rmtree(out, ignore_errors=True)
        card = pretrain(cfg, out, progress=False, evaluate=not smoke)
        loss = held_out_loss(out)
        hard = sum(r["answer"].count("<<") >= 3 for r in step_records(cfg, 0))  # 3-5 steps
        runs[share] = {
            "hard per batch": hard,
            "batch": cfg.batch_size,
            "steps": card["steps"],
            "loss": loss,
            "gap": loss["hard"] - loss["easy"],
            "accuracy": card["accuracy"],
        }
    return runs


def check_exercise_3(found: dict) -> None:
    assert found[0.5]["hard per batch"] == found[0.5]["batch"] // 2
    assert found[0.5]["hard per batch"] > found[0.2]["hard per batch"]
    assert found[0.5]["gap"] < found[0.2]["gap"]  # hard gains on easy ...
    assert found[0.5]["loss"]["easy"] > found[0.2]["loss"]["easy"]  # ... and easy pays


if __name__ == "__main__":
    import sys

    for n in (1, 2, 3):
        print(f"exercise {n}:", globals()[f"exercise_{n}"](*sys.argv[1:2]))

"""Solutions to the exercises of notebook 00 (the tiny world: TinyGSM and the tiny model).

Each ``exercise_N(profile)`` does the exercise and returns what it found; its docstring answers
the question in words. ``check_exercise_N(found)`` states what a right answer must show (the tests
call both). Run them all with ``python solutions/00_tiny_world.py [profile]``.

Exercise 2 samples the project's tiny model (``data/tiny-base``, shipped with the repository)
on every profile: a random model solves nothing, so it could not show a temperature effect.
"""

from __future__ import annotations

import re
import shutil
import statistics
from collections import Counter

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from pr1lib.config import GRPOStageConfig, NotebookConfig, PretrainConfig
from pr1lib.models import load_policy
from pr1lib.paths import runs_dir
from pr1lib.pretrain import encode_batch, generate_solutions, pretrain, score, step_records
from pr1lib.tasks import SPECS, generate

STEP = re.compile(r"<<\d+([-+*/])\d+=\d+>>")
KIND = {"+": "add", "-": "sub", "*": "times", "/": "div"}


def step_kinds(answer: str) -> set[str]:
    """The step kinds of one answer (``pr1lib.tasks``): bags (``bags * each``, then added),
    times (``becomes k times as large``), add, sub, div."""
    kinds, lines = set(), answer.splitlines()[:-1]
    for before, line in zip(["", *lines], lines):
        op = STEP.search(line).group(1)
        bags = line.startswith("The bags hold") or (op == "*" and " buys " in line)
        kinds.add("bags" if bags or before.startswith("The bags hold") else KIND[op])
    return kinds


# ----------------------------------------------------------------------------- exercise 1
def exercise_1(profile: str = "smoke", n: int = 1000) -> dict:
    """1,000 ``hard`` problems: which step kinds make the final answers large?

    The **products**, above all "becomes k times as large" (``times``: the whole pile times up
    to 9), then the bags (``bags * each`` added to the pile). A ``hard`` problem starts at
    10-150 and adds or removes at most 99 per step, so without a product it rarely passes a
    few hundred. The distribution is skewed right, a long tail up to the tier's cap of 999 (an
    event that would pass it is drawn again), and the tail is all products: every answer in the
    largest tenth has one, and the median answer with ``times`` is several times the median
    without any product. Division pulls the other way (``keeps one pile``): its problems have
    the smallest answers. Plot ``found["finals"]`` as a histogram to see the shape.
    """
    finals, by_kind, with_product = [], {k: [] for k in (*KIND.values(), "bags")}, set()
    for i, record in enumerate(generate(n, "hard", "train", seed=0)):
        finals.append(int(record["answer"].rsplit("#### ", 1)[1]))
        kinds = step_kinds(record["answer"])
        for kind in kinds:
            by_kind[kind].append(finals[-1])
        if kinds & {"times", "bags"}:
            with_product.add(i)
    top = sorted(range(n), key=finals.__getitem__)[-n // 10 :]  # the largest tenth
    return {
        "finals": finals,
        "median by kind": {k: statistics.median(v) for k, v in by_kind.items()},
        "median without a product": statistics.median(
            f for i, f in enumerate(finals) if i not in with_product
        ),
        "top tenth with a product": sum(i in with_product for i in top) / len(top),
        "max": max(finals),
        "cap": SPECS["hard"].cap,
        "histogram": Counter(100 * (f // 100) for f in finals),
    }


def check_exercise_1(found: dict) -> None:
    assert len(found["finals"]) == 1000 and found["max"] <= found["cap"]
    med = found["median by kind"]
    assert med["times"] > 2 * found["median without a product"]
    assert med["times"] == max(med.values()) and med["div"] == min(med.values())
    assert found["top tenth with a product"] == 1.0


# ----------------------------------------------------------------------------- exercise 2
def mixed_share(p: float, g: int) -> float:
    """Share of GRPO groups of ``g`` samples with both right and wrong ones, at accuracy ``p``."""
    return 1 - p**g - (1 - p) ** g


def exercise_2(profile: str = "smoke") -> dict:
    """Accuracy of the tiny model at temperature 0.5 and 1.5, and GRPO's mixed groups.

    Accuracy **falls** as the temperature rises: at 0.5 sampling stays close to greedy, at 1.5
    the flattened distribution picks wrong digits and drifts off format, more so on ``hard``
    (more steps to get wrong). What that does to GRPO depends on where accuracy sits: a group of
    G samples has mixed rewards with probability ``1 − p^G − (1 − p)^G``, largest at p = 50 %.
    On ``easy`` (p well above 50 % at T = 0.5) a hotter policy makes **more** groups mixed, so more
    groups carry a learning signal; on ``hard`` where p is already low, heating further pushes
    p toward 0 and **fewer** groups are mixed (all-wrong groups have zero advantage). Both are
    measured here: G samples per problem at each temperature, groups counted directly.
    """
    torch.set_num_threads(1)
    model, tok, _ = load_policy("tiny")
    g = GRPOStageConfig.for_profile(profile).num_generations
    n = 16 if profile == "smoke" else NotebookConfig.for_profile(profile).eval_n
    found = {"G": g, "n": n}
    for tier in ("easy", "hard"):
        records = generate(n, tier, "test", seed=0)
        for temperature in (0.5, 1.5):
            repeated = [r for r in records for _ in range(g)]
            outs = generate_solutions(
                model.eval(),
                tok,
                [r["question"] for r in repeated],
                temperature,
                max_new_tokens=160,
                seed=0,
            )
            right = score(outs, repeated)
            groups = [right[i : i + g] for i in range(0, len(right), g)]
            p = sum(right) / len(right)
            found[(tier, temperature)] = {
                "accuracy": p,
                "expected mixed": mixed_share(p, g),
                "mixed": sum(0 < sum(x) < g for x in groups) / n,
            }
    return found


def check_exercise_2(found: dict) -> None:
    for tier in ("easy", "hard"):
        assert found[(tier, 0.5)]["accuracy"] > found[(tier, 1.5)]["accuracy"], tier
    assert found[("easy", 0.5)]["accuracy"] > 0.5  # the trained model, not a random one
    assert found[("easy", 1.5)]["mixed"] > found[("easy", 0.5)]["mixed"]  # p moves toward 50 %
    assert found[("hard", 1.5)]["mixed"] < found[("hard", 0.5)]["mixed"]  # p moves toward 0


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

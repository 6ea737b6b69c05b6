"""Solutions to the exercises of notebook 04 (cold-start SFT with LoRA).

Each ``exercise_N(profile)`` does the exercise and returns what it found; its docstring answers
the question in words. ``check_exercise_N(found)`` states what a right answer must show (the tests
call both). Run them all with ``python solutions/04_sft_lora.py [profile]``.

Each trains the profile's SFT recipe into its own folder under ``runs/04_sft_lora-<profile>/``.
On ``smoke`` the model has random weights and 4 steps, so its valid block rate and accuracy are
zeros: what is measured there is the mechanism (which rows train, which positions repeat, what
the data teaches). The docstrings say what the tiny profile shows and the command that runs it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from datasets import load_from_disk

from pr1lib.config import ColdStartConfig, SFTStageConfig
from pr1lib.data.coldstart import run_coldstart
from pr1lib.decoding.models import load_training_policy, stage_model_config
from pr1lib.decoding.structure import attention_inputs
from pr1lib.decoding.tokens import tag_similarity
from pr1lib.format.grammar import parse
from pr1lib.format.prompts import chat_prompt
from pr1lib.store.paths import runs_dir
from pr1lib.training import sft
from pr1lib.worlds.teachers import RuleTeacher

QUESTION = "Tom has 3 boxes of 4 apples. How many apples does he have?"
EXAMPLE_BLOCK = "Think in parallel, e.g. <Parallel><Path>3*4</Path><Path>4*3</Path></Parallel>.\n"


def _folder(profile: str, name: str) -> Path:
    out = runs_dir() / f"04_sft_lora-{profile}" / name
    shutil.rmtree(out, ignore_errors=True)
    return out


def _train(cfg: SFTStageConfig, name: str, data: Path | None = None):
    """One SFT run (quiet) into its own folder; ``data`` None builds the cold-start set there."""
    return sft.run_sft(cfg, data, _folder(cfg.profile, name), quiet=True)


# ----------------------------------------------------------------------------- exercise 1
def exercise_1(profile: str = "smoke") -> dict:
    """``train_tag_rows=False``: the six tag rows of the embedding stay where they started.

    With LoRA, only the adapters and (by default) the six tag rows train. Frozen, the tags keep
    their initialisation, the mean of the pieces each tag used to split into, so ``<Path>`` and
    ``</Path>`` (and the other open/close pairs) stay near-copies of each other: their cosine
    similarity in ``tag_similarity`` is exactly the untrained one, while the trained run moves
    them apart. The LoRA adapters must then tell "open a path" from "close it" from almost the
    same input vector, and the **valid block rate falls** (malformed or missing tags). On the
    tiny profile: ``python -m pr1lib sft --profile tiny --variant seen --set
    train_tag_rows=false`` next to the default run.
    """
    cfg = SFTStageConfig.for_profile(profile, variant="seen")
    base, tok, _ = load_training_policy(stage_model_config(cfg), train_tag_rows=False)
    start = tag_similarity(base, tok)
    frozen = _train(cfg.replace(train_tag_rows=False), "exercise-1-frozen")
    trained = _train(cfg, "exercise-1-trained", frozen.run_dir / "coldstart")
    moved = {
        name: (tag_similarity(run.model, run.tokenizer) - start).abs().max().item()
        for name, run in (("frozen", frozen), ("trained", trained))
    }
    return {
        "similarity moved": moved,
        "similarity at start": start.tolist(),
        "valid_block_rate": {
            name: run.result["after"]["valid_block_rate"]
            for name, run in (("frozen", frozen), ("trained", trained))
        },
    }


def check_exercise_1(found: dict) -> None:
    assert found["similarity moved"]["frozen"] < 1e-6  # the rows never moved
    assert found["similarity moved"]["trained"] > 1e-4
    assert max(found["similarity at start"][0][1:]) > 0.5  # the tags start as near-copies


# ----------------------------------------------------------------------------- exercise 2
class BuggyCollator(sft.ParallelCollator):
    """The official bug: the structure is read from token 0, the prompt included."""

    def __call__(self, examples):
        batch = super().__call__(examples)
        extra = attention_inputs(
            batch["input_ids"],
            self.tokenizer,
            self.mode,
            None,
            self.attn_implementation,
            dtype=self.dtype,
        )
        return {**batch, **extra}


def _positions(tok, prompt: str, response: str) -> dict:
    """Prompt-and-response position ids, structure read from the response (right) or token 0."""
    p_ids = tok.encode(prompt, add_special_tokens=False)
    ids = p_ids + tok.encode(response, add_special_tokens=False)
    example = {"input_ids": ids, "labels": [-100] * len(p_ids) + ids[len(p_ids) :]}
    return {
        "tokens": tok.convert_ids_to_tokens(ids),
        "prompt_len": len(p_ids),
        "right": sft.ParallelCollator(tok, "unseen")([example])["position_ids"][0].tolist(),
        "buggy": BuggyCollator(tok, "unseen")([example])["position_ids"][0].tolist(),
    }


def exercise_2(profile: str = "smoke") -> dict:
    """``response_start=None`` with a prompt that shows ``<Parallel>`` and ``<Path>``.

    The prompt's own tags are parsed as a block. In a prompt that shows an example block, the
    second example path restarts at the first one's positions: ``<Path>``, ``4``, ``*``, ``3``,
    ``</Path>`` land **on the same positions as** ``<Path>``, ``3``, ``*``, ``4``, ``</Path>`` of
    the first example path (and the mask hides one from the other), and everything after the
    block, the question and the whole response included, sits that many positions lower. At
    inference the prompt is encoded plainly, positions 0, 1, 2, … with a causal mask, so the
    model was trained on positions it never sees again. Reading the structure from the response
    start gives exactly the plain prompt positions. (The paper's v3 prompt names the tags in
    prose, one ``<Path>`` only; this project's parser restarts positions only at a second path, so
    there the two collators happen to agree.)
    """
    cfg = SFTStageConfig.for_profile(profile, variant="unseen")
    _, tok, _ = load_training_policy(stage_model_config(cfg))
    response = (
        "<Parallel><Path>3*4=12</Path><Path>4+4+4=12</Path></Parallel>\n"
        "<Summary>Both paths give 12.</Summary>\nFinal Answer: 12"
    )
    shown = _positions(tok, EXAMPLE_BLOCK + chat_prompt(QUESTION, tok, "tiny"), response)
    v3 = _positions(tok, chat_prompt(QUESTION, tok, "v3"), response)
    n = shown["prompt_len"]
    same = {}
    for token, pos in zip(shown["tokens"][:n], shown["buggy"][:n]):
        same.setdefault(pos, []).append(token)
    return {
        "same position": {pos: ts for pos, ts in same.items() if len(ts) > 1},
        "right": shown["right"][:n],
        "buggy": shown["buggy"][:n],
        "inference": list(range(n)),
        "response starts at": {"right": shown["right"][n], "buggy": shown["buggy"][n]},
        "v3 prompt unchanged": v3["buggy"][: v3["prompt_len"]] == v3["right"][: v3["prompt_len"]],
    }


def check_exercise_2(found: dict) -> None:
    assert found["right"] == found["inference"]  # the fix: plain positions, as at inference
    assert found["buggy"] != found["inference"]
    assert ["<Path>", "<Path>"] in found["same position"].values()  # the two example paths
    assert found["response starts at"]["buggy"] < found["response starts at"]["right"]
    assert found["v3 prompt unchanged"]


# ----------------------------------------------------------------------------- exercise 3
def _shape(texts: list[str]) -> dict:
    """Share of blocks that open with the reference line (it starts with a word, the other paths
    with a number) and share of summaries restating the calculation (``<<…>>``)."""
    blocks = [b for t in texts for b in parse(t).blocks]
    first = sum(b.paths[0].text.strip()[:1].isalpha() for b in blocks) / len(blocks)
    summaries = re.findall(r"<Summary>(.*?)</Summary>", "\n".join(texts))
    return {
        "reference first": first,
        "calculation summaries": sum("<<" in s for s in summaries) / len(summaries),
    }


def exercise_3(profile: str = "smoke") -> dict:
    """The cold-start set of ``RuleTeacher(original_path="any", summary="value")``, trained seen.

    The data now shuffles the reference line among the paths and ends each block with the bare
    number. Section 7's habits come back in the wrong answers: a **summary that copies whichever
    number came last** (it no longer recomputes the calculation, so a mangled last path passes
    its number on), and paths that **mangle the operands** of the step (the model no longer
    opens with the computation it already knows). On the tiny profile section 7's table gives
    the price in accuracy; to read them, run this with ``profile="tiny"`` and print
    ``found["wrong"]``. On ``smoke`` the model is random, so every answer is wrong for no reason
    and only the data shows the change.
    """
    cfg = SFTStageConfig.for_profile(profile, variant="seen")
    folder = _folder(profile, "exercise-3-coldstart")
    teacher = RuleTeacher(seed=cfg.seed, original_path="any", summary="value")
    config = ColdStartConfig.for_profile(
        profile, seed=cfg.seed, source="tinygsm-easy", limit=cfg.train_n
    )
    built = run_coldstart(config, folder, teacher=teacher)
    texts = [row["completion"] for row in built.dataset]
    default = [t["text"] for t in RuleTeacher(seed=cfg.seed).generate(built.kept) if t["text"]]
    run = _train(cfg, "exercise-3-seen", folder)
    wrong = [s for s in run.samples["after"] if s["gold"] not in s["completion"]][:10]
    return {
        "teacher": teacher.name,
        "rows": len(texts),
        "trained rows": run.result["train_rows"],
        "changed teacher": _shape(texts),
        "default teacher": _shape(default),
        "wrong": wrong,
    }


def check_exercise_3(found: dict) -> None:
    changed, default = found["changed teacher"], found["default teacher"]
    assert found["trained rows"] == found["rows"] > 0
    assert default["reference first"] == 1.0 and changed["reference first"] < 0.8
    assert default["calculation summaries"] == 1.0 and changed["calculation summaries"] == 0.0


# ----------------------------------------------------------------------------- exercise 4
def exercise_4(profile: str = "smoke") -> dict:
    """``loss_reduction="token"`` against the default ``"sample"``.

    ``"sample"`` averages each row's tokens, then the rows: every row weighs 1/B, so a token of a
    short row counts more than a token of a long one. ``"token"`` averages all tokens of the
    batch: a row weighs its share of the tokens, so **long rows weigh more**. With rows of
    similar length the two curves nearly coincide; the difference matters when lengths vary a
    lot (GSM8K traces next to DAPO ones, or many blocks against none): ``"token"`` then trains
    mostly on the long traces and ``"sample"`` keeps the short ones in the gradient.
    """
    cfg = SFTStageConfig.for_profile(profile, variant="seen")
    runs = {"sample": _train(cfg, "exercise-4-sample")}
    runs["token"] = _train(
        cfg.replace(loss_reduction="token"),
        "exercise-4-token",
        runs["sample"].run_dir / "coldstart",
    )
    data = load_from_disk(str(runs["sample"].run_dir / "coldstart" / "dataset"))
    tok = runs["sample"].tokenizer
    lengths = [
        len(tok.encode(c, add_special_tokens=False))
        for c in data["completion"][: cfg.per_device_train_batch_size]
    ]
    weights = {
        "sample": [1 / len(lengths)] * len(lengths),
        "token": [n / sum(lengths) for n in lengths],
    }
    return {
        "lengths": lengths,
        "row weights": weights,
        "curves": {k: [r["loss"] for r in run.rows] for k, run in runs.items()},
    }


def check_exercise_4(found: dict) -> None:
    lengths, w = found["lengths"], found["row weights"]
    longest, shortest = lengths.index(max(lengths)), lengths.index(min(lengths))
    assert max(lengths) > min(lengths)
    assert w["token"][longest] > w["sample"][longest] and w["token"][shortest] < w["sample"][0]
    sample, token = found["curves"]["sample"], found["curves"]["token"]
    assert len(sample) == len(token) > 1 and sample != token  # same data, other weighting
    assert sample[-1] < sample[0] and token[-1] < token[0]


# ----------------------------------------------------------------------------- exercise 5
def exercise_5(profile: str = "smoke") -> dict:
    """``plain_share=0.5``: half the traces lose their block.

    Prediction: the sampled ratio (T = 1) lands near the data's share, about half the answers
    open a block, because SFT fits the distribution. Greedy decoding does not: at the token
    where a block may open it takes whichever is likelier, the same way on most problems, so
    the **greedy parallel ratio goes to an extreme** (near 0 or near 1, whichever side of 50 %
    the model's opening probability falls on) rather than to 50 %. That is why notebook 06
    samples at T = 1 for the rewards, and why a reward ablation from such a checkpoint starts
    with room to move both ways. Here: the training set's split, and both ratios after SFT
    (zeros on ``smoke``: the random model never opens a block).
    """
    cfg = SFTStageConfig.for_profile(profile, variant="seen", plain_share=0.5)
    run = _train(cfg, "exercise-5")
    data = sft.with_plain_share(
        load_from_disk(str(run.run_dir / "coldstart" / "dataset")), cfg.plain_share, cfg.seed
    )
    plain = [c for c, keep in zip(data["completion"], data["parallel"]) if not keep]
    after = run.result["after"]
    return {
        "rows": len(data),
        "plain rows": len(plain),
        "plain rows with tags": sum("<Parallel>" in c or "<Summary>" in c for c in plain),
        "plain rows with an answer": sum("Final Answer:" in c for c in plain),
        "parallel_ratio (T = 1)": after["parallel_ratio"],
        "parallel_ratio (greedy)": after["greedy"]["parallel_ratio"],
    }


def check_exercise_5(found: dict) -> None:
    assert found["plain rows"] == round(0.5 * found["rows"]) > 0
    assert found["plain rows with tags"] == 0
    assert found["plain rows with an answer"] == found["plain rows"]
    assert 0 <= found["parallel_ratio (greedy)"] <= 1 and 0 <= found["parallel_ratio (T = 1)"] <= 1


if __name__ == "__main__":
    import sys

    for n in (1, 2, 3, 4, 5):
        print(f"exercise {n}:", globals()[f"exercise_{n}"](*sys.argv[1:2]))

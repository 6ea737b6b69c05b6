"""Solutions to the exercises of notebook 03 (seen versus unseen: masks, positions, decoding).

Each ``exercise_N(profile)`` does the exercise and returns what it found; its docstring answers
the question in words. ``check_exercise_N(found)`` states what a right answer must show (the tests
call both). Run them all with ``python solutions/03_seen_vs_unseen.py [profile]``.

Like the notebook, they use TinyWorld's shipped SFTs on the tiny and smoke profiles (the unseen
one for exercises 1-3, both for exercise 4) and a TinyWorld teacher trace of an easy item.
"""

from __future__ import annotations

import torch

from pr1lib import worlds
from pr1lib.config import ModelConfig, NotebookConfig
from pr1lib.data.sources import load_world
from pr1lib.decoding.structure import allowed_mask, attention_inputs, parse, structure_tensors
from pr1lib.evaluation.evaluate import load_for_eval
from pr1lib.experiments.blockcost import sample
from pr1lib.format.grammar import parse as parse_response
from pr1lib.format.prompts import chat_prompt
from pr1lib.store.paths import REPO_ROOT
from pr1lib.worlds.tinyworld import parse_hard, read_guess

WORLD = worlds.get("tinyworld")
# an easy TinyWorld item and its teacher trace (two paths, the second with the sum swapped)
QUESTION = (
    "Cakes cost 8 or 5 coins. Drinks cost 38 or 69 coins. Leo buys the 8-coin cake and the "
    "38-coin drink. How many coins does he pay?"
)
TWO_PATHS = (
    "<Parallel><Path>8+38=<<8+38=46>>46 coins.</Path><Path>38+8=<<38+8=46>>46 coins.</Path>"
    "</Parallel>\n<Summary>Both paths give 46.</Summary>\nFinal Answer: 46"
)
THREE_PATHS = (
    "<Parallel><Path>8+38=<<8+38=46>>46 coins.</Path><Path>38+8=<<38+8=46>>46 coins.</Path>"
    "<Path>46</Path></Parallel>\n<Summary>All paths give 46.</Summary>\nFinal Answer: 46"
)


def setup(profile: str, variant: str = "unseen"):
    """The notebook's model (eval mode, one thread, tags as tokens): TinyWorld's shipped SFT of
    ``variant`` on the tiny and smoke profiles, the profile's model on colab and paper."""
    torch.set_num_threads(1)
    tiny = NotebookConfig.for_profile(profile).world is not None
    start = REPO_ROOT / WORLD.init(variant) if tiny else ModelConfig.for_profile(profile).name
    return load_for_eval(start, profile, say=lambda *_: None)


def encode(tok, response: str, profile: str) -> tuple[list[int], int]:
    """Prompt + response ids and where the response starts."""
    prompt = chat_prompt(QUESTION, tok, ModelConfig.for_profile(profile).prompt_style)
    prompt_ids = tok.encode(prompt, add_special_tokens=False)
    return prompt_ids + tok.encode(response, add_special_tokens=False), len(prompt_ids)


def by_hand(tokens, start):
    """The notebook's section-4 rule, unchanged: (mask, positions) of one block."""
    path, pos = [], []
    current, n_paths, p, base, top = -1, 0, 0, 0, 0
    for i, t in enumerate(tokens):
        if i >= start and t == "<Path>":
            current, n_paths, p = n_paths, n_paths + 1, base
        elif i >= start and t == "</Parallel>":
            p = top + 1
        path.append(current)
        pos.append(p)
        top, p = max(top, p), p + 1
        if i >= start and t == "<Parallel>":
            base = p
        if t == "</Path>":
            current = -1
    sibling = lambda q, k: path[q] >= 0 and path[k] >= 0 and path[q] != path[k]  # noqa: E731
    mask = [[k <= q and not sibling(q, k) for k in range(len(tokens))] for q in range(len(tokens))]
    return torch.tensor(mask), pos


# ----------------------------------------------------------------------------- exercise 1
def exercise_1(profile: str = "smoke") -> dict:
    """Three paths: ``by_hand`` still agrees with ``pr1lib.decoding.structure``, cell for cell.

    The hidden cells ("orange") are now **three rectangles**, one per pair of sibling paths:
    path 2's rows lose path 1's columns, and path 3's rows lose the columns of path 1 *and* of
    path 2 (a later path never sees any earlier sibling; an earlier one never saw a later one
    anyway, by causality). Each rectangle is full: every token of the later path loses every
    token of the earlier one.

    ``</Parallel>`` lands at ``pos(<Parallel>) + 1 + the longest path's length`` (tags
    included): every path restarted at ``pos(<Parallel>) + 1``, and the text after the block
    continues right after the end of the **longest** path, whichever one it is, not after the
    last one.
    """
    _, tok = setup(profile)
    ids, start = encode(tok, THREE_PATHS, profile)
    x = torch.tensor([ids])
    st = structure_tensors(x, tok, "unseen", [start])
    unseen = allowed_mask(st["block"], st["path"], st["valid"])[0]
    seen_st = structure_tensors(x, tok, "seen", [start])
    seen = allowed_mask(seen_st["block"], seen_st["path"], seen_st["valid"])[0]
    mine_mask, mine_pos = by_hand(tok.convert_ids_to_tokens(ids), start)
    hidden = seen & ~unseen  # (L, L): the cells "unseen" removes
    spans = [(a, b) for _, a, b in parse(ids, tok, start).spans()]
    rectangles = {
        f"path {i + 1} rows x path {j + 1} columns": int(hidden[a:b, c:d].sum())
        for i, (a, b) in enumerate(spans)
        for j, (c, d) in enumerate(spans)
        if hidden[a:b, c:d].any()
    }
    full = sum(
        (b - a) * (d - c)
        for i, (a, b) in enumerate(spans)
        for j, (c, d) in enumerate(spans)
        if j < i
    )
    positions = st["position_ids"][0].tolist()
    open_at = ids.index(tok.convert_tokens_to_ids("<Parallel>"), start)
    close_at = ids.index(tok.convert_tokens_to_ids("</Parallel>"), start)
    return {
        "agrees": bool(torch.equal(mine_mask, unseen)) and mine_pos == positions,
        "rectangles": rectangles,
        "hidden_cells": int(hidden.sum()),
        "full_rectangles": full,
        "path_lengths": [b - a for a, b in spans],
        "parallel_position": positions[open_at],
        "close_position": positions[close_at],
    }


def check_exercise_1(found: dict) -> None:
    assert found["agrees"]
    assert sorted(found["rectangles"]) == [
        "path 2 rows x path 1 columns",
        "path 3 rows x path 1 columns",
        "path 3 rows x path 2 columns",
    ]
    assert found["hidden_cells"] == found["full_rectangles"]  # nothing else is hidden
    lengths = found["path_lengths"]
    assert lengths.index(max(lengths)) != len(lengths) - 1  # the longest path is not the last
    assert found["close_position"] == found["parallel_position"] + 1 + max(lengths)


# ----------------------------------------------------------------------------- exercise 2
def logits(model, tok, ids: list[int], start: int, mode: str) -> torch.Tensor:
    x = torch.tensor([ids], device=model.device)  # (1, L)
    with torch.no_grad():
        out = model(
            input_ids=x,
            use_cache=False,
            **attention_inputs(x, tok, mode, [start], dtype=model.dtype),
        )
    return out.logits[0].float().cpu()  # (L, V)


def exercise_2(profile: str = "smoke") -> dict:
    """Rewrite the **second** path instead of the first.

    Under both masks the prompt and the **first path do not move at all** (Δ = 0 up to float
    rounding), and the summary and everything after it move. The first path is unaffected even
    under "seen" because attention is causal: a token only ever reads tokens *before* it, and the
    second path comes after the first. "Unseen" adds nothing here; it only matters for a path
    that comes later than a sibling. The summary moves under either mask because it reads every
    path.
    """
    model, tok = setup(profile)
    ids, start = encode(tok, TWO_PATHS, profile)
    (_, a1, b1), (_, a2, b2) = parse(ids, tok, start).spans()
    new_path = tok.encode("I am not sure, maybe 7+7=14, or 99.", add_special_tokens=False)
    edited = ids[: a2 + 1] + new_path + ids[b2 - 1 :]  # keep <Path> and </Path>
    shift = len(edited) - len(ids)
    parts = {
        "prompt": (slice(0, start), slice(0, start)),
        "first path": (slice(a1, b1), slice(a1, b1)),
        "summary and after": (slice(b2, None), slice(b2 + shift, None)),
    }
    table = {}
    for mode in ("seen", "unseen"):
        before = logits(model, tok, ids, start, mode)
        after = logits(model, tok, edited, start, mode)
        table[mode] = {
            name: (before[o] - after[e]).abs().max().item() for name, (o, e) in parts.items()
        }
    return table


def check_exercise_2(found: dict) -> None:
    for mode in ("seen", "unseen"):
        assert found[mode]["prompt"] < 1e-5 and found[mode]["first path"] < 1e-5, mode
        assert found[mode]["summary and after"] > 1e-3, mode


# ----------------------------------------------------------------------------- exercise 3
def exercise_3(profile: str = "smoke") -> dict:
    """Unseen ``position_ids`` with only a 2D mask of ones: what did transformers do?

    It used the positions as given and built its **ordinary causal mask**. So the second path
    reads the first path again (as under "seen"), but at colliding positions: both paths sit on
    the same position ids, so the second path sees tokens of the first at distance zero or
    "in the future". The result is neither variant: its logits differ from the unseen forward
    and from the seen one, and rewriting the first path moves them (the invariance of
    section 6 is gone).

    With **no mask at all** it is worse in another way: transformers reads every restart of the
    position ids as the start of a new *packed* sequence and isolates it. The second path then
    sees only itself, not even the prompt: its logits equal a forward of the path's tokens
    alone. That is why ``pr1lib.decoding.structure`` always hands the 4D mask over together with the
    positions.
    """
    model, tok = setup(profile)
    ids, start = encode(tok, TWO_PATHS, profile)
    (_, a1, b1), (_, a2, b2) = parse(ids, tok, start).spans()
    new_path = tok.encode("I am not sure, maybe 7+7=14, or 99.", add_special_tokens=False)
    edited = ids[: a1 + 1] + new_path + ids[b1 - 1 :]
    shift = len(edited) - len(ids)

    def forward(seq, how):
        x = torch.tensor([seq])
        unseen = attention_inputs(x, tok, "unseen", [start], dtype=model.dtype)
        kwargs = {
            "ones": {"attention_mask": torch.ones_like(x), "position_ids": unseen["position_ids"]},
            "none": {"position_ids": unseen["position_ids"]},
            "unseen": unseen,
            "seen": attention_inputs(x, tok, "seen", [start], dtype=model.dtype),
        }[how]
        with torch.no_grad():
            return model(input_ids=x, use_cache=False, **kwargs).logits[0].float()

    second = slice(a2, b2)
    ones, none = forward(ids, "ones")[second], forward(ids, "none")[second]
    with torch.no_grad():
        alone = model(input_ids=torch.tensor([ids[a2:b2]])).logits[0].float()
    moved = forward(edited, "ones")[a2 + shift : b2 + shift]
    gap = lambda u, v: (u - v).abs().max().item()  # noqa: E731
    return {
        "ones vs unseen": gap(ones, forward(ids, "unseen")[second]),
        "ones vs seen": gap(ones, forward(ids, "seen")[second]),
        "ones: first path rewritten": gap(ones, moved),
        "none vs the path alone": gap(none, alone),
    }


def check_exercise_3(found: dict) -> None:
    assert found["ones vs unseen"] > 1e-3 and found["ones vs seen"] > 1e-3
    assert found["ones: first path rewritten"] > 1e-3  # the invariance is lost
    assert found["none vs the path alone"] < 1e-3  # packed: cut off from everything (float noise)


# ----------------------------------------------------------------------------- exercise 4
def kind(first: list, listed: list) -> str:
    """The notebook's section-7 rule: how a block's two paths share the search."""
    if len(first) != 2 or None in first:
        return "no two priced paths"
    return "split" if sorted(first) == listed else "collided" if first[0] == first[1] else "other"


def block_kinds(model, tok, profile: str, mode: str) -> dict[str, int]:
    """One forced block per held-out hard item, decoded in ``mode``: how its paths started."""
    n = 12 if profile == "smoke" else NotebookConfig.for_profile(profile).eval_n
    hard = load_world(WORLD.source("hard"), n, "test", seed=0)
    style = ModelConfig.for_profile(profile).prompt_style
    prompts = [chat_prompt(p["question"], tok, style) for p in hard]
    texts = [s[0] for s in sample(model, tok, prompts, 1, True, mode, seed=0, **WORLD.budgets)]
    counts: dict[str, int] = {}
    for p, text in zip(hard, texts):
        blocks = parse_response(text).blocks
        firsts = [
            (read_guess(p["question"], q.text) or {}).get("pair", (None,))[0]
            for q in (blocks[0].paths if blocks else [])
        ]
        label = kind(firsts, sorted(parse_hard(p["question"])[0].prices[0]))
        counts[label] = counts.get(label, 0) + 1
    return counts


def exercise_4(profile: str = "smoke") -> dict:
    """The **seen** SFT's paths, decoded in ``seen`` mode and ``forked``: how often they collide.

    Measured on 50 held-out hard items: 50 split in ``seen`` mode, 50 collided ``forked``.

    In **seen** mode the seen SFT's paths do not collide: path 2 is written after path 1, in
    the same stream, and takes the cheap price path 1 did not, exactly as the teacher's traces did
    (the block splits the search). **Forked**, the same model always collides: it learned to
    write path 2 *reading* path 1, and blind to it, path 2 starts as a first path would, with the
    question's first price, the same one path 1 took. The unseen SFT, trained blind, sits in
    between (about half in the notebook): it learned to pick a price without the other path, so
    its two picks are independent. Only the seen variant, decoded seen, gets the split for free;
    numbered paths (``path_headers``) are how the unseen variant could get it back.
    """
    model, tok = setup(profile, "seen")
    return {mode: block_kinds(model, tok, profile, mode) for mode in ("seen", "forked")}


def check_exercise_4(found: dict) -> None:
    share = {
        mode: counts.get("collided", 0) / max(1, sum(counts.values()))
        for mode, counts in found.items()
    }
    assert share["seen"] < 0.25 < 0.75 < share["forked"], share


if __name__ == "__main__":
    import sys

    for n in (1, 2, 3, 4):
        print(f"exercise {n}:", globals()[f"exercise_{n}"](*sys.argv[1:2]))

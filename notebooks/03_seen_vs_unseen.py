# %% [markdown]
# # 03 · Seen versus unseen: masks, positions and parallel decoding
#
# **Goal:** see on one real response exactly what the "unseen" structure changes, prove its key
# property on the model's logits, watch a model trained with it decode two paths that cannot see
# each other, and measure what forking buys at decoding time.
#
# You will learn
# - how the two attention masks and the two sets of position ids look, token by token, on a
#   TinyWorld teacher trace (and how to build them yourself in a dozen lines);
# - why, under "unseen", a path's predictions do not depend on its sibling paths at all, while the
#   summary depends on every path;
# - what the shipped unseen TinyWorld SFT writes when its two paths are decoded side by side, and
#   what it cannot know because of that;
# - why forked paths decode as k rows of one batch from the prompt's cache, and how much faster
#   that is than decoding them one after another.
#
# Terms: [glossary](../docs/glossary.md) · the whole recipe in one picture:
# [docs/recipe.md](../docs/recipe.md)
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/pr1-tutorial/pr1/blob/main/notebooks/03_seen_vs_unseen.ipynb)

# %% tags=["parameters"]
PROFILE = None  # smoke | tiny | colab | paper (None: $PR1_PROFILE or auto)
SEED = 0

# %% [markdown]
# *On Colab (or anywhere `pr1lib` is not installed) the next cell fetches this repository and
# installs it; elsewhere it does nothing. On Colab, mount Google Drive first (Files ▸ Mount
# Drive) to keep your runs when the VM is recycled: they then go to `MyDrive/pr1-runs`, and
# rerunning a notebook resumes from its last checkpoint.*

# %%
REPO_URL, BRANCH = "https://github.com/pr1-tutorial/pr1", "main"  # a fork: `make repo-url URL=...`
import importlib.util
import os
import subprocess
import sys


class SetupStopped(Exception):  # shown as its one line, not as a traceback
    def _render_traceback_(self):
        return [f"Setup stopped: {self}"]


def quiet(*command):  # True when the command succeeded; git never waits for a password
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
    return subprocess.run(command, capture_output=True, env=env).returncode == 0


if importlib.util.find_spec("pr1lib") is None:  # Colab, or not installed
    print(f"installing pr1lib from {REPO_URL} (a few minutes) ...")
    if not (os.path.isdir("pr1") or quiet("git", "clone", "-q", "--depth", "1",
                                          "--branch", BRANCH, REPO_URL, "pr1")):
        raise SetupStopped(f"could not clone {REPO_URL}: no network, or "
                           "no such repository or branch (a fork: set REPO_URL)")
    if not quiet(sys.executable, "-m", "pip", "install", "-q", "-e",
                 "pr1[colab]"):
        raise SetupStopped("pip could not install ./pr1 (to see why: "
                           "pip install -e 'pr1[colab]')")
    sys.path.insert(0, os.path.abspath("pr1"))

# %%
from pr1lib.config.runtime import start_notebook

PROFILE = start_notebook(PROFILE, SEED)  # check the profile, seed everything, print versions

# %% [markdown]
# ## 1. One real response
#
# TinyWorld's rule teacher (notebook 02) writes a `<Parallel>` block for every item: on a hard item
# two paths that split a search (about 200 tokens, too many to read one by one), on an easy item two
# paths that solve the same item two ways, then a `<Summary>`. For the token-level pictures we take
# the **shortest** easy trace among a few hundred held-out problems, so every token fits on the axes
# of a heatmap; section 7 decodes hard blocks. The model is TinyWorld's shipped unseen SFT
# (`data/tinyworld-sft-unseen`, trained with this notebook's mask; on `colab` and `paper` the
# profile's model, with the six tags added).

# %%
import pandas as pd
import torch
import transformers

from pr1lib import worlds
from pr1lib.config import ModelConfig, NotebookConfig
from pr1lib.data.sources import load_world
from pr1lib.evaluation.evaluate import load_for_eval
from pr1lib.format.grammar import validate
from pr1lib.format.prompts import chat_prompt
from pr1lib.store.paths import REPO_ROOT

transformers.utils.logging.disable_progress_bar()
# models this small run as fast on one thread, and far steadier on a busy CPU
torch.set_num_threads(1)
NB = NotebookConfig.for_profile(PROFILE)  # this notebook's sizes (pr1lib.config presets)
WORLD = worlds.get(NB.world or "tinyworld")
MODEL_CFG = ModelConfig.for_profile(PROFILE)
START = REPO_ROOT / WORLD.init("unseen") if NB.world else MODEL_CFG.name  # colab, paper: Qwen
model, tok = load_for_eval(START, PROFILE)  # eval mode, the tags added where missing
STYLE = MODEL_CFG.prompt_style


def teacher_examples(n, split="test"):
    """(prompt, response) pairs: rule-teacher traces with one strictly valid two-path block."""
    problems = load_world(WORLD.source("easy"), n, split, seed=SEED)
    traces = WORLD.rule_teacher(seed=SEED).generate(problems)
    return [(chat_prompt(p["question"], tok, STYLE), t["text"]) for p, t in zip(problems, traces)
            if not t["error"] and t["text"].count("<Path>") == 2 and not validate(t["text"])]


examples = teacher_examples(300)
prompt, response = min(
    examples, key=lambda e: len(tok.encode(e[0] + e[1], add_special_tokens=False))
)
print(prompt + response)

# %% [markdown]
# The structure is read from token ids. `structure_tensors` labels every token with its position id,
# its block and its path (−1 outside paths), starting at `response_start` so that nothing in the
# prompt is ever parsed as structure. `allowed_mask` turns the labels into the `(L, L)` mask: rows
# are queries (the token being computed), columns are keys (what it may look at).

# %%
from pr1lib.decoding.structure import allowed_mask, parse, structure_tensors
from pr1lib.notebook import plots

prompt_ids = tok.encode(prompt, add_special_tokens=False)
ids = torch.tensor([prompt_ids + tok.encode(response, add_special_tokens=False)])  # (1, L)
START = len(prompt_ids)
view = {}
for mode in ("seen", "unseen"):
    st = structure_tensors(ids, tok, mode, [START])
    view[mode] = {**st, "allowed": allowed_mask(st["block"], st["path"], st["valid"])[0]}  # (L, L)
spans = parse(ids[0].tolist(), tok, START).spans()  # [(block, start, end)] per path
labels = plots.token_labels([tok.decode([t]) for t in ids[0].tolist()])
W = slice(START - 3, ids.shape[1])  # the response, plus the last prompt tokens
print(f"{ids.shape[1]} tokens, numbered 0-{ids.shape[1] - 1}: prompt 0-{START - 1}, response "
      f"{START}-{ids.shape[1] - 1}; path spans {spans}")

# %% [markdown]
# ## 2. The two masks
#
# **Seen** is the ordinary causal triangle: every token sees everything before it, so the second
# path can read the first. The figure shows the response and the last three prompt tokens; hover
# over a cell to read the query and the key. One numbering holds in every figure, table and widget
# of this notebook: a token's index in the whole sequence, prompt included (the line above gives
# the ranges), so a figure that starts three tokens before the response numbers its first token by
# that index, not 0 (under "seen" a token's index is also its position id).

# %% tags=["report"]
plots.mask_heatmap(view["seen"]["allowed"][W, W], labels[W], "Seen: plain causal attention",
                   first=W.start).show()

# %% [markdown]
# **Unseen** removes exactly one rectangle: the rows of the second path lose the columns of the
# first (orange). A path span runs from `<Path>` to `</Path>`, both included. Everything after the
# paths, `</Parallel>`, the summary and the final answer, sees both paths again.

# %% tags=["report"]
plots.mask_heatmap(
    view["unseen"]["allowed"][W, W],
    labels[W],
    "Unseen: sibling paths hidden from each other",
    compare=view["seen"]["allowed"][W, W],
    first=W.start,
).show()

# %% [markdown]
# ## 3. The position ids
#
# Seen counts 0, 1, 2, … Unseen restarts every path at `pos(<Parallel>) + 1`, and the first token
# after the paths (`</Parallel>`) continues from the longest path's end + 1. With rotary embeddings
# only relative distances matter, so each path sees the prompt at exactly the distances it would see
# if it were the only path. That is what makes decoding the paths separately exact (section 6).

# %% tags=["report"]
positions = {m: view[m]["position_ids"][0, W].tolist() for m in ("seen", "unseen")}
plots.positions_figure(positions, labels[W], view["unseen"]["path"][0, W].tolist(),
                       "Position ids: seen counts on, unseen restarts each path",
                       first=W.start).show()

# %%
from pr1lib.decoding.structure import tag_ids

tags = [i for i, t in enumerate(ids[0].tolist()) if t in tag_ids(tok)[:6]]
pd.DataFrame({"token": [labels[i] for i in tags], "index": tags,
              "position (seen)": [view["seen"]["position_ids"][0, i].item() for i in tags],
              "position (unseen)": [view["unseen"]["position_ids"][0, i].item() for i in tags],
              "path": [view["unseen"]["path"][0, i].item() for i in tags]}).set_index("token").T

# %% [markdown]
# ## 4. From scratch: both rules in a dozen lines
#
# For one block the whole rule fits in one loop over the token strings: remember which path each
# token is in, restart the position counter at every `<Path>`, jump past the longest path at
# `</Parallel>`, and forbid a key when query and key sit in different paths. The library version
# also handles several blocks, truncated rollouts and malformed input, but on this trace the two
# must agree.

# %%
def by_hand(tokens, start):
    """(mask, positions) of a response with one block; tokens before ``start`` are plain text."""
    path, pos = [], []
    current, n_paths, p, base, top = -1, 0, 0, 0, 0
    for i, t in enumerate(tokens):
        if i >= start and t == "<Path>":
            current, n_paths, p = n_paths, n_paths + 1, base  # every path restarts at base
        elif i >= start and t == "</Parallel>":
            p = top + 1  # continue after the longest path
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


mine_mask, mine_pos = by_hand(tok.convert_ids_to_tokens(ids[0].tolist()), START)

# %% tags=["report"]
assert torch.equal(mine_mask, view["unseen"]["allowed"])
assert mine_pos == view["unseen"]["position_ids"][0].tolist()
print(
    f"by_hand agrees with pr1lib.decoding.structure on all {ids.shape[1]}² mask cells and "
    f"{ids.shape[1]} positions"
)

# %% [markdown]
# ## 5. Pick a token, see what it attends to
#
# The same row of the mask, laid out like text: red is the chosen token, blue what it attends to,
# orange the earlier tokens it may **not** see. The static figure shows the first token inside the
# second path under "unseen": it sees the prompt, `<Parallel>` and its own `<Path>`, and nothing of
# the first path.

# %% tags=["report"]
FOCUS = spans[1][1] + 1  # the first token inside the second path
plots.attends_to_figure(view["unseen"]["allowed"], labels, FOCUS).show()

# %% [markdown]
# In Jupyter, use the widget below: pick the mask and move the slider over the tokens. (In a
# headless run, such as the tour or the tests, it has no frontend to draw in; the figure above
# stands in.)

# %%
plots.attention_explorer({m: view[m]["allowed"] for m in ("unseen", "seen")}, labels, FOCUS)

# %% [markdown]
# ## 6. The invariance, live
#
# The property that matters: under "unseen", **nothing** in the first path can change what the model
# predicts inside the second path. We rewrite the first path (a different text of a different
# length), run the model on both sequences under both masks, and compare the logits row by row,
# aligning each part of the sequence by its span. Under "seen" the second path reads the first, so
# its logits move; under "unseen" they must not move at all (up to float rounding). The summary
# reads both paths under either mask, so it moves in both.

# %%
from pr1lib.decoding.structure import attention_inputs

TOL = 1e-4 if model.dtype == torch.float32 else 5e-2  # half precision rounds differently per shape


def logits_of(seq, mode):
    x = torch.tensor([seq], device=model.device)  # (1, L)
    with torch.no_grad():
        out = model(
            input_ids=x,
            use_cache=False,
            **attention_inputs(x, tok, mode, [START], dtype=model.dtype),
        )
    return out.logits[0].float().cpu()  # (L, V)


(_, a1, b1), (_, a2, b2) = spans
original = ids[0].tolist()
new_path = tok.encode("I am not sure, maybe 7+7=14, or 99.", add_special_tokens=False)
edited = original[: a1 + 1] + new_path + original[b1 - 1:]  # keep <Path> and </Path>
shift = len(edited) - len(original)
parts = {"prompt": (slice(0, START), slice(0, START)),
         "second path": (slice(a2, b2), slice(a2 + shift, b2 + shift)),
         "summary and after": (slice(b2, None), slice(b2 + shift, None))}
rows = {}
for mode in ("seen", "unseen"):
    before, after = logits_of(original, mode), logits_of(edited, mode)
    rows[mode] = {name: (before[o] - after[e]).abs().max().item() for name, (o, e) in parts.items()}
invariance = pd.DataFrame(rows).rename(columns=lambda m: f"max |Δ logit|, {m}")
print(f"first path rewritten: {b1 - a1} -> {b1 - a1 + shift} tokens")

# %% tags=["report"]
assert invariance.loc["second path", "max |Δ logit|, unseen"] < TOL
assert invariance.loc["second path", "max |Δ logit|, seen"] > 10 * TOL
assert (invariance.loc["summary and after"] > 10 * TOL).all()
invariance.style.format("{:.1e}")

# %% [markdown]
# You should see: the second path's max |Δ logit| below `TOL` (1e-4 in fp32) unseen, above it
# seen; and the summary's well above it, even unseen, because the summary reads both paths.

# %%
from pr1lib.notebook.expect import should_see

SEEN, UNSEEN = (f"max |Δ logit|, {mode}" for mode in ("seen", "unseen"))
second = invariance.loc["second path"]
summary = invariance.loc["summary and after"]
should_see("second path max |Δ logit|, unseen", second[UNSEEN], PROFILE)
should_see("second path max |Δ logit|, seen", second[SEEN], PROFILE)
should_see("summary max |Δ logit|, unseen", summary[UNSEEN], PROFILE)
assert second[UNSEEN] < TOL < second[SEEN], second  # the invariance itself

# %% [markdown]
# The same fact, read the other way: the second path's logits in the full unseen forward equal those
# of a plain causal forward over **the prompt and that path alone** — no mask, no first path,
# ordinary positions. That is exactly what a decoder computes when it forks the prompt's cache and
# decodes the second path as its own row.

# %%
alone = original[: a1] + original[a2:b2]  # prompt + <Parallel> + the second path
with torch.no_grad():
    # (n, V)
    plain = model(input_ids=torch.tensor([alone], device=model.device)).logits[0, a1:].float().cpu()
gap = (plain - logits_of(original, "unseen")[a2:b2]).abs().max().item()
print(
    f"second path: unseen full forward vs decoded alone after the prompt, max |Δ logit| = {gap:.1e}"
)
assert gap < TOL

# %% [markdown]
# ## 7. Two paths decoded side by side
#
# That equality is how the unseen variant decodes. `pr1lib.decoding.rollout` in `forked` mode runs
# the trunk until `<Parallel>`, forks the row into two rows from its cache, lets each path decode on
# its own (neither sees the other, exactly as the mask says), then merges them for the summary.
# Below, the shipped unseen SFT answers held-out **hard** items, made to open its block at once (the
# block-cost study's forced block, `pr1lib.experiments.blockcost.sample`), at T = 1. The teacher's
# block splits the search: path 1 tries the first cheap price of the question, path 2 the second.
# (On `colab` and `paper` the profile's model has not learned TinyWorld: read this section on
# `tiny`.) Which cheap price does each of the model's paths start from? `read_guess` (notebook 00)
# reads each path's first guess line back:

# %%
from pr1lib.evaluation.metrics import completion_metrics
from pr1lib.experiments.blockcost import sample
from pr1lib.format.grammar import parse as parse_response
from pr1lib.worlds.tinyworld import parse_hard, read_guess

hard = load_world(WORLD.source("hard"), NB.eval_n, "test", seed=SEED)
prompts = [chat_prompt(p["question"], tok, STYLE) for p in hard]
forked = [s[0] for s in sample(model, tok, prompts, 1, True, "forked", seed=SEED,
                               **WORLD.budgets)]  # one forced block per item, paths forked
paths = [[q.text for q in b[0].paths] if (b := parse_response(text).blocks) else []
         for text in forked]  # the paths of each sample's first block
starts = [[(read_guess(p["question"], q) or {}).get("pair", (None,))[0] for q in qs]
          for p, qs in zip(hard, paths)]  # the cheap price each path tries first
cheap = [sorted(parse_hard(p["question"])[0].prices[0]) for p in hard]  # the question's list


def kind(first: list, listed: list) -> str:
    """How a block's two paths share the search, read from the prices they start from."""
    if len(first) != 2 or None in first:
        return "no two priced paths"
    return "split" if sorted(first) == listed else "collided" if first[0] == first[1] else "other"


kinds = [kind(s, c) for s, c in zip(starts, cheap)]
two = sum(k != "no two priced paths" for k in kinds)
same = kinds.count("collided") / max(1, two)
right = completion_metrics(forked, [p["answer"] for p in hard])["accuracy"]
print(f"{len(hard)} hard items at T = 1, answer right {right:.0%}; how the paths started:")
pd.Series(kinds).value_counts().rename("blocks").to_frame()

# %% [markdown]
# *split*: the two paths start from the two prices of the question's list, as the teacher's do;
# *collided*: both start from the same price; *other*: a path starts from a price the question does
# not list. One block of each of the first two kinds:

# %%
for label in ("split", "collided"):
    if label not in kinds:
        continue
    at = kinds.index(label)
    print(f"[{label}] {hard[at]['question']}")
    for i, text in enumerate(paths[at]):
        print(f"  path {i + 1}: " + text.replace("\n", "\n          "))
    print("  then: " + forked[at][forked[at].find("<Summary>"):].replace("\n", "\n        "), "\n")

# %% [markdown]
# You should see: in about half of the blocks with two priced paths, both start from the **same**
# cheap price (the share below). Neither path can see the other, and nothing in a path says which
# half of the search is its own, so each one picks a price by itself; when they pick the same one,
# the block checks the same two pairs twice and never tries the other two. (A seen model writes
# path 2 after reading path 1, and takes the price path 1 left: exercise 4.) Numbering the paths,
# `(1) ` and `(2) ` (`path_headers=True`, notebook 02), is the remedy the project tried: each path
# then knows its part. It did not pay here. With numbered paths the forced block of the unseen SFT
# gains
# [+7.4 points](../results/tinyworld-blockcost-unseen-numbered.json#tinyworld-hard.diff) on hard
# items, against [+13.1 points](../results/tinyworld-blockcost-unseen.json#tinyworld-hard.diff)
# without them; after RL the numbered unseen arm of `study controls` (notebook 07) ends at
# [42.9 %](../results/tinyworld-controls.json#rows.4.accuracy), below the plain SFT arm's
# [46.8 %](../results/tinyworld-controls.json#rows.1.accuracy)
# ([docs/tinyworld.md](../docs/tinyworld.md#parallel-or-just-more-search)).

# %%
should_see("unseen SFT, forked: share of blocks whose paths start from the same price", same,
           PROFILE);

# %% [markdown]
# ## 8. Why forking is fast
#
# Decoding is memory-bound: one step for k rows costs about as much as one step for one row, until
# the batch is large. So `pr1lib.decoding.rollout` decodes the k paths of a block as k rows forked
# from the prompt's cache, then merges them by concatenating their cached keys and values (no path
# token is processed twice) and decodes the summary as one row. The timing below is `bench_forked`
# from `benchmarks/rollout.py` (the same function `python -m pr1lib bench rollout` runs): the model
# is steered to open a block at once and write every path to exactly `PATH_LEN` tokens; forked k
# paths are timed against one path, and "sequential" is k times one path. Torch runs on one thread
# here (set in section 1) and the machine may be shared, so read the ratios rather than the seconds.

# %%
from pr1lib.cli import bench

timing = bench.load_bench_script("rollout").bench_forked(model, tok, NB.path_len, NB.repeats)
speed = pd.DataFrame(
    {
        k: {
            "forked s": v["seconds"],
            "sequential s": round(int(k) * timing["single_path_s"], 4),
            "speed-up": v["speedup_vs_sequential"],
        }
        for k, v in timing["forked"].items()
    }
).T
speed.index.name = "paths k"

# %% tags=["report"]
plots.timing_chart(timing).show()
print(
    f"one path of {NB.path_len} tokens: {timing['single_path_s']} s; path tokens a "
    f"re-prefill summary would "
    f"process again at k = 4: {timing['summary_reprefill_tokens']}, this engine's merge: "
    f"{timing['summary_merge_reprocessed_tokens']}"
)
speed

# %% [markdown]
# On a GPU the forked rows are nearly free until the batch fills the chip; on a CPU with a model
# this small, per-step overhead dominates and the same holds. The official Parallel-R1 loop decodes
# paths as separate vLLM requests sharing the prompt's cache (the same idea) but then
# **re-prefills** the prompt and all paths to write the summary causally, with sequential positions:
# that is "seen" encoding at the summary, while its trainer scores the summary under "unseen". Here
# the merge keeps the paths' cached keys, so training and decoding agree token for token.

# %% [markdown]
# ## 9. Paths told their share: a wide search decoded side by side
#
# Section 7's paths collide because nothing in a path says which part of the search is its own.
# **WideWorld** (`pr1lib/worlds/wideworld.py`, [docs/wideworld.md](../docs/wideworld.md)) writes
# the plan before the block, where every path can read it: the question lists ten deals named (A)
# to (J), and exactly one of them costs the total. The model checks deal (A) first, as a serial
# search would; when that fails it opens one block of **nine** paths, and the forked engine writes
# each path's letter, (B) to (J), into the path as forced tokens (`path_headers` with
# `header_style="letter"`), so a path knows its deal without seeing its siblings and copies that
# deal's prices from the question. Below, WideWorld's shipped unseen SFT
# (`data/wideworld-sft-unseen`, a tiny-profile model on every profile) answers held-out hard items
# whose deal (A) fails, made to open its block right after that guess
# (`pr1lib.experiments.split.forced_split` runs the same on 250 items):

# %%
from pr1lib.evaluation.metrics import sample_stats
from pr1lib.experiments.split import forced_prefixes
from pr1lib.worlds import wideworld

WIDE = worlds.get("wideworld")
wide_model, wide_tok = load_for_eval(REPO_ROOT / WIDE.init("unseen"), "tiny")
wide_items = forced_prefixes(WIDE, load_world(WIDE.source("hard"), 2 * NB.eval_n, "test",
                                              seed=SEED))[: NB.eval_n]
wide_prompts = [chat_prompt(r["question"], wide_tok, "tiny") + pre for r, pre in wide_items]
wide_texts = [pre + s[0] for (_, pre), s in zip(wide_items, sample(
    wide_model, wide_tok, wide_prompts, 1, True, "forked", seed=SEED, **WIDE.budgets))]
record, text = wide_items[0][0], wide_texts[0]
deals = wideworld.parse_deals(record["question"]).deals
print(record["question"], "\n\n" + text[: text.find("<Parallel>")])
pd.DataFrame(
    [
        {"engine wrote": q.text[:3], "the model wrote": q.text[3:],
         "the question's deal": f"{deals[j + 1][0]} and {deals[j + 1][1]}",
         "its own deal?": wideworld.checked_deals(q.text)[:1] == [(j + 1, deals[j + 1])]}
        for j, q in enumerate(parse_response(text).blocks[0].paths)
    ],
    index=pd.Index(range(1, len(deals)), name="path"),
)

# %% [markdown]
# The first three characters of every path are the engine's; the rest is the model's, copied
# from the deal its letter names and checked against the total. Over all the items, how often did
# **every** path of a block take its own deal, and what did the block cost in sequential decode
# steps (a block decoded as forked paths costs its longest path) against the same tokens decoded
# one after another?

# %%
splits = [WIDE.block_splits(r["question"], t)[:1] for (r, _), t in zip(wide_items, wide_texts)]
split_rate = sum(s == [True] for s in splits) / len(splits)
forked_steps = sum(sample_stats(t, wide_tok, "forked")["sequential_steps"] for t in wide_texts)
serial_steps = sum(sample_stats(t, wide_tok, "seen")["sequential_steps"] for t in wide_texts)
right = completion_metrics(wide_texts, [r["answer"] for r, _ in wide_items])["accuracy"]
print(f"{len(wide_items)} forced blocks: every path on its own deal in {split_rate:.0%}, answer "
      f"right {right:.0%}; decoded forked they cost {forked_steps / serial_steps:.2f}x the "
      "sequential steps of the same tokens in one stream")

# %%
should_see("WideWorld unseen SFT, forked: share of blocks whose paths take their own deal",
           split_rate, PROFILE)
should_see("WideWorld unseen SFT: forked steps over the same tokens in one stream",
           forked_steps / serial_steps, PROFILE);

# %% [markdown]
# You should see: nearly every block splits the search as its letters say, and the nine paths
# cost about a third of the steps the same tokens take in one stream. The same tokens are not a
# fair rival, though: a serial search stops at the deal that checks out, so it writes fewer of
# them. Notebook 07 measures R1-Unseen against that serial search, trained the same way, in
# sequential steps and in seconds.

# %% [markdown]
# ## Summary
#
# - "Unseen" is the causal mask minus one kind of cell: a path's token never sees a sibling path of
#   the same block. Every path restarts its positions right after `<Parallel>`; the text after the
#   block continues from the longest path.
# - Under that view the model's predictions inside a path do not depend on its siblings at all (max
#   |Δ logit| ≈ 0 above), and equal a plain forward over the prompt and that path alone. The summary
#   still reads every path.
# - That equality is what lets `pr1lib.decoding.rollout` decode k paths as k rows forked from the
#   prompt's cache and merge them without reprocessing a token; the chart shows the speed-up over
#   decoding them in turn.
# - The price of the isolation: the shipped unseen TinyWorld SFT often sends both paths to the same
#   part of the search, because neither can see which part the other took. Numbered paths, the
#   remedy tried here, lowered the forced block's gain instead (section 7); notebook 04 trains both
#   variants.
# - Where the plan is written before the block (WideWorld's lettered deals) and the engine writes
#   each path's letter, paths that cannot see each other still split the search, and the block
#   costs its longest path.

# %% [markdown]
# ## Exercises
#
# 1. Build a response with **three** paths and check `by_hand` against `pr1lib.decoding.structure`
#    again. Which rectangles turn orange now, and where does `</Parallel>` land when the paths
#    differ in length?
#
#    <details><summary>Hint</summary>
#
#    Add a third, short `<Path>…</Path>` before `</Parallel>`. The orange cells are
#    `seen & ~unseen`; slice them with the path spans of `parse(...).spans()`.
#    </details>
# 2. In section 6, rewrite the **second** path instead of the first. Which rows change under each
#    mask, and why is the first path unaffected even under "seen"?
#
#    <details><summary>Hint</summary>
#
#    Splice the new text in between `a2 + 1` and `b2 - 1`, add a "first path" row to `parts`,
#    and ask which tokens a token of the first path may attend to at all.
#    </details>
# 3. Pass the unseen `position_ids` to the model **without** the 4D mask (only a 2D `attention_mask`
#    of ones and `use_cache=False`). Compare the logits with the table in section 6: what did
#    transformers do with the restarted positions?
#
#    <details><summary>Hint</summary>
#
#    Read the docstring of `pr1lib.decoding.structure` on mask types. Then also try no
#    `attention_mask` at all, and compare the second path with a forward of its own tokens alone.
#    </details>
# 4. Decode the hard items of section 7 with the **seen** SFT (`data/tinyworld-sft`), once in
#    `seen` mode and once `forked`, and count how often its two paths collide. Predict both before
#    you run them, and compare with the unseen SFT's share above.
#
#    <details><summary>Hint</summary>
#
#    `load_for_eval(REPO_ROOT / WORLD.init("seen"), PROFILE)` loads it; `sample(..., mode)` takes
#    the mode, and `kind` classifies each block. What did the seen SFT's path 2 always have in front
#    of it during training, and what is missing when it is forked?
#    </details>

# %% [markdown]
# Solutions, with the reasoning: [solutions/03_seen_vs_unseen.py](../solutions/03_seen_vs_unseen.py)
# (`python solutions/03_seen_vs_unseen.py` runs them).

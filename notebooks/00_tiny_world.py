# %% [markdown]
# # 00 · Two tiny worlds: TinyWorld, TinyGSM and their base models
#
# **Goal:** meet the offline task worlds and the small pretrained models that let every later
# notebook show real learning on a laptop CPU. The tutorial's main line runs in **TinyWorld**, a
# shop where *checking* an answer is far easier than *finding* it: the kind of problem where the
# paper's parallel paths can pay. **TinyGSM**, forward arithmetic with nothing to check, is the
# contrast where they do not.
#
# You will learn
# - what a hard TinyWorld item looks like, and why its records have exactly GSM8K's shape;
# - what the base model does with one: it commits to one guess, while some of its sampled guesses
#   are right far more often than one guess is (pass@8 against mean@8);
# - why writing candidates side by side and checking them can close that gap here (the
#   *verification gap*), and why TinyGSM offers nothing of the kind;
# - what the tiny Qwen3 model and its tokenizer are, and how `pretrain-tiny --set world=...` made
#   both base models.
#
# ![The recipe, its three lanes, and the notebook for each box](figures/recipe.png)
#
# Terms: [glossary](../docs/glossary.md) · the whole recipe in one picture:
# [docs/recipe.md](../docs/recipe.md) · the world itself: [docs/tinyworld.md](../docs/tinyworld.md)
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/pr1-tutorial/pr1/blob/main/notebooks/00_tiny_world.ipynb)

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
# ## 1. A hard TinyWorld item
#
# `pr1lib.worlds` holds the task worlds; `worlds.get("tinyworld").generate(n, tier, split, seed)`
# writes TinyWorld problems. Every one opens with two price lists. A **hard** item gives the total
# paid for one cheap and one dear item and asks how much more the dear one costs: exactly one of
# the 2 × 2 pairs of prices adds up to the total, and the answer needs the whole pair. Here is one
# from the held-out `test` split:

# %%
import pandas as pd

from pr1lib import worlds
from pr1lib.config import NotebookConfig
from pr1lib.worlds.tinyworld import parse_hard

pd.set_option("display.max_colwidth", 120)
NB = NotebookConfig.for_profile(PROFILE)  # this notebook's sizes (pr1lib.config presets)
WORLD = worlds.get("tinyworld")  # this notebook is about the tiny worlds, on every profile
item = WORLD.generate(1, "hard", "test", seed=SEED)[0]
shop, total = parse_hard(item["question"])
print(item["question"])
pd.DataFrame({"prices": shop.prices}, index=[plural for _, plural in shop.names])

# %% [markdown]
# The record has GSM8K's shape: each step is a line with a calculator note `<<a+b=c>>`, and the
# answer ends with `#### N`, so `pr1lib.format.prompts.split_gsm8k_answer` reads it as it reads
# GSM8K and every later stage treats both the same way. The reference solution is one guess that
# checks out: the right pair, its sum, the sum compared with the total, then the difference.

# %%
from pr1lib.format.prompts import split_gsm8k_answer

steps, final = split_gsm8k_answer(item["answer"])
print(item["answer"], f"\n\n-> {len(steps)} steps, final answer {final}")

# %% [markdown]
# Each tier's held-out `test` split never shares a question with `train`, in either world: a
# question is in `test` exactly when a hash of its text falls in a fixed bucket (20 % of all
# questions, `pr1lib.worlds.tasks.split_of`), so no seed can leak one into the other.
#
# You should see: no question of any tier in both splits, and each in the split its hash picks.

# %%
from pr1lib.worlds.tasks import split_of

for name in ("tinyworld", "tinygsm"):
    for tier in ("easy", "hard"):
        draw = worlds.get(name).generate
        train = {r["question"] for r in draw(500, tier, "train", SEED)}
        test = {r["question"] for r in draw(500, tier, "test", SEED)}
        assert not train & test, f"{name} {tier}: a question is in both splits"
        assert {split_of(q) for q in train} == {"train"} and {split_of(q) for q in test} == {"test"}

# %% [markdown]
# ## 2. The base model commits to one guess
#
# `data/tinyworld-base` is this project's TinyWorld base model: a 0.92M-parameter Qwen3 pretrained
# from scratch on plain TinyWorld solutions (section 7 shows how). It reads the short `tiny` prompt
# (`Problem: …\nSolution:\n`) and writes what it saw in pretraining: one guess, its check, the
# answer. Greedy decoding (its single most likely solution) on the first `NB.eval_n` held-out hard
# items, and the first of them it gets wrong:

# %%
import transformers

from pr1lib.config import ModelConfig
from pr1lib.decoding.models import base_model_dir, load_policy
from pr1lib.training.pretrain import generate_solutions, score

transformers.utils.logging.disable_progress_bar()  # loading bars: nothing to read in them
BASE = ModelConfig.for_profile("tiny").replace(name=base_model_dir("tinyworld"))  # every profile
model, tok, _ = load_policy(config=BASE)
model.eval()
records = WORLD.generate(NB.eval_n, "hard", "test", SEED)
greedy = generate_solutions(model, tok, [r["question"] for r in records], max_new_tokens=256)
right = score(greedy, records)
at = right.index(False) if False in right else 0  # the first item it misses
miss, greedy_acc = records[at], sum(right) / len(right)
print(f"greedy: right on {sum(right)} of {len(records)} items; item {at}:\n")
print(miss["question"], "\n---\n" + greedy[at], "\n--- gold", split_gsm8k_answer(miss["answer"])[1])

# %% [markdown]
# ## 3. What it can write versus what it commits to
#
# Sampling at temperature 1 (the paper's protocol) draws other guesses. `read_guess` reads a guess
# line back against the question: the pair it names, whether both prices are on the lists, whether
# its sum is right, and the mark its check wrote. Eight samples of the item it missed:

# %%
from pr1lib.worlds.tinyworld import read_guess

K = 8  # samples per problem, as in results/tinyworld-base-hard-t1.json


def anatomy(question: str, text: str, right: bool) -> dict:
    """One sampled solution as a table row: its guess read back, and whether its answer is right."""
    guess = read_guess(question, text) or {}
    return {"guess": guess.get("pair"), "on the lists": guess.get("listed"),
            "sum right": guess.get("sum_right"), "check": guess.get("mark"), "answer right": right}


drawn = generate_solutions(model, tok, [miss["question"]] * K, 1.0, 256, seed=SEED)
pd.DataFrame([anatomy(miss["question"], t, ok) for t, ok in zip(drawn, score(drawn, [miss] * K))])

# %% [markdown]
# Now the same on `NB.eval_n` held-out hard items, `K` samples each, scored the way every
# evaluation in this project is (`pr1lib.evaluation.evaluate.sample_rows`,
# `pr1lib.evaluation.metrics.summarize`): **mean@8** is the share of samples that are right, the
# chance that *one* answer is; **pass@8** is the share of items with at least one right sample among
# the eight. Greedy decoding (section 2, the same items) is the labelled second column. The
# committed card ran the same protocol on 200 items.

# %% tags=["report"]
from pr1lib.config import EvalConfig
from pr1lib.config.runtime import set_seed
from pr1lib.evaluation.evaluate import sample_rows
from pr1lib.evaluation.metrics import summarize
from pr1lib.store.cards import committed

EVAL = EvalConfig(benchmark=WORLD.source("hard"), n=NB.eval_n, k=K, temperature=1.0,
                  max_completion_length=256, seed=SEED)  # the card's protocol, fewer items
set_seed(SEED)
rows = sample_rows(model, tok, EVAL)
sampled = summarize(rows)  # the items of section 2 (the held-out split, in order)
card = {m: committed(f"tinyworld-base-hard-{m}")["numbers"] for m in ("t1", "greedy")}
pd.DataFrame({
    f"this run ({EVAL.n} items)": [greedy_acc, sampled["accuracy"], sampled["pass_at_k"]],
    "card (200 items)": [card["greedy"]["accuracy"], card["t1"]["accuracy"],
                         card["t1"]["pass_at_k"]],
}, index=["greedy (one answer)", f"T = 1 mean@{K}", f"T = 1 pass@{K}"]).style.format("{:.1%}")

# %% tags=["report"]
from pr1lib.notebook import plots

curves = {f"this run ({EVAL.n} items)": sampled["pass_curve_official"],
          "card (200 items)": card["t1"]["pass_curve_official"]}
plots.pass_at_k_figure(curves, "TinyWorld base, hard items: some sample is often right",
                       greedy=greedy_acc).show()

# %% [markdown]
# You should see: pass@8 far above mean@8. The model *can* write the right pair for most items;
# it just does not commit to it. That gap is the room a block can use.

# %%
from pr1lib.notebook.expect import should_see

gap = sampled["pass_at_k"] - sampled["accuracy"]
should_see("TinyWorld base, hard: pass@8 minus mean@8", gap, PROFILE);

# %% [markdown]
# Why does one answer not find the pair more often, when checking a guess is one addition? Read
# every sampled guess back:

# %% tags=["report"]
guesses = pd.DataFrame([anatomy(r["question"], s["text"], ok) for r in rows
                        for s, ok in zip(r["samples"], r["correct_official"])])
wrong = guesses[~guesses["answer right"]]
pd.DataFrame({"samples": [len(guesses), len(wrong)],
              "check says ✓": [(guesses.check == "✓").mean(), (wrong.check == "✓").mean()],
              "pair on the lists": [guesses["on the lists"].mean(), wrong["on the lists"].mean()],
              "sum right": [guesses["sum right"].mean(), wrong["sum right"].mean()]},
             index=["all samples", "wrong answers"]).style.format(
                 {c: "{:.0%}" for c in ("check says ✓", "pair on the lists", "sum right")})

# %% [markdown]
# You should see: nearly every wrong answer still writes ✓. Pretraining showed only solutions
# whose check passes, so the base model learned the *look* of a check: whatever it guessed, it
# writes a check that passes, bending the sum to fit the total (most wrong answers carry a wrong
# sum) or naming prices the lists do not have. A single stream of text never meets a failed
# check, so it never learns to act on one (exercise 1 forces a wrong pair on it).

# %%
should_see("TinyWorld base, hard: share of wrong answers whose check says ✓",
           (wrong.check == "✓").mean() if len(wrong) else 1.0, PROFILE);

# %% [markdown]
# ## 4. Why a block can pay here: the verification gap
#
# *Finding* the pair is a search over four candidates; *checking* one is an addition and a
# comparison of two numbers written side by side. The rule teacher of notebook 02 writes cold-start
# traces that use the gap: a `<Parallel>` block whose two paths split the search (path 1 tries the
# first cheap price with both dear ones, path 2 the second, read from the question alone), every
# check computed honestly, so that exactly one passes; the `<Summary>` keeps that pair. For the
# item the base model missed (`pr1lib.worlds.tinyworld.search_block`):

# %%
from pr1lib.worlds.tinyworld import search_block

print(search_block(*parse_hard(miss["question"])))

# %% [markdown]
# How much could candidates side by side gain? If the model wrote two independent guesses and kept
# the one whose check passes, it would be right whenever either is: pass@2. A block that splits the
# search tries all four pairs, so with honest checks it can be right on every item. Nothing here
# says a model will learn that; notebook 04 measures it: the shipped SFT, forced to open a block on
# hard items, is right 26 points more often than when forced to answer with one guess
# (`results/tinyworld-blockcost.json`). That compares a search against a single guess. Whether the
# search needs the block is another question, and notebook 07's controls answer it: written
# without tags, the same search does as well after RL (`results/tinyworld-controls.json`: the
# serial arm ends at 68.8 %, Parallel-R1-Seen at 66.7 %).

# %%
p = sampled["pass_curve_official"]
print(f"mean@{K} {sampled['accuracy']:.1%} | pass@2 {p[2]:.1%} (two guesses, the right one kept)"
      f" | pass@{K} {p[K]:.1%}")

# %% [markdown]
# ## 5. The contrast: TinyGSM, when a block does not pay
#
# TinyGSM (`pr1lib.worlds.tasks`) is this project's first tiny world: stories about one person's
# pile of things, where every step computes the next number from the last. **Easy** items (1–2
# steps, small numbers) play GSM8K's role, **hard** ones (3–5 steps, numbers up to 999) DAPO-Math's.
# Its base model is `data/tiny-base`, the same architecture pretrained on TinyGSM:

# %%
gsm_item = worlds.get("tinygsm").generate(1, "hard", "test", seed=SEED)[0]
gsm_model, gsm_tok, _ = load_policy(config=BASE.replace(name=base_model_dir("tinygsm")))
gsm_out = generate_solutions(gsm_model.eval(), gsm_tok, [gsm_item["question"]], 0.0, 256)[0]
print(gsm_item["question"], "\n---\n" + gsm_out, "\n---",
      "right" if score([gsm_out], [gsm_item])[0] else "WRONG",
      f"(gold {split_gsm8k_answer(gsm_item['answer'])[1]})")

# %% [markdown]
# Both base models, from their committed result cards (200 held-out items per tier; T = 1 with
# k = 4 samples on easy and 8 on hard, greedy beside):

# %% tags=["report"]
CARDS = {"TinyWorld": "tinyworld-base", "TinyGSM": "tiny-base"}
both = pd.DataFrame([
    {"world": w, "tier": tier, "greedy": committed(f"{c}-{tier}-greedy")["numbers"]["accuracy"],
     "T = 1 mean@k": committed(f"{c}-{tier}-t1")["numbers"]["accuracy"],
     "T = 1 pass@k": committed(f"{c}-{tier}-t1")["numbers"]["pass_at_k"],
     "k": committed(f"{c}-{tier}-t1")["numbers"]["k"]}
    for w, c in CARDS.items() for tier in ("easy", "hard")]).set_index(["world", "tier"])
both.style.format({c: "{:.1%}" for c in ("greedy", "T = 1 mean@k", "T = 1 pass@k")})

# %% [markdown]
# **What the contrast shows, and why.** TinyGSM's hard tier has a sampling gap too (the table's
# last row: pass@8 [52.5 %](../results/tiny-base-hard-t1.json#pass_at_k) against mean@8
# [19.2 %](../results/tiny-base-hard-t1.json#accuracy)), but nothing to check a candidate
# against: the question gives no total to compare with, so a second path can only redo the same
# forward arithmetic, and when two paths disagree the summary cannot tell which one slipped without
# doing the work a third time. A block there costs tokens and accuracy and buys nothing; notebook
# 04 measures that cost and notebook 06 shows RL dropping the blocks. TinyGSM stays in the tutorial
# as the named case *when a block does not pay*; the main line from here on runs in TinyWorld.
#
# ## 6. The tokenizer and the model
#
# Each base model has its own byte-level BPE tokenizer of 512 tokens, trained on its world's text:
# template words are single tokens, while every digit stays its own token, so arithmetic is digit
# by digit. Being byte-level it can encode *any* text exactly, GSM8K and the parallel tags
# included; the tags are not in its vocabulary yet (notebook 01 adds them, as it does for Qwen's).

# %%
from pr1lib.format.prompts import linear_solution, prompt_text

text = prompt_text(item["question"], "tiny") + linear_solution(item["answer"])
ids = tok(text, add_special_tokens=False)["input_ids"]
print(f"{len(text)} characters -> {len(ids)} tokens; vocabulary {len(tok)}")
print(tok.convert_ids_to_tokens(ids)[:40])
print("<Path> ->", tok.tokenize("<Path>"))

# %% [markdown]
# A Qwen3 causal LM from `transformers` (`Qwen3ForCausalLM`), so attention masks, KV caches and
# LoRA behave exactly as on the real model, only much smaller. Both base models share it:

# %% tags=["report"]
from pr1lib.store.paths import project_data_dir

cfg = model.config
weights = project_data_dir() / "tinyworld-base" / "model.safetensors"
pd.DataFrame([{
    "parameters (M)": round(model.num_parameters() / 1e6, 2),
    "hidden": cfg.hidden_size, "layers": cfg.num_hidden_layers,
    "heads": cfg.num_attention_heads, "MLP": cfg.intermediate_size,
    "context": cfg.max_position_embeddings, "vocab": cfg.vocab_size,
    "safetensors (MB)": round(weights.stat().st_size / 2**20, 2),
}], index=["both base models (TinyWorld, TinyGSM)"])

# %% [markdown]
# ## 7. How the base models were made
#
# One command trains the tokenizer, then the model, and writes the weights, `loss.csv`,
# `card.json` and a model card; it is deterministic given the seed, checkpoints every 100 steps and
# resumes if interrupted. `--set world=NAME` picks the world (TinyGSM is the default):
#
# ```
# python -m pr1lib pretrain-tiny --out data/tinyworld-base --seed 0 --set max_steps=1600 \
#     --set hard_fraction=0.1 --set world=tinyworld --set num_threads=1
# python -m pr1lib pretrain-tiny --out data/tiny-base --seed 0 --set num_threads=1
# ```
#
# Each card records its training run; `loss.csv` logs the mean next-token loss on solution tokens
# every 10 steps (every step draws fresh problems, so it is also a held-out loss):

# %% tags=["report"]
import json

import plotly.express as px

runs = {w: json.loads((project_data_dir() / c / "card.json").read_text()) for w, c in CARDS.items()}
pd.DataFrame([{"steps": r["steps"], "minutes": round(r["train_time_s"] / 60, 1),
               "hard share of a batch": r["config"]["hard_fraction"]}
              for r in runs.values()], index=list(runs))

# %% tags=["report"]
curve = pd.concat([pd.read_csv(project_data_dir() / c / "loss.csv").assign(model=f"{w} base")
                   for w, c in CARDS.items()])  # the legend names each model by its world
fig = px.line(curve, x="step", y="loss", color="model", log_y=True, width=720, height=400,
              title="Pretraining loss of both base models (solution tokens)",
              labels={"step": "training step", "loss": "loss (log scale)"})
fig.update_xaxes(tickformat="d")
fig.show()

# %% [markdown]
# Here we run the command's `smoke` preset on TinyWorld (10 steps of 8 problems), enough to watch
# the loss fall:

# %%
from pr1lib.config import PretrainConfig
from pr1lib.store.paths import runs_dir
from pr1lib.training.pretrain import pretrain

smoke_cfg = PretrainConfig.for_profile("smoke", seed=SEED, world="tinyworld")
run = pretrain(smoke_cfg, runs_dir() / "00_pretrain_smoke", progress=False, evaluate=False)
pd.read_csv(runs_dir() / "00_pretrain_smoke" / "loss.csv")

# %% [markdown]
# ## Summary
#
# - Both tiny worlds write records in GSM8K's exact shape, so one parser and one checker serve all
#   three; their test splits never overlap training.
# - On hard TinyWorld items the base model commits to one guess: mean@8 sits far below pass@8.
#   Its check line only looks like a check (✓ on nearly every wrong answer), because pretraining
#   never showed a failed one.
# - Checking a candidate is far cheaper than finding one (the verification gap): a search that
#   tries every pair and checks each honestly can close the gap, written as a block whose two paths
#   split it or, as notebook 07's serial control does, without tags. The rest of the tutorial
#   follows that lesson, from the cold-start traces (02) to the headline and its controls (07).
# - TinyGSM has a sampling gap but nothing to check against: the named contrast where a block
#   does not pay.

# %% [markdown]
# ## Exercises
#
# 1. Make the base model start its solution with a **wrong** pair from the lists (write
#    `Toy A, book B: ` after the prompt) and let it finish greedily. Does it write the true sum and
#    ✗, or bend the check? Predict, then do the same with `data/tinyworld-sft`.
#
#    <details><summary>Hint</summary>
#
#    `prompt_text(question, "tiny")` is the prompt; append the start of the guess line and decode
#    the rest with `model.generate(..., do_sample=False)`. `split_paths(shop)` lists the pairs;
#    `read_guess(question, prefix + continuation)` reads the line back.
#    </details>
# 2. Measure mean@8 and pass@8 at temperature 0.5, 1.0 and 1.5. Predict first: which way does each
#    move, and what does that mean for a GRPO group of 8 samples?
#
#    <details><summary>Hint</summary>
#
#    `EVAL.replace(temperature=t)` and `sample_rows`. A group can teach only when some sample is
#    right (pass@8 counts those items) and not all are; which temperature keeps the most such items?
#    </details>
# 3. Re-run `pretrain-tiny` with `--set hard_fraction=0.5` for 300 steps (about five minutes; on
#    TinyGSM, whose default share is 0.2): does `hard` accuracy rise at the cost of `easy`?
#
#    <details><summary>Hint</summary>
#
#    Train two runs with the same steps, one at `hard_fraction=0.2` and one at 0.5, and compare
#    their cards' `accuracy` per tier, not with the shipped 1,100-step card. Mind the noise of
#    200 problems.
#    </details>
#
# Solutions, with the reasoning: [solutions/00_tiny_world.py](../solutions/00_tiny_world.py)
# (`python solutions/00_tiny_world.py` runs them).

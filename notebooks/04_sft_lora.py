# %% [markdown]
# # 04 · Stage 1: cold-start SFT, seen and unseen (full fine-tuning and LoRA)
#
# **Goal:** teach a base model the parallel-thinking format by supervised fine-tuning on the
# cold-start set from notebook 02, in both of the paper's variants, and measure what changed on
# the items where a block should pay.
#
# You will learn
# - the paper's SFT recipe (loss on the response only, per-sample token mean, cosine schedule) and
#   how it maps onto TRL's `SFTTrainer`, full fine-tuning or LoRA through PEFT, and NF4 4-bit;
# - why the six new tag rows must train alongside LoRA, and how LoRA compares with full
#   fine-tuning on the same traces;
# - what **seen** and **unseen** SFT feed the model: the same tokens, two attention masks and two
#   sets of position ids, with the structure read from the **response only**;
# - how much GPU memory the colab and paper settings need (computed), and what a run folder holds;
# - how format validity, parallel ratio and accuracy move from the base model to SFT, with a 95 %
#   interval over problems.
#
# On `tiny` and `smoke` the main line is **TinyWorld** (notebook 00: a block's two paths split a
# search that is cheap to check); on `colab` and `paper` it is GSM8K with Qwen3. TinyGSM, where a
# block does not pay, is the one contrast, at the end (section 11).
#
# Terms: [glossary](../docs/glossary.md) · the whole recipe in one picture:
# [docs/recipe.md](../docs/recipe.md)
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/pr1-tutorial/pr1/blob/main/notebooks/04_sft_lora.ipynb)

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
from pr1lib import worlds
from pr1lib.config import NotebookConfig
from pr1lib.config.runtime import start_notebook
from pr1lib.store.paths import REPO_ROOT, runs_dir, shown

PROFILE = start_notebook(PROFILE, SEED)  # check the profile, seed everything, print versions
NB = NotebookConfig.for_profile(PROFILE)
WORLD = worlds.get(NB.world) if NB.world else None  # None: the profile's real data (GSM8K)
BASE = REPO_ROOT / WORLD.init("plain") if WORLD else None  # the world's pretrained base model
print("main line:", WORLD.title if WORLD else "the profile's own data",
      "| base model:", BASE.relative_to(REPO_ROOT) if BASE else "the profile's")

# %% [markdown]
# ## 1. The recipe
#
# The paper fine-tunes Qwen3-4B-Base on its Parallel-GSM8K set: 58 optimizer steps for the seen
# variant and 230 for unseen. Which rows those steps covered it does not say; the inference (the
# unfiltered rows for seen, the format-filtered ones for unseen) and its arithmetic are in
# [docs/recipe.md](../docs/recipe.md#4-cold-start-data). AdamW
# with lr 1e-5, betas (0.9, 0.95), weight decay 0.01, cosine decay after a 10 % warm-up, sequences
# up to 4,096 tokens. The loss is cross-entropy on the **response tokens only**, averaged per sample
# and then over samples (its micro-batches hold one sample each). The end-of-text token is appended
# to every response, so the model learns to stop.
#
# `SFTStageConfig` holds these knobs under TRL's names. `paper` is the recipe above, as full
# fine-tuning. `colab` is QLoRA (4-bit base + LoRA rank 16) on a T4, so its learning rate is the
# usual LoRA one. TinyWorld brings its own cold start (`SFTStageConfig.for_world("tinyworld",
# PROFILE)`): full fine-tuning of the 0.92M-parameter TinyWorld base at lr 1e-3, 12,000 rows of
# both tiers, half of them plain, two epochs (1,500 steps), the recipe of the shipped
# `data/tinyworld-sft`. `smoke` takes four steps to show that everything is wired.

# %%
import datasets
import pandas as pd
import transformers

from pr1lib.config import VARIANT_ROLLOUT, SFTStageConfig
from pr1lib.decoding import models
from pr1lib.notebook import plots
from pr1lib.training import runs, sft

datasets.disable_progress_bars()
transformers.utils.logging.disable_progress_bar()
pd.set_option("display.max_colwidth", 160)


def stage1_config(variant: str = "seen") -> SFTStageConfig:
    """This profile's Stage 1: the world's cold start on tiny and smoke, else the profile's."""
    if WORLD:
        return SFTStageConfig.for_world(WORLD.name, PROFILE, variant, seed=SEED)
    return SFTStageConfig.for_profile(PROFILE, variant=variant, seed=SEED)


config = stage1_config("seen")
model_config = models.stage_model_config(config, BASE)
fields = ["source", "train_n", "plain_share", "learning_rate", "lr_scheduler_type", "warmup_ratio",
         "num_train_epochs", "max_steps", "per_device_train_batch_size",
         "gradient_accumulation_steps", "max_length", "loss_reduction", "use_lora",
         "load_in_4bit", "budget_vram_gib", "budget_minutes"]
recipes = pd.DataFrame({
    **{f"{p} · TinyWorld": SFTStageConfig.for_world("tinyworld", p).to_dict()
       for p in ("smoke", "tiny")},
    **{p: SFTStageConfig.for_profile(p).to_dict() for p in ("colab", "paper")}})
recipes.loc[fields].astype(str)

# %% [markdown]
# `load_in_4bit = None` means "whatever the profile's model config says": NF4 for `colab`, full
# precision elsewhere. This run's model:

# %%
print(model_config.replace(name=shown(model_config.name)))  # paths as the repository names them

# %% [markdown]
# ## 2. The memory budget for the GPU profiles
#
# These numbers are **computed**, not measured (no GPU took part in writing this notebook):
# weights at ~0.53 byte per parameter in NF4 with double quantization (2 bytes in bf16), 16 bytes
# per
# *trainable* parameter (fp32 weight, gradient and two AdamW moments), activations with gradient
# checkpointing (one saved input per layer plus one layer recomputed), the boolean 4D mask of the
# unseen variant (`batch × length²` bytes) and ~0.6 GiB of CUDA context. TRL's fused LM head scores
# tokens in tiles, so the `batch × length × 151,936` logits tensor (5 GiB in fp32 at batch 4 ×
# 2,048) is never built. Treat them as a floor; allocator fragmentation adds 10–20 %.

# %% tags=["report"]
budgets = []
for name, four_bit, r, batch, length in [("Qwen/Qwen3-0.6B-Base", True, 16, 4, 2048),
                                         ("Qwen/Qwen3-1.7B-Base", True, 16, 2, 2048),
                                         ("Qwen/Qwen3-4B-Base", True, 16, 1, 4096),
                                         ("Qwen/Qwen3-4B-Base", False, None, 1, 4096)]:
    est = models.memory_estimate(models.QWEN3_SHAPES[name], batch, length, four_bit, r)
    kind = f"NF4 + LoRA r={r}" if four_bit else "bf16 full fine-tune"
    setup = f"{kind}, batch {batch} x {length}"
    budgets.append({"model": name.split("/")[1], "setup": setup, **est})
budgets = pd.DataFrame(budgets).set_index(["model", "setup"])
print(f"colab budget: {SFTStageConfig.for_profile('colab').budget_vram_gib} GiB of a 16 GB T4, "
      f"{SFTStageConfig.for_profile('colab').budget_minutes} minutes; all numbers computed (GiB)")
budgets

# %% [markdown]
# QLoRA on the 0.6B model leaves most of a T4 free; even the 4B model fits in 4-bit at the paper's
# length. Full fine-tuning of the 4B model needs ~60 GiB for weights, gradients and optimizer states
# alone, which is why the paper used eight GPUs with FSDP.

# %% [markdown]
# The time on a T4 is computed the same way: no GPU has run the colab profile yet. Training costs
# rows × tokens per row at an assumed 2,000 tokens/s (QLoRA with gradient checkpointing); each
# held-out evaluation costs its decoding steps at an assumed 0.05 s per step (a sampled pass and a
# greedy one); each run adds ~40 s to load the 4-bit model and save the adapter and merged copy.
# `pr1lib.notebook.budget` holds these assumptions; the colab preset keeps this notebook within an
# hour.

# %%
from pr1lib.notebook import budget

plan = budget.sft_notebook_plan("colab")
print(f"notebook 04 on one T4, computed: {budget.total_minutes(plan)} minutes")
print(budget.T4)  # the assumptions behind every number of the table
pd.DataFrame(plan).T

# %% [markdown]
# ## 3. The data
#
# The cold-start set comes from notebook 02's pipeline. On `tiny` and `smoke` it is TinyWorld's
# rule-teacher traces of both tiers (`config.source`), every one strictly valid; on `colab` and
# `paper`, GSM8K through the LLM teacher. The paper's cold start is easy math only; TinyWorld's
# mixes in the hard tier, because that is where a block pays and what Stage 3 trains on. Its
# preset also replaces half of the rows by the item's plain solution (`plain_share`,
# `sft.with_plain_share`), so the model learns the block without learning to open it every time,
# which leaves RL a choice to make (notebook 06). `DATA` is notebook 02's saved set when it
# exists; otherwise the cell builds the same rows with the rule teacher.
#
# Each row is rendered as the model will see it: the prompt in this profile's style, then the
# completion, then end-of-text. Rows longer than `max_length` are dropped, never cut, because a
# trace cut inside a path would teach the model to stop mid-thought.

# %%
saved = runs_dir().joinpath(f"02_cold_start_data-{PROFILE}", "tinyworld" if WORLD else "sft")
DATA = saved if (saved / "dataset").is_dir() else None  # None: built here with the rule teacher
OUT = runs_dir() / f"04_sft_lora-{PROFILE}"
base_model, tokenizer, _ = models.load_training_policy(model_config, config.train_tag_rows)
raw = sft.load_coldstart(DATA, config, model_config.prompt_style, OUT)
rows, dropped = sft.sft_rows(sft.with_plain_share(raw, config.plain_share, config.seed), tokenizer,
                             config.max_length)
with_block = sum("<Parallel>" in r["completion"] for r in rows)
print(f"{len(rows)} rows from {shown(DATA) if DATA else 'the rule teacher'} ({dropped} dropped "
      f"as too long), {with_block} with a block and {len(rows) - with_block} plain; data hash "
      f"{sft.data_hash(rows)}")
example_row = next(r for r in rows if "<Parallel>" in r["completion"])
print(example_row["prompt"] + example_row["completion"])

# %% [markdown]
# ## 4. Seen and unseen: the same tokens, two views
#
# TRL tokenizes each row twice (prompt alone, prompt + completion) and sets the labels of the prompt
# tokens to −100, so only the response is trained. The **seen** variant stops there: plain causal
# attention, positions 0, 1, 2, …, TRL's own collator.
#
# The **unseen** variant swaps in `ParallelCollator`. It pads the batch on the right and calls
# `pr1lib.decoding.structure.attention_inputs` with `response_start` = the first trained token of
# each row. Inside a block, a path cannot attend to its sibling paths, and every path restarts at
# the position right after `<Parallel>`. The summary and everything after it see all paths. The
# structure is read from the response only: the paper's prompt mentions the tags by name, and the
# official data set parsed them there too, which put 47 prompt tokens at position 0 (a bug a public
# reproduction found). The mask always travels with the positions: restarted positions without a
# mask would make transformers treat the sequence as several packed ones.

# %%
example = {
    "input_ids": tokenizer(example_row["prompt"] + example_row["completion"])["input_ids"]
    + [tokenizer.eos_token_id]
}
n_prompt = len(tokenizer(example_row["prompt"])["input_ids"])
example["labels"] = [-100] * n_prompt + example["input_ids"][n_prompt:]
views = {mode: sft.ParallelCollator(tokenizer, mode)([example]) for mode in ("seen", "unseen")}
plots.mask_figure(views, tokenizer, start=n_prompt - 2)

# %% [markdown]
# Dark squares are allowed attention. Under "unseen", each later path's rows have a blank rectangle
# where the earlier paths' keys are. Below are the tags of the example with their position ids:
# every `<Path>` starts at the same position under "unseen", and `</Parallel>` continues after the
# longest path. Every tag is trained (it is part of the response).

# %%
from pr1lib.format.grammar import TAGS

tokens = pd.DataFrame({
    "token": [tokenizer.decode([t]) for t in example["input_ids"]],
    "trained": [label != -100 for label in example["labels"]],
    "position (seen)": views["seen"]["position_ids"][0].tolist(),
    "position (unseen)": views["unseen"]["position_ids"][0].tolist(),
})
tokens[tokens["token"].isin(TAGS) | (tokens.index == n_prompt)]

# %% [markdown]
# ## 5. The model: tags, full fine-tuning or LoRA, and 4-bit
#
# `load_training_policy` adds the six tags as single tokens, gives each new embedding row the mean
# of the rows of the pieces it used to split into (`<`, `Path`, `>`), and loads the base in NF4
# when asked. With `use_lora=True` it also builds a `LoraConfig` on every linear layer; LoRA alone
# would leave the tag rows at their initial values, so `trainable_token_indices` makes PEFT train
# exactly those six rows too (the tied LM head follows the embedding). Two traps are handled here.
# TRL's fused LM head reads `lm_head.bias`, which PEFT's wrapper for those rows does not expose.
# And on CPU, bitsandbytes repacks 4-bit weights for a faster inference kernel the first time they
# run in eval mode; that kernel has no backward, so LoRA gradients after an evaluation would be
# silently wrong. `keep_4bit_differentiable` turns the repacking off.
#
# The TinyWorld main line fine-tunes every weight (section 6.2 says why); LoRA is the colab
# method. The cell shows the LoRA config either way: the one this profile trains with, or the one
# `use_lora=True` would build.

# %%
from pr1lib.decoding.tokens import tag_token_ids

lora_config = models.load_training_policy(
    models.stage_model_config(config.replace(use_lora=True), BASE), config.train_tag_rows)[2]
print("tag ids:", tag_token_ids(tokenizer))
print("4-bit base:", getattr(base_model, "is_loaded_in_4bit", False))
print("this profile trains:",
      "LoRA" if model_config.use_lora else "every weight (full fine-tuning)")
print(f"LoRA r={lora_config.r}, alpha={lora_config.lora_alpha}, "
      f"targets={lora_config.target_modules}, tag rows={lora_config.trainable_token_indices}")
del base_model  # each run below loads its own copy of the base

# %% [markdown]
# ## 6. Training, seen and unseen
#
# `run_sft` loads the base, trains and saves the run. The full TinyWorld cold start is 1,500 steps
# per variant, more than a tour can wait for, so on `tiny` this cell trains a short version of
# each variant: `NB.sft_steps` steps over as many fresh rows (one epoch) of section 3's set,
# enough to watch the loss fall and to see what so few steps leave (section 7). `colab` and
# `paper` train their full recipe, `smoke` four steps. The figure updates while the two runs
# train.

# %%
from pr1lib.training.sft_live import LiveLossPlot


def live_config(variant: str) -> SFTStageConfig:
    """``stage1_config``, shortened to ``NB.sft_steps`` steps where the notebook config says so."""
    cfg = stage1_config(variant)
    if NB.sft_steps is None:
        return cfg
    return cfg.replace(max_steps=NB.sft_steps, num_train_epochs=1.0,
                       train_n=NB.sft_steps * cfg.per_device_train_batch_size)


plot = LiveLossPlot()
trained = {}
for variant in ("seen", "unseen"):
    cfg = live_config(variant)
    # a short run is not the SFT checkpoint later notebooks look for (config.recipe.STAGE_RUNS)
    folder = OUT / (variant if NB.sft_steps is None else f"{variant}-short")
    trained[variant] = sft.run_sft(cfg, DATA or OUT / "coldstart", folder, evaluate=False,
                                   callbacks=[plot.callback(variant)],
                                   model_cfg=models.stage_model_config(cfg, BASE), quiet=True)
    print(f"{variant}: {trained[variant].result['steps']} steps in "
          f"{trained[variant].result['train_seconds']} s")

# %% [markdown]
# ### 6.1 The SFT the rest of the tour starts from
#
# Could a tiny TinyWorld SFT run in about five minutes on 2 CPU cores and still be as good as the
# shipped one? The target: hard-tier accuracy at T = 1 within 5 points of `data/tinyworld-sft`'s,
# with at least 95 % of the answers strictly valid. The committed measurements (all seen, seed 0,
# full fine-tuning, the world's traces; 200 held-out hard items × 4 samples; CPU seconds are the
# run's own, about its wall time on a quiet 2-core machine with one torch thread):

# %% tags=["report"]
import json

from pr1lib.store.cards import committed


def sft_card(name: str) -> dict:
    """Steps, training time and hard-tier T = 1 numbers of one committed SFT run."""
    shipped = name.startswith("data/")  # a shipped folder: its card.json, its eval card
    run = (json.loads((REPO_ROOT / name / "card.json").read_text()) if shipped
           else committed(name)["numbers"])
    hard = committed(("tinyworld-sft" if shipped else name) + "-hard-t1")["numbers"]
    return {"steps": run["steps"], "rows": run.get("train_rows"),
            "train CPU min": round(run["train_cpu_seconds"] / 60, 1),
            "hard accuracy %": round(100 * hard["accuracy"], 1),
            "strictly valid %": round(100 * hard["valid_ratio"], 1),
            "parallel %": round(100 * hard["parallel_ratio"], 1)}


runs_table = pd.DataFrame({"shipped (data/tinyworld-sft)": sft_card("data/tinyworld-sft"),
                           "~5 CPU minutes": sft_card("tinyworld-sft-5min"),
                           "400 steps": sft_card("tinyworld-sft-short-full")}).T
goal = runs_table.loc["shipped (data/tinyworld-sft)", "hard accuracy %"] - 5
runs_table["meets the target"] = ((runs_table["hard accuracy %"] >= goal)
                                  & (runs_table["strictly valid %"] >= 95))
runs_table

# %% [markdown]
# Where the short runs miss the target (the last column), the tour loads the shipped checkpoints
# instead of training them here, and says so: the next cell is the one place where notebooks 05-07
# get their start from. On `colab` and `paper` they start from the runs of section 6.

# %%
if WORLD:  # tiny, smoke: the shipped full-length SFT of each variant
    carried = {v: REPO_ROOT / WORLD.init(v) for v in ("seen", "unseen")}
    short = runs_table.iloc[1:]
    print(f"short runs that meet the target: {list(short.index[short['meets the target']])}; "
          "the tour goes on from the shipped SFT:")
else:
    carried = {v: trained[v].run_dir / "merged" for v in ("seen", "unseen")}
for variant, path in carried.items():
    print(f"  {variant}: {shown(path)}")

# %% [markdown]
# ### 6.2 LoRA beside full fine-tuning
#
# LoRA trains two thin matrices per linear layer (rank 64 here) and the tag rows, and freezes
# the rest; on a 4B model that is what makes a T4 enough (section 2). On the 0.92M-parameter
# TinyWorld model memory is no object, so the question is only what each one learns in the same
# steps. The committed runs: the same 6,400 traces and 400 steps, full fine-tuning at lr 1e-3 (the
# world's preset) and LoRA at lr 2e-3 (the tiny LoRA preset), each scored at T = 1 on 200
# held-out items per tier × 4 samples.

# %% tags=["report"]
def t1(name: str) -> dict:
    out = {}
    for tier in ("easy", "hard"):
        m = committed(f"{name}-{tier}-t1")["numbers"]
        out |= {f"{tier} accuracy %": round(100 * m["accuracy"], 1),
                f"{tier} strictly valid %": round(100 * m["valid_ratio"], 1)}
    card = committed(name)["numbers"]
    return {"steps": card["steps"], "train CPU min": round(card["train_cpu_seconds"] / 60, 1),
            **out}


methods = pd.DataFrame({"full fine-tuning": t1("tinyworld-sft-short-full"),
                        "LoRA r=64 + tag rows": t1("tinyworld-sft-short-lora")}).T
better = methods["hard accuracy %"].idxmax()
print(f"same traces and steps: {better} is ahead on hard items by "
      f"{methods['hard accuracy %'].max() - methods['hard accuracy %'].min():.1f} points "
      f"(200 items x 4 samples: a gap under ~5 points is noise)")
start = 100 * committed("tinyworld-base-hard-t1")["numbers"]["accuracy"]  # the same 200 items, k 8
for method, row in methods.iterrows():
    gap = row["hard accuracy %"] - start
    print(f"{method} vs the base model it started from ({start:.1f} %): {gap:+.1f} points, "
          + ("still below its start" if gap < -5 else "back at its start or above"))
methods

# %% [markdown]
# The tiny profile fine-tunes every weight. At equal steps the two methods land within the noise
# of each other here, and a LoRA step costs no less CPU on a model this small (the table's
# `train CPU min`); what LoRA buys is memory, which decides on a 4B model and a T4 (section 2),
# not on 0.92M parameters. That is our reading of these runs, not a claim of the paper, which
# fine-tunes all weights.
#
# Neither method is back at the base model's accuracy after 400 steps, as the lines above print:
# a short cold start puts tags into samples before it has learned where they go (section 7 counts
# the samples whose tags break the grammar), which is why the tour starts from the shipped
# 1,500-step SFT (section 6.1). So on `tiny` this section compares the two methods at equal steps;
# it is not a LoRA run that works in a minute. On the GPU profiles LoRA is what fits the model
# into a T4's memory (section 2).

# %% [markdown]
# ## 7. Before and after
#
# Every model is scored on the same held-out hard items by the paper's protocol: `k` samples per
# problem at T = 1 (**accuracy** is mean@k, with pass@k), each variant decoded in its own rollout
# mode (seen: one causal stream, path 2 written after path 1; unseen: `forked`, each path its own
# row from the shared prefix, exactly the unseen mask), and greedy decoding as the labelled second
# column. **valid_ratio** is the share of samples whose format is strictly valid; a base model
# that never writes a tag is valid in that grammar (no tags, no errors), so read it next to the
# **parallel_ratio**, the share that opens a block. The rows: the base model, this notebook's
# short runs (section 6) and, on `tiny` and `smoke`, the shipped SFT the tour carries forward.

# %%
from pr1lib.evaluation.evaluate import evaluate_stage, held_out_config, load_for_eval

checkpoints = {"base": (BASE or model_config.name, "seen")}
for variant in ("seen", "unseen"):
    mode = VARIANT_ROLLOUT[variant]  # seen -> seen, unseen -> forked
    checkpoints[f"SFT {variant}, here ({trained[variant].result['steps']} steps)"] = (
        trained[variant].run_dir / "merged", mode)
    if WORLD:
        checkpoints[f"SFT {variant}, shipped"] = (carried[variant], mode)
scores, greedy_samples = {}, {}
for name, (path, mode) in checkpoints.items():
    judge = held_out_config(PROFILE, "hard", NB.table_n or config.eval_n, mode,
                            config.eval_max_new_tokens, NB.table_k, SEED,
                            model_config.prompt_style, config.source)
    scores[name], greedy_samples[name] = evaluate_stage(
        *load_for_eval(path, PROFILE, say=lambda *a: None), judge)
print(f"{judge.benchmark}: {judge.n} problems x {judge.k} samples at T = 1, and greedy")

# %% tags=["report"]
from pr1lib.evaluation.headline import change_table, change_words, paired_change
from pr1lib.notebook.expect import should_see

columns = ["accuracy", "pass_at_k", "valid_ratio", "parallel_ratio", "mean_length"]
table = pd.DataFrame({n: {**{k: m[k] for k in columns}, "greedy accuracy": m["greedy"]["accuracy"]}
                      for n, m in scores.items()}).T
if WORLD:
    should_see("TinyWorld hard: shipped seen SFT minus base, accuracy at T = 1",
               scores["SFT seen, shipped"]["accuracy"] - scores["base"]["accuracy"], PROFILE)
changes = pd.DataFrame(change_table(scores, "base")).set_index("model")
table = table.join(changes[["accuracy Δ", "accuracy 95 % interval"]])
for line in changes["accuracy: what this shows"]:
    print("what this shows:", line)
table.round(3)

# %% [markdown]
# `accuracy Δ` is each model minus the base in points, on the same problems, with a 95 % interval
# from a paired bootstrap over problems (`pr1lib.evaluation.metrics.paired_bootstrap`); the lines
# above it are computed from those intervals ("within the noise" when the interval spans zero). The
# short runs against the shipped SFT of the same variant:

# %% tags=["report"]
if WORLD:
    for variant in ("seen", "unseen"):
        here = next(n for n in scores if n.startswith(f"SFT {variant}, here"))
        change = paired_change(scores[here], scores[f"SFT {variant}, shipped"])
        print("what this shows:", change_words(f"{here} vs shipped", change))

# %% [markdown]
# What the short runs learned in their steps, in words computed from the table (the format first:
# a sample whose tags break the grammar has not learned where a block goes):

# %% tags=["report"]
from pr1lib.notebook.reports import short_sft_words

for name in scores:
    if name != "base":
        print(short_sft_words(name, scores[name], scores["base"]))

# %% [markdown]
# How to read it on `tiny` (our reading, not the paper's claim): the short runs of section 6 have
# learned the format only partly (their `valid_ratio` is far under the 95 % target) and score
# below the base model, beyond the noise; that is why section 6.1 carries the shipped SFT forward.
# The shipped SFT of each variant is strictly valid almost always and opens a block on about a
# fifth of the hard items; its sampled accuracy sits a few points above the base's (the computed
# lines say whether beyond the noise). A block the model opens on its own that rarely cannot move
# the average much, even though forcing one is worth 26 points to the seen SFT against forcing a
# one-guess answer (section 10): SFT taught the block, and which items to open it on is what RL
# learns (notebook 06).
#
# The same problems, before and after (greedy, the first two):

# %% tags=["report"]
pd.DataFrame({"gold": [s["gold"] for s in greedy_samples["base"][:2]],
              **{n: [s["completion"] for s in ss[:2]] for n, ss in greedy_samples.items()}}).T

# %% [markdown]
# ## 8. What a run leaves behind
#
# Each run folder holds the stage config and the model config (`config.json`,
# `model_config.json`), a **merged** copy that loads with a plain `from_pretrained` (`merged/`),
# with LoRA also the adapter with the six trained tag rows (`adapter/`; with a 4-bit base the
# adapter is merged into the full-precision weights), the loss log (`loss.csv`) and a run card
# with the data hash, steps, timings and metrics. Reloading needs no network. The classic failure
# with new tokens is a reloaded model whose tags are split into pieces again, or whose tag rows
# are back at their initial values; the check below decodes a trace with the reloaded tokenizer
# and compares logits with the trained model.

# %%
import torch

run = trained["unseen"]
card = json.loads((run.run_dir / "run_card.json").read_text())
print(sorted(p.name for p in run.run_dir.iterdir()))
print({k: card[k] for k in ("variant", "data_hash", "train_rows", "steps", "train_seconds",
                            "use_lora")})
reloaded, reloaded_tok = runs.load_run(run.run_dir, merged=True)
ids = reloaded_tok(example_row["prompt"] + example_row["completion"],
                   return_tensors="pt")["input_ids"]
with torch.no_grad():
    gap = (reloaded(input_ids=ids).logits - run.model.eval()(input_ids=ids).logits).abs().max()
single = all(len(reloaded_tok.encode(t, add_special_tokens=False)) == 1
             for t in ("<Parallel>", "<Path>", "<Summary>"))
print("tags are single tokens after reload:", single,
      "| max logit gap, merged vs trained:", f"{gap.item():.1e}")

# %% [markdown]
# You should see: each SFT run wrote `merged/` and a run card, and its training loss fell.

# %%
for variant, r in trained.items():
    assert (r.run_dir / "merged" / "config.json").exists(), variant
    assert (r.run_dir / "run_card.json").exists(), variant
    assert r.rows[-1]["loss"] < r.rows[0]["loss"], (variant, r.rows)
assert single  # the tags are still single tokens after the reload

# %% [markdown]
# The same stage from the command line (it prints the config, trains, and ends with one JSON line):
#
# ```bash
# python -m pr1lib sft --profile tiny --world tinyworld --variant both   # the shipped recipe
# python -m pr1lib sft --profile colab --set load_in_4bit=True \
#     --data runs/02_cold_start_data-colab/sft
# ```

# %% [markdown]
# ## 9. What the unseen mask changed in training
#
# The shipped seen and unseen SFT saw identical data in the same order (the same data hash); they
# differ only in the mask and positions their collator built. Training loss alone hides the
# difference, which is about **what the model expects to see**. An unseen model's paths are
# decoded forked (each path sees the prompt and `<Parallel>` only); a seen model's are re-read in
# order before the summary, as in the paper's Seen rollout. We score held-out teacher traces (the
# *test* split; SFT saw the *train* split) with each model under each view, and report the mean
# negative log-likelihood per token, on the tokens of the later path (the only ones whose context
# differs) and on the whole response.

# %%
from pr1lib.data.sources import load_world
from pr1lib.decoding.structure import structure_tensors, structured_logprobs
from pr1lib.format.prompts import chat_prompt
from pr1lib.worlds.teachers import RuleTeacher

teacher = WORLD.rule_teacher(seed=SEED) if WORLD else RuleTeacher(seed=SEED)
problems = load_world(WORLD.source("hard") if WORLD else "tinygsm-easy", NB.nll_n, "test", SEED)
held_out = [(chat_prompt(r["question"], tokenizer, model_config.prompt_style),
             teacher.trace(r)["text"]) for r in problems]


# %%
def nll_table(named, pairs):
    """Mean NLL per token of each model under each view: later-path tokens and whole responses."""
    seqs = [tokenizer.encode(p + r, add_special_tokens=False) for p, r in pairs]
    starts = [len(tokenizer.encode(p, add_special_tokens=False)) for p, _ in pairs]
    width = max(map(len, seqs))
    x = torch.tensor([s + [tokenizer.pad_token_id] * (width - len(s)) for s in seqs])  # (B, L)
    real = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])  # (B, L)
    response = real.bool() & (torch.arange(width)[None] >= torch.tensor(starts)[:, None])  # (B, L)
    path = structure_tensors(x, tokenizer, "unseen", starts, padding_mask=real)["path"]  # (B, L)
    first = torch.where(path >= 0, path, 10**9).amin(dim=1, keepdim=True)  # (B, 1)
    later = (path > first) & response  # (B, L) tokens of the second path
    rows = {}
    for name, m in named.items():
        for mode in ("seen", "unseen"):
            with torch.no_grad():
                lp = structured_logprobs(m.eval(), x, tokenizer, mode, starts, padding_mask=real)
            nll = -lp  # (B, L)
            rows[(name, mode)] = {"later path": nll[later].mean().item(),
                                  "whole response": nll[response].mean().item()}
    return pd.DataFrame(rows).T.rename_axis(["model", "scored as"])


# %%
plain_base = models.load_training_policy(model_config.replace(use_lora=False, load_in_4bit=False),
                                         train_tag_rows=False)[0]  # the base, with the tag rows
scored = {"base": plain_base, **{f"SFT {v}": load_for_eval(p, PROFILE, say=lambda *a: None)[0]
                                 for v, p in carried.items()}}
nll = nll_table(scored, held_out)

# %% tags=["report"]
nll.unstack("scored as").loc[list(scored)].round(3)

# %% [markdown]
# How to read it (with the tiny model; the random `smoke` model only shows that the code runs):
#
# - Each trained model should do best under the view it was trained on, and worse under the other.
#   A seen model's later path learned to read its sibling; an unseen model's never did.
# - The summary and the final answer see every path under both views, so the whole-response numbers
#   move less than the later-path ones.
#
# This run's numbers, in words:

# %% tags=["report"]
later = nll["later path"].unstack()  # rows: model, columns: the view it is scored under
for name, own_view in (("SFT seen", "seen"), ("SFT unseen", "unseen")):
    other = "unseen" if own_view == "seen" else "seen"
    own, swapped = later.loc[name, own_view], later.loc[name, other]
    print(f"{name}: later-path NLL {own:.3f} under the view it was trained on ({own_view}), "
          f"{swapped:.3f} under {other} ({swapped - own:+.3f})")

# %% [markdown]
# ## 10. Does a block pay? Forced block vs forced plain
#
# SFT taught the format; whether a block is *worth* opening is a separate question, and RL only
# amplifies what pays. The comparison here holds the model fixed and changes what it writes: a block
# (in TinyWorld, the teacher's search of all four pairs) against one plain guess. It does not tell a
# block from the same search written without tags; notebook 07's controls do that. `blockcost`
# answers it per tier on the same held-out problems: it samples each one at T = 1 once forced to
# open with a block and once with `<Parallel>` banned, and reports both accuracies, their difference
# and a paired-bootstrap 95 % interval. The committed runs for the shipped TinyWorld SFT of each
# variant (200 problems × 4 samples per tier; the command is in each card, `python -m pr1lib
# blockcost ...` reruns it in about two minutes):

# %% tags=["report"]
cost_cards = {"seen": "tinyworld-blockcost", "unseen": "tinyworld-blockcost-unseen"}
costs = pd.DataFrame({(v, tier.split("-")[1]): {
    "forced block": r["acc_block"], "forced plain": r["acc_plain"], "block − plain": r["diff"],
    "95 % interval": f"{r['ci95'][0]:+.3f} to {r['ci95'][1]:+.3f}"}
    for v, name in cost_cards.items()
    for tier, r in committed(name)["numbers"].items() if tier.startswith("tinyworld-")}).T
costs

# %% [markdown]
# Read the hard rows first: with a block, the seen SFT is right 26 points more often than when made
# to answer plainly (interval +21 to +32), the unseen one 13 points (+8 to +18;
# `results/tinyworld-blockcost.json`, `results/tinyworld-blockcost-unseen.json`). The unseen paths
# cannot see each other, so the second path cannot tell which cheap price the first took. On easy
# items a block only repeats the work: it costs the seen model nothing measurable (−0.6 points,
# interval −3.0 to +1.8) and the unseen one 3.3 points (−6.1 to −0.5). Yet left to choose, the SFT
# opens a block on only a fifth to a quarter of the hard items (section 7's `parallel_ratio`; the
# cards of `results/tinyworld-sft*-hard-t1.json`: 26 % seen, 23 % unseen): SFT taught the block, not
# when to use it. That is Stage 2 and 3's job (notebooks 05 and 06).

# %% [markdown]
# ## 11. The contrast: when a block does not pay (TinyGSM)
#
# This project's first tiny world, TinyGSM, has no reason for a block: every item is a forward
# computation, so two paths can only do the same work twice. Its cold start is not TinyWorld's
# recipe with another world swapped in: it is the `tiny` profile's own preset, which differs in
# the fields the cell below prints from the two committed configs (the TinyGSM run's card,
# `results/sft-tiny.json`, and the shipped TinyWorld SFT's `card.json`). Read every contrast of
# this section with those differences in mind.

# %%
gsm_config = committed("sft-tiny")["numbers"]["config"]
world_card = REPO_ROOT / "data" / "tinyworld-sft" / "card.json"
world_config = json.loads(world_card.read_text())["config"]
fields = ["source", "use_lora", "lora_r", "train_n", "plain_share", "num_train_epochs",
          "learning_rate"]
recipes = pd.DataFrame({"TinyGSM SFT": {f: gsm_config[f] for f in fields},
                        "TinyWorld SFT (shipped)": {f: world_config[f] for f in fields}})
recipes["differs"] = recipes.iloc[:, 0].astype(str) != recipes.iloc[:, 1].astype(str)
recipes  # lora_r is unused where use_lora is False

# %% [markdown]
# The committed TinyGSM cards below (hard items × 8 samples at T = 1: the first 300 held-out items
# for the SFTs, the first 200 for the base model) show the format learned less well than in
# TinyWorld, and paid for in accuracy:

# %% tags=["report"]
contrast = {"base model": "tiny-base-hard-t1", "SFT seen": "sft-tiny-seen-hard-t1",
            "SFT unseen (forked)": "sft-tiny-unseen-hard-t1",
            "SFT seen, easy traces only": "sft-tiny-easyonly-seen-hard-t1"}
pd.DataFrame({name: {k: round(100 * committed(card)["numbers"][k], 1)
                     for k in ("accuracy", "valid_ratio", "parallel_ratio")}
              for name, card in contrast.items()}).T  # TinyGSM hard, mean@8 at T = 1 (%)

# %%
valid = {f"{world} SFT {v}": committed(card)["numbers"]["valid_ratio"]
         for world, v, card in (("TinyGSM", "seen", "sft-tiny-seen-hard-t1"),
                                ("TinyGSM", "unseen", "sft-tiny-unseen-hard-t1"),
                                ("TinyWorld", "seen", "tinyworld-sft-hard-t1"),
                                ("TinyWorld", "unseen", "tinyworld-sft-unseen-hard-t1"))}
print("strictly valid on hard items at T = 1: "
      + ", ".join(f"{name} {share:.1%}" for name, share in valid.items()))
assert max(valid["TinyGSM SFT seen"], valid["TinyGSM SFT unseen"]) < min(
    valid["TinyWorld SFT seen"], valid["TinyWorld SFT unseen"])  # the prose below says so

# %% [markdown]
# What it shows: the TinyGSM SFT opens a block on almost every hard item, writes it strictly
# valid far less often than TinyWorld's SFT does (the line above), and its accuracy falls from the
# base model's 19.2 % to 5.8 % (seen) and 3.8 % (unseen); easy traces alone left 0.7 %, because a
# model this small forgets what it does not rehearse. Why, in our reading (not the paper's
# claim): the block there is pure overhead, a second copy of a computation the model already
# finds hard, so every extra token is another chance to slip, and the summary has to copy the
# right number out of two. Reading the wrong answers while designing its rule teacher showed the
# habits the traces teach (paths that mangle operands, summaries that copy whichever number came
# last, a bias towards the operator the summaries restate most). RL then has nothing to amplify
# (notebook 06 shows the ablation there). TinyWorld was built so that the block's two paths do
# different work that is cheap to check; the paper's math problems sit closer to it than to
# TinyGSM.

# %% [markdown]
# ## Summary
#
# - Stage 1 is TRL's `SFTTrainer` with completion-only loss and a per-sample token mean; the model
#   trains every weight (TinyWorld, paper) or LoRA on every linear layer plus the six tag rows,
#   over an NF4 base where memory is tight (colab).
# - Seen and unseen SFT differ only in what the collator hands the model: unseen adds a 4D mask that
#   hides sibling paths from each other and position ids that restart at each path, parsed from the
#   response so the prompt stays sequential; each trained model scores its later paths best under
#   the view it was trained on (section 9).
# - A TinyWorld SFT that fits a tour does not reach the shipped one: section 6.1's table has the
#   committed runs against the target, so notebooks 05-07 start from `data/tinyworld-sft` and
#   `data/tinyworld-sft-unseen`, loaded visibly in one cell.
# - On the same traces and steps, LoRA and full fine-tuning land within the noise of each other on
#   this model (section 6.2); full fine-tuning is the tiny default because memory is no object at
#   0.92M parameters and LoRA saves no time there.
# - Section 7 reports every change from the base with a paired 95 % interval over problems, and
#   says in a computed line whether it is beyond the noise.
# - Whether a block pays is measured, not assumed (section 10): in TinyWorld, forced against one
#   plain guess, it is worth 26 points on hard items to the seen SFT (whether the search inside it
#   needs the tags is notebook 07's question); in TinyGSM, the contrast of section 11, a block does
#   not pay and SFT costs accuracy.

# %% [markdown]
# ## Exercises
#
# 1. Train with `config.replace(train_tag_rows=False)`. What happens to the valid block rate, and
#    what does `pr1lib.decoding.tokens.tag_similarity` say about the tag rows afterwards?
#
#    <details><summary>Hint</summary>
#
#    Compare `tag_similarity(model, tokenizer)` of the trained model with that of a freshly loaded
#    base (`models.load_training_policy`): which rows can move when they are not trainable? Then
#    think about how close `<Path>` and `</Path>` start out.
#    </details>
# 2. Put the official bug back: in a copy of `ParallelCollator`, pass `response_start=None` and use
#    a prompt that mentions `<Parallel>` and `<Path>`. Print the prompt's position ids. Which tokens
#    land on the same positions, and what does the model see at inference instead?
#
#    <details><summary>Hint</summary>
#
#    Subclass `ParallelCollator` and call `structure.attention_inputs(..., response_start=None)`.
#    A prompt that only names the tags in prose may parse as nothing; one that shows an example
#    block with two paths does not. Compare the prompt's positions with `range(len(prompt))`.
#    </details>

# %% [markdown]
# 3. Rebuild the cold-start set with `teachers.RuleTeacher(original_path="any", summary="value")`
#    (pass it to `pr1lib.data.coldstart.run_coldstart` and the folder as `DATA`), train the seen
#    variant and read ten wrong answers. Which of the habits named in the TinyGSM contrast (section
#    11) come back?
#
#    <details><summary>Hint</summary>
#
#    `run_coldstart(ColdStartConfig(...), folder, teacher=...)` writes `folder/dataset`; pass
#    `folder` to `sft.run_sft`. In the wrong answers, compare each summary's number with the paths'
#    last numbers, and each path's operands with the question's.
#    </details>
# 4. Switch `loss_reduction` to `"token"` and compare the loss curves. Which rows weigh more under
#    each reduction, and when would the difference matter for traces of very different lengths?
#
#    <details><summary>Hint</summary>
#
#    `ParallelSFTTrainer.compute_loss` has both reductions. Write down the weight of one row in
#    each for a batch of rows with 100 and 400 completion tokens.
#    </details>
# 5. TinyWorld's preset already turns half its rows plain. Train the profile's own (TinyGSM)
#    preset that way, `SFTStageConfig.for_profile(PROFILE, plain_share=0.5)`: half the traces lose
#    their block (`pr1lib.format.grammar.linearize` keeps the first path and drops the summary).
#    Predict the greedy parallel ratio after SFT, then compare it with the share of sampled answers
#    (T = 1) that open a block. Notebook 06 §7 runs the reward ablation from an SFT checkpoint.
#
#    <details><summary>Hint</summary>
#
#    `run.result["after"]` has the sampled `parallel_ratio` and `greedy["parallel_ratio"]`. Greedy
#    takes the likeliest token at the point where a block may open: what does it do when that
#    probability is 0.45, or 0.55?
#    </details>
#
# Solutions, with the reasoning: [solutions/04_sft_lora.py](../solutions/04_sft_lora.py)
# (`python solutions/04_sft_lora.py` runs them).

# %% [markdown]
# # 00 · The tiny world: TinyGSM and the tiny base model
#
# **Goal:** meet the offline task and the small pretrained model that let every later
# notebook show real learning on a laptop CPU, and see how that model was made.
#
# You will learn
# - what TinyGSM problems look like, and why they have exactly GSM8K's record shape;
# - what the tiny Qwen3-architecture model and its tokenizer are, and how well the model
#   solves each tier, greedy and when sampling;
# - how to re-train it with `python -m pr1lib pretrain-tiny`.
#
# ![The recipe, its three lanes, and the notebook for each box](figures/recipe.png)
#
# Terms: [glossary](../docs/glossary.md) · the whole recipe in one picture:
# [docs/recipe.md](../docs/recipe.md)

# %% tags=["parameters"]
PROFILE = None  # smoke | tiny | colab | paper (None: $PR1_PROFILE or auto)
SEED = 0

# %% [markdown]
# *On Colab (or anywhere `pr1lib` is not installed) the next cell fetches this repository and
# installs it; elsewhere it does nothing. On Colab, mount Google Drive first (Files ▸ Mount
# Drive) to keep your runs when the VM is recycled: they then go to `MyDrive/pr1-runs`, and
# rerunning a notebook resumes from its last checkpoint.*

# %%
REPO_URL = "https://github.com/pr1-tutorial/pr1"  # a fork: `make repo-url URL=...`
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
    if not (os.path.isdir("pr1") or quiet("git", "clone", "-q", "--depth",
                                          "1", REPO_URL, "pr1")):
        raise SetupStopped(f"could not clone {REPO_URL}: no network, or "
                           "no such repository (a fork: set REPO_URL)")
    if not quiet(sys.executable, "-m", "pip", "install", "-q", "-e",
                 "pr1[colab]"):
        raise SetupStopped("pip could not install ./pr1 (to see why: "
                           "pip install -e 'pr1[colab]')")
    sys.path.insert(0, os.path.abspath("pr1"))

# %%
from pr1lib.runtime import start_notebook

PROFILE = start_notebook(PROFILE, SEED)  # check the profile, seed everything, print versions

# %% [markdown]
# ## 1. TinyGSM: grade-school stories made by a program
#
# `pr1lib.tasks.generate(n, tier, split, seed)` writes word problems about one person's
# pile of things. Each arithmetic step is an answer line with a GSM8K calculator note
# `<<a+b=c>>`, and the answer ends with `#### N`. Two tiers play the roles of the paper's
# two data sets: **easy** (1–2 steps, small numbers) stands in for GSM8K, **hard** (3–5 steps,
# numbers up to 999) for DAPO-Math, where RL has room to improve the model.

# %%
import pandas as pd

from pr1lib.tasks import generate

pd.set_option("display.max_colwidth", 120)
samples = [dict(tier=tier, **r) for tier in ("easy", "hard")
           for r in generate(3, tier, "train", seed=SEED)]
pd.DataFrame(samples)

# %% [markdown]
# The held-out `test` split of each tier never shares a question with `train`: a question
# is in `test` exactly when a hash of its text falls in a fixed bucket (20% of all questions),
# so no seed can leak one into the other.

# %% [markdown]
# You should see: no question of either tier in both splits, and each in the split its hash picks.

# %%
from pr1lib.tasks import split_of

for tier in ("easy", "hard"):
    train = {r["question"] for r in generate(500, tier, "train", seed=SEED)}
    test = {r["question"] for r in generate(500, tier, "test", seed=SEED)}
    assert not train & test, f"{tier}: a question is in both splits"
    assert {split_of(q) for q in train} == {"train"} and {split_of(q) for q in test} == {"test"}

# %% [markdown]
# ## 2. Side by side with real GSM8K
#
# Real problems come from `PR1_DATA_DIR` (or `../shared/data`), else from the hub when
# online. Both kinds go through the same parser, `pr1lib.prompts.split_gsm8k_answer`,
# which is why every later stage treats them the same way.

# %% tags=["report"]
from pr1lib.data import DataNotFoundError, load_rows
from pr1lib.prompts import split_gsm8k_answer

try:
    real = load_rows("gsm8k", "test", limit=3)  # raw GSM8K rows
except DataNotFoundError as err:
    real = []
    print("Skipping real GSM8K (neither a local copy nor the hub):", err)


def shape(record: dict, source: str) -> dict:
    steps, final = split_gsm8k_answer(record["answer"])
    return {"source": source, "question": record["question"][:90],
            "steps": len(steps), "final": final}


rows = [shape(r, "GSM8K") for r in real]
rows += [shape(s, f"TinyGSM-{s['tier']}") for s in samples]
pd.DataFrame(rows)

# %% [markdown]
# ## 3. The tokenizer
#
# The tiny tokenizer is a byte-level BPE with 512 tokens, trained on TinyGSM text: template
# words are single tokens, while every digit stays its own token, so arithmetic is digit by
# digit. Being byte-level it can encode *any* text exactly, including GSM8K and the
# parallel tags. The tags are not in its vocabulary yet: notebook 01 adds them, just as it
# does for Qwen's tokenizer.

# %%
from pr1lib.config import NotebookConfig
from pr1lib.models import load_policy
from pr1lib.prompts import linear_solution, prompt_text

# colab/paper use Qwen; this notebook is about the tiny model, so it uses "tiny"
NB = NotebookConfig.for_profile(PROFILE)  # this notebook's sizes (pr1lib.config presets)
model, tokenizer, _ = load_policy(NB.model_profile)
first = samples[0]
text = (prompt_text(first["question"], "tiny")
        + linear_solution(first["answer"]))
ids = tokenizer(text, add_special_tokens=False)["input_ids"]
print(f"{len(text)} characters -> {len(ids)} tokens; "
      f"vocabulary {len(tokenizer)}")
print(tokenizer.convert_ids_to_tokens(ids)[:40])
print("<Path> ->", tokenizer.tokenize("<Path>"))

# %% [markdown]
# ## 4. The tiny base model
#
# A Qwen3 causal LM from `transformers` (`Qwen3ForCausalLM`), so attention masks, KV caches
# and LoRA behave exactly as on the real model, only much smaller. In the `smoke` profile
# it is the same architecture with random weights, built in memory.

# %% tags=["report"]
from pr1lib.paths import project_data_dir

cfg = model.config
weights = project_data_dir() / "tiny-base" / "model.safetensors"
size_mb = weights.stat().st_size / 2**20 if weights.exists() else float("nan")
pd.DataFrame([{
    "profile": PROFILE,
    "parameters (M)": round(model.num_parameters() / 1e6, 2),
    "hidden": cfg.hidden_size, "layers": cfg.num_hidden_layers,
    "heads": cfg.num_attention_heads, "MLP": cfg.intermediate_size,
    "context": cfg.max_position_embeddings, "vocab": cfg.vocab_size,
    "safetensors (MB)": round(size_mb, 2),
}])

# %% [markdown]
# ## 5. What it writes
#
# The model reads the short `tiny` prompt (`Problem: …\nSolution:\n`) and writes a linear
# chain of thought that ends with `Final Answer: N`. Greedy decoding, held-out problems:

# %%
from pr1lib.pretrain import generate_solutions, score

shown = (generate(NB.show, "easy", "test", SEED)
         + generate(NB.show, "hard", "test", SEED))
outs = generate_solutions(model, tokenizer, [r["question"] for r in shown],
                          max_new_tokens=NB.max_new_tokens)
for record, out, ok in zip(shown, outs, score(outs, shown)):
    print(record["question"], "\n---", "correct" if ok else "WRONG")
    print(out, "\n")

# %% [markdown]
# ## 6. Accuracy per tier
#
# GRPO learns only from groups whose samples disagree, so the base model should be good
# but not perfect: clearly above chance on `easy`, with headroom on `hard`, and still
# right fairly often when sampling at temperature 1.0. We measure a small fresh sample here
# (the `smoke` model is random, so expect zeros there).

# %% tags=["report"]
from pr1lib.pretrain import evaluate_accuracy

measured = []
for tier in ("easy", "hard"):
    records = generate(NB.eval_n, tier, "test", SEED)
    for temperature in (0.0, 1.0):
        acc = evaluate_accuracy(model, tokenizer, records, temperature,
                                NB.max_new_tokens, SEED)
        measured.append({"tier": tier, "temperature": temperature,
                         "n": NB.eval_n, "accuracy": acc})
pd.DataFrame(measured)

# %% [markdown]
# The model card in `data/tiny-base` records the numbers measured when the model was
# shipped (200 held-out problems per tier) together with the training time:

# %% tags=["report"]
import json

card_path = project_data_dir() / "tiny-base" / "card.json"
card = json.loads(card_path.read_text()) if card_path.exists() else None
if card:
    print(f"{card['steps']} steps in {card['train_time_s'] / 60:.1f} min "
          f"({card['machine']}), {card['parameters'] / 1e6:.2f}M parameters")
    display(pd.Series(card["accuracy"], name="accuracy (200 per tier)"))
else:
    print("data/tiny-base has no card yet: build it with pretrain-tiny.")

# %% [markdown]
# ## 7. How it learned: the loss curve
#
# `pretrain-tiny` logs the mean next-token loss on solution tokens every 10 steps to
# `loss.csv`. Every step draws fresh problems, so this is also a held-out loss.

# %% tags=["report"]
import plotly.express as px

loss_csv = project_data_dir() / "tiny-base" / "loss.csv"
if loss_csv.exists():
    curve = pd.read_csv(loss_csv)
    fig = px.line(curve, x="step", y="loss", log_y=True,
                  title="tiny-base pretraining loss (solution tokens)")
    fig.show()

# %% [markdown]
# ## 8. Re-training it
#
# The full recipe is one command; it trains the tokenizer, then the model, and writes the
# weights, `loss.csv`, `card.json` and a model card. It is deterministic given the seed,
# checkpoints every 100 steps and resumes if interrupted:
#
# ```
# python -m pr1lib pretrain-tiny --out data/tiny-base --seed 0
# ```
#
# Here we run its `smoke` preset (10 steps of 8 problems), enough to watch the loss fall.

# %%
from pr1lib.config import PretrainConfig
from pr1lib.paths import runs_dir
from pr1lib.pretrain import pretrain

smoke_cfg = PretrainConfig.for_profile("smoke", seed=SEED)
run = pretrain(smoke_cfg, runs_dir() / "00_pretrain_smoke", progress=False,
               evaluate=False)
pd.read_csv(runs_dir() / "00_pretrain_smoke" / "loss.csv")

# %% [markdown]
# ## Summary
#
# - TinyGSM records have GSM8K's exact shape, so one parser and one checker serve both.
# - `easy` plays GSM8K and `hard` plays DAPO; their test splits never overlap training.
# - The tiny base model is a real `Qwen3ForCausalLM`; its tokenizer has no parallel tags yet.
# - It solves most easy problems, fewer hard ones, and keeps mixed rewards when sampling:
#   the starting point the cold-start SFT and GRPO notebooks need.
#
# ## Exercises
#
# 1. Generate 1,000 `hard` problems and plot the distribution of final answers. Which
#    step kinds make the numbers large?
#
#    <details><summary>Hint</summary>
#
#    `pr1lib.tasks.generate(1000, "hard")` gives the records; the final answer follows `####`. Tag
#    each problem with the operators of its `<<a op b=c>>` steps and compare the answers of the
#    problems that have a `*` step with those that do not.
#    </details>
# 2. Measure accuracy at temperature 0.5 and 1.5. Predict first: which way does it move,
#    and what would that do to the fraction of GRPO groups with mixed rewards?
#
#    <details><summary>Hint</summary>
#
#    Pass `temperature` to `pr1lib.pretrain.evaluate_accuracy`. For the groups: a group of G samples
#    is mixed with probability $1 - p^G - (1 - p)^G$; which $p$ makes that largest?
#    </details>
# 3. Re-run `pretrain-tiny` with `--set hard_fraction=0.5` for 300 steps (about five minutes):
#    does `hard` accuracy rise at the cost of `easy`?
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

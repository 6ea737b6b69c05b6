# %% [markdown]
# # 05 · The rewards of GRPO: what each one pays for, and when a block pays
#
# **Goal:** know the reward modes of Parallel-R1 well enough to predict what GRPO will teach with
# each one, before spending any compute on training (that is notebook 06).
#
# You will learn
# - the reward modes as TRL reward functions, and the two graders that decide "correct" and
#   "valid" (the paper's official code, and this project's stricter grammar);
# - which "hacks" each reward refuses to pay for;
# - how the **alternating** reward (the paper's S2) switches between accuracy and the tiered reward
#   by step, previewed before training;
# - the arithmetic of the tiered reward: how much accuracy a block may cost before it stops paying;
# - a pre-flight **doctor** that answers "why is my reward zero?" before a long run.
#
# Words in bold are defined in the [glossary](../docs/glossary.md); where each piece sits in the
# recipe is in [docs/recipe.md](../docs/recipe.md#7-rewards).
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/pr1-tutorial/pr1/blob/main/notebooks/05_grpo_rewards.ipynb)

# %% tags=["parameters"]
PROFILE = None  # smoke | tiny | colab | paper (None: $PR1_PROFILE or auto)
SEED = 0
# SFT run or model folder the doctor loads; None: the world's shipped seen SFT (tiny, smoke:
# data/tinyworld-sft), else notebook 04's seen run
INIT = None

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
# ## 1. The reward modes
#
# Every reward follows TRL's contract `fn(completions, answer, **kwargs) -> list[float]` and is
# built from three facts about a completion: is the final answer right, are the tags valid, how many
# `<Parallel>` blocks are there. One registry, `pr1lib.rewards.modes.REWARD_MODES`, lists them; the
# training stages, the control panel of notebook 06 and the verl export all read it.

# %%
import pandas as pd

from pr1lib.rewards.modes import REWARD_MODES

pd.set_option("display.max_colwidth", 100)
pd.DataFrame([{"mode": m.name, "pays for": m.pays_for, "range": m.range,
               "follows the step": m.scheduled} for m in REWARD_MODES.values()]).set_index("mode")

# %% [markdown]
# `accuracy` is the paper's S1 and Stage 3 of the seen recipe; `parallel_correct` is Stage 2 of the
# seen recipe; `alternating` is S2 (accuracy, with the `tiered` reward on two steps of every ten);
# `structure` is this project's extra arm for the ablation: it pays for a valid block whatever the
# answer. S1 and S2 are reward *schemes*, not stages.

# %% [markdown]
# ## 2. The hacks they must not pay for
#
# The table scores adversarial completions, the tricks seen in the wild against format rewards
# (repeated or nested blocks, empty paths, the answer hidden inside a path, several candidate
# answers, a hedge like "12 or 11"). Read a row as "what would GRPO teach if it found this
# completion": a row where a parallel-aware reward pays more than for `honest_parallel` is a hack
# that reward would learn.

# %%
from pr1lib.rewards.hacking import hacking_table

hacks = pd.DataFrame(hacking_table()).set_index("name")
hacks[["accuracy", "parallel_correct", "tiered", "structure", "why"]]

# %% [markdown]
# You should see: no completion scores more than `honest_parallel` under a parallel-aware reward,
# and `honest_parallel` earns the tiered reward's maximum, 1.2.

# %%
from pr1lib.notebook.expect import should_see

aware = hacks[["parallel_correct", "tiered"]]
beaten = (aware > aware.loc["honest_parallel"]).any(axis=1).sum()
should_see("hacks paid more than honest_parallel", beaten, PROFILE)
should_see("tiered reward of honest_parallel",
           hacks.loc["honest_parallel", "tiered"], PROFILE)
for mode in ("parallel_correct", "tiered"):
    assert hacks[mode].max() == hacks.loc["honest_parallel", mode], f"{mode} pays a hack more"
assert hacks.loc["honest_parallel", "tiered"] == 1.2  # the tiered maximum

# %% [markdown]
# Which rewards pay for a completion whose answer is wrong (its `accuracy` is -1)? The cell prints,
# for each parallel-aware reward, the hacks it pays, and what `structure` gives `empty_paths`.

# %%
wrong = hacks[hacks["accuracy"] < 0]
fooled = {m: list(wrong.index[wrong[m] > 0]) for m in aware.columns.tolist() + ["structure"]}
for mode, names in fooled.items():
    print(f"{mode:>16} pays for a wrong answer in: {', '.join(names) or 'none'}")
print(f"       structure gives empty_paths {hacks.loc['empty_paths', 'structure']:+.1f}")
assert not fooled["parallel_correct"] and not fooled["tiered"] and fooled["structure"]
assert hacks.loc["empty_paths", "structure"] < 0  # the strict validator rejects an empty path

# %% [markdown]
# Only `structure` is fooled: it pays +1 for every wrong-answer hack the lines above list
# (`answer_only_in_path` and the several-candidate tricks), because it never looks at the answer. It
# still refuses a malformed block: `empty_paths` gets -1.0, since the strict validator rejects a
# path with nothing in it. The paper does not name the reward of its "parallel only" arm (Table 4);
# this project runs that arm as the tiered reward on every step, which the paper's 80.3 % blocks
# ([its Table 4](../docs/recipe.md#113-reward-ablation-table-4); not ~100 %) fit better than the
# strict parallel-and-correct one
# ([docs/recipe.md](../docs/recipe.md#13-what-could-not-be-confirmed)), and adds `structure` as an
# arm of its own.

# %% [markdown]
# ## 3. Two graders
#
# "Correct" and "valid" are decided by a **grader** (`pr1lib.rewards.graders`). `official`
# reproduces the official reward code: on GSM8K-style problems the *first* `Final Answer:` number
# compared as a string (`$4` is wrong), on DAPO-style ones the last answer line in the last 300
# characters after Minerva normalisation; tags pass its lenient stack check. `project` is this
# project's: the last `Final Answer:` outside paths compared by value (`$21.00` = `21`), and the
# strict grammar (an empty path or text between paths is invalid). RL uses `project`; evaluation
# reports both, with the official one as `accuracy`, as the paper does.

# %%
official = pd.DataFrame(hacking_table(grader="official")).set_index("name")
both = pd.DataFrame({"tiered (project)": hacks["tiered"], "tiered (official)": official["tiered"]})
both[both["tiered (project)"] != both["tiered (official)"]]

# %% [markdown]
# The rows that differ are the ones the strict grammar refuses and the official stack check lets
# through: a nested block, an unclosed summary, lone paths, an empty path.

# %% [markdown]
# ## 4. The alternating schedule, before training
#
# The paper's S2 reward uses accuracy on 8 of every 10 steps and the tiered reward on the other 2.
# `alternating_reward` decides by TRL's `trainer_state.global_step` (0 while the first step runs),
# so the tiered steps are TRL's log rows 9, 10, 19, 20, … — the paper's 1-based steps. Notebook 06's
# control panel previews the same strip as you move its sliders.

# %%
from pr1lib.notebook.panel import PanelState, schedule_figure

schedule_figure(PanelState(reward="alternating", window=10, parallel_steps=2, steps=30))

# %% [markdown]
# ## 5. When does a block pay?
#
# Say a block changes the accuracy of an answer from $p$ (no block) to $p_b$. On an accuracy step
# the expected reward is $2p - 1$ without a block and $2p_b - 1$ with one; on a tiered step a
# correct answer with a block earns $1 + b$ (the paper's $b = 0.2$), so $p_b(2 + b) - 1$. If a share
# $f$ of the steps is tiered (S2: $f = 0.2$), a block raises the expected reward only if
#
# $$p - p_b \;<\; p \cdot \frac{f b}{2 + f b}.$$
#
# With $p = 20\,\%$ and the paper's $b$ and $f$, a block may cost at most 0.4 points of accuracy.
# RL amplifies whatever pays; so in a world where a block costs accuracy, alternating cannot keep
# blocks, and the paper's ordering of Table 4 needs blocks that **help** on hard problems.

# %%
from pr1lib.rewards.modes import block_break_even

rows = [{"tiered share f": f, "bonus b": b, "accuracy p": p,
         "largest cost (points)": round(100 * block_break_even(p, b, f), 2)}
        for f in (0.2, 0.5, 1.0) for b in (0.2, 1.0) for p in (0.2, 0.5)]
pd.DataFrame(rows)

# %% tags=["report"]
import plotly.graph_objects as go

share = [i / 20 for i in range(21)]
fig = go.Figure(layout=dict(title="How much accuracy a block may cost and still pay (p = 20 %)",
                            xaxis_title="share of tiered steps f", height=340,
                            yaxis_title="largest accuracy cost (points)"))
for b in (0.2, 0.5, 1.0):
    fig.add_scatter(x=share, y=[100 * block_break_even(0.2, b, f) for f in share], name=f"b = {b}")
fig

# %% [markdown]
# ### The dose-response, measured
#
# The formula says the bonus decides whether blocks survive where they cost little. The sweep below
# tests it on TinyWorld's easy items, where a forced block costs the SFT model −0.6 points
# (`results/tinyworld-blockcost.json`): Stage-2 runs from `data/tinyworld-sft` with the alternating
# reward at 0, 2, 5 and 10 tiered steps per window of 10 (b = 0.2), and at b = 0, 0.2, 0.5 and 1
# with the paper's 2 of 10, then the share of held-out easy samples that open a block. The full
# sweep is a committed result card
# (`python -m pr1lib grpo --world tinyworld --dose-response --steps 30`); without it the cell runs
# the two ends of the dose axis at this profile's size.

# %%
import json

from pr1lib.experiments.dose import dose_response
from pr1lib.store.paths import REPO_ROOT, runs_dir

card = REPO_ROOT / "results" / "tinyworld-dose.json"
if card.exists():
    sweep = json.loads(card.read_text())
    print("the full sweep:", sweep["command"])
    dose = pd.DataFrame(sweep["numbers"]["rows"])
else:
    dose = pd.DataFrame(dose_response(PROFILE, seed=SEED, arms=[(0, 0.2), (10, 0.2)],
                                              out=runs_dir() / f"05_grpo_rewards-{PROFILE}/dose"))
dose

# %% tags=["report"]
from plotly.subplots import make_subplots

fig = make_subplots(rows=1, cols=2, subplot_titles=("tiered steps per 10 (b = 0.2)",
                                                    "bonus b (2 tiered steps per 10)"))
for col, knob, rows in ((1, "tiered_steps", dose[dose.bonus == 0.2]),
                        (2, "bonus", dose[dose.tiered_steps == 2])):
    rows = rows.sort_values(knob)  # the runs come in sweep order, not along this knob
    for key, colour in (("parallel_ratio", "#E69F00"), ("accuracy", "#0072B2")):
        fig.add_scatter(x=rows[knob], y=100 * rows[key], name=key, row=1, col=col,
                        marker_color=colour, showlegend=col == 1)
fig.update_yaxes(title="share of held-out samples (%)", col=1)
fig.update_layout(height=340, title="TinyWorld easy items after Stage 2: held-out samples (%)")
fig

# %% [markdown]
# Read the committed sweep (`results/tinyworld-dose.json`: 30 steps, 100 held-out easy problems × 4
# samples, seed 0): with no tiered step the share of samples that open a block falls from 31 % to
# 15 % (a block costs a little, and accuracy alone pays nothing for it); 2, 5 and 10 tiered steps
# per window raise it to 36 %, 85 % and 98 %. At 2 of 10, b = 0 behaves like no tiered step at
# all, and b = 0.5 or 1 gives about half the samples a block, up from 36 % at b = 0.2. Accuracy
# stays within 92-96 % throughout. Seeds 1 and 2 (`results/tinyworld-dose-s1.json`, `-s2.json`)
# keep the order of the tiered steps on every seed; the bonus, seed by seed:

# %%
from pr1lib.store.cards import committed

seeds = {s: committed("tinyworld-dose" + (f"-s{s}" if s else "")) for s in range(3)}
if all(seeds.values()):  # the committed sweep of each seed
    bonus = pd.DataFrame({f"seed {s}": {r["bonus"]: r["parallel_ratio"] for r in card["numbers"]
                                        ["rows"] if r["tiered_steps"] == 2}
                          for s, card in seeds.items()}).sort_index().rename_axis("b")
    up = int((bonus.loc[1.0] > bonus.loc[0.2]).sum())
    print(f"at 2 tiered steps of 10, b = 1 opens more blocks than b = 0.2 on {up} of 3 seeds, "
          f"b = 0.2 more than b = 0 on {int((bonus.loc[0.2] > bonus.loc[0.0]).sum())} of 3")
    above = 100 * (bonus.loc[[0.5, 1.0]] - bonus.loc[0.2])  # points gained above b = 0.2
    print("b = 0.5 and 1 against b = 0.2, points:", ", ".join(
        f"{col} {above[col].min():+.1f} to {above[col].max():+.1f}" for col in above))
    display(bonus)  # share of held-out easy samples (100 x 4) that open a block

# %% [markdown]
# A bonus from 0 to 0.2 keeps blocks alive on every seed (the table's b = 0 and b = 0.2 rows).
# Above 0.2 the seeds disagree (the line above the table prints each seed's change): seed 0's share
# climbs by about 16 points, seed 2's by 4.5 to 8.5 and seed 1's falls, so runs of 100 problems × 4
# samples cannot say how much a larger bonus adds; the number of tiered steps moves the share far
# more. That is the paper's lesson in one chart: where a block costs little, the reward schedule
# decides how often the model uses it.

# %% [markdown]
# ## 6. The pre-flight doctor
#
# One call checks the things behind most "reward is zero" reports, on the real model, tokenizer,
# prompt, batch and reward: gold completions score the reward's maximum; the prompt does not
# pre-fill a tag; the completion budget fits a parallel trace; the batch holds whole groups; a
# dry-run group has reward spread (a group whose completions all score the same teaches nothing);
# and the tags survive TRL's `decode(skip_special_tokens=True)`. It loads the Stage 2 session that
# notebook 06 trains, from the same seen SFT checkpoint, without training it: on `tiny` and `smoke`
# TinyWorld's shipped `data/tinyworld-sft` (the cold start notebook 04 chose) on TinyWorld's easy
# items; on `colab` and `paper` notebook 04's seen run. `INIT` picks another.

# %%
import transformers

from pr1lib.config import GRPOStageConfig, NotebookConfig
from pr1lib.store.paths import runs_dir, shown
from pr1lib.training import grpo, starts
from pr1lib.training.doctor import table as doctor_table

transformers.utils.logging.disable_progress_bar()  # the doctor's table, not a loading bar
NB = NotebookConfig.for_profile(PROFILE)  # NB.world: the notebooks' main line (TinyWorld here)
init = starts.notebook_start(PROFILE, SEED, NB.world, INIT)
print("the doctor loads:",
      shown(init) if init else "the base model (no SFT run found; run notebook 04 first)")
stage2 = GRPOStageConfig.for_stage(2, PROFILE, seed=SEED, notebook=True, world=NB.world)
session = grpo.GRPOSession(stage2, init, runs_dir() / f"05_grpo_rewards-{PROFILE}" / "doctor",
                           follow=True)
checks = grpo.doctor_checks(session, groups=4)  # a dry-run group for each of 4 prompts
print(doctor_table(checks))

# %% [markdown]
# You should see every check `ok`: the checkpoint was trained on the tags, so its groups have reward
# spread. A `group_variance` FAIL is the flat reward the doctor is for: a group whose samples all
# score the same gives GRPO no gradient, and on a model never taught the tags every sample scores −1
# under the parallel-aware reward (section 1), so every group is flat. The checks below fail the
# tour if the doctor fell back to the base model or found a problem in the trained checkpoint.

# %%
trained = should_see("the doctor loads a trained checkpoint (1 = yes)", int(init is not None),
                     PROFILE)
clean = should_see("doctor checks that fail on the trained checkpoint",
                   sum(c.ok is False for c in checks), PROFILE)

# %% [markdown]
# ## Summary
#
# - Four per-completion rewards and one schedule, in one registry; S1 and S2 are reward schemes.
# - Two graders: the official code's (lenient tags, strict answers) and this project's (strict
#   tags, numeric answers); RL uses the project's, evaluation reports both.
# - Only `structure` can be fooled by the hacks here; no malformed block beats an honest answer
#   under the parallel-aware rewards.
# - A block pays under the tiered reward only if it costs less accuracy than $p f b / (2 + f b)$:
#   under S2 that is almost nothing, so blocks survive RL only where they help.
# - The doctor checks the usual reasons for a flat reward before any compute is spent.

# %% [markdown]
# ## Exercises
#
# 1. Write a completion that scores +1.2 under the tiered reward with the official grader and −1
#    with the project's. Which rule of the strict grammar does it break? Check it with
#    `pr1lib.format.grammar.validate(text, strict=True)`.
#
#    <details><summary>Hint</summary>
#
#    The official checker never reads the text between tags. Put a word between two tags of an
#    honest block and score it with `pr1lib.rewards.functions.score(text, "12", "tiered",
#    grader=...)`. </details>
# 2. With $f = 0.2$, what bonus $b$ would let a block cost 5 points at $p = 50\,\%$? Use
#    `block_break_even` and solve for $b$; is that a reward you would trust (look at section 2)?
#
#    <details><summary>Hint</summary>
#
#    Solve $p f b / (2 + f b) = 0.05$ for $f b$ first. Then look in section 2 for valid blocks
#    that do no work, and for what they would earn next to `honest_linear`.
#    </details>
# 3. Preview `PanelState(reward="alternating", window=5, parallel_steps=5)`. Which reward mode is
#    this, and which of section 1's rows does it match?
#
#    <details><summary>Hint</summary>
#
#    `pr1lib.notebook.panel.active_modes(state)` lists the mode of every step. What does
#    `global_step % window >= window - parallel_steps` give when the two numbers are equal?
#    </details>
#
# Solutions, with the reasoning: [solutions/05_grpo_rewards.py](../solutions/05_grpo_rewards.py)
# (`python solutions/05_grpo_rewards.py` runs them).

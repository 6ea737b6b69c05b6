# %% [markdown]
# # 04 · GRPO with switchable rewards: Stage 2 on easy problems, Stage 3 on hard ones
#
# **Goal:** train the cold-started model with GRPO the way Parallel-R1 does (group sampling, the
# paper's reward modes, the alternating schedule), watch it learn on a live dashboard, and compare
# reward modes side by side with the paper's Table 4.
#
# You will learn
# - the four rewards of the paper as TRL reward functions, and which "hacks" each one refuses to pay for;
# - how the **alternating** reward switches between accuracy and the tiered parallel reward by step,
#   and how to preview its schedule before spending compute;
# - a pre-flight **doctor** that answers "why is my reward zero?" before a long run;
# - the GRPO knobs that matter (group size, clip 0.2 / 0.28, no KL, temperature 1.0, lengths) and how
#   they map onto TRL's `GRPOConfig`; rollouts from the parallel engine; checkpoints and **resume**;
# - the curriculum: Stage 2 (easy) then Stage 3 (hard) for the seen variant, Stage 3 only for unseen,
#   and what happens to the unseen model when Stage 2 is kept;
# - the reward-mode ablation (accuracy only / alternating / structure only) next to the paper.

# %% tags=["parameters"]
PROFILE = None  # smoke | tiny | colab | paper (None: $PR1_PROFILE or auto)
SEED = 0
INIT = None  # run folder (with merged/) to start Stage 2 from; None: the seen SFT run of notebook 03 / `sft`

# %% [markdown]
# *On Colab (or anywhere `pr1lib` is not installed) the next cell fetches this repository and
# installs it; elsewhere it does nothing.*

# %%
import importlib.util  # noqa: E401
import subprocess
import sys

if importlib.util.find_spec("pr1lib") is None:
    subprocess.run(["git", "clone", "-q", "https://github.com/pr1-tutorial/pr1"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", "pr1[notebooks]"], check=True)
    sys.path.insert(0, "pr1")

# %%
from pr1lib.runtime import start_notebook

PROFILE = start_notebook(PROFILE, SEED)  # check the profile, seed everything, print versions

# %% [markdown]
# Stages 2 and 3 each have one `GRPOStageConfig`; the profile picks its size. Its field names are
# TRL's (`num_generations`, `epsilon`, `epsilon_high`, `beta`, …), so what you read here is what
# `GRPOConfig` receives. The table puts this profile's values next to the paper's scripts.
# `per_device_train_batch_size` counts **completions**, not prompts: 32 completions with a group
# of 8 are 4 prompts per step (a classic source of "valid values for num_generations are: []").

# %%
import os
import warnings

import pandas as pd
import transformers

from pr1lib import ablation, grpo, studies
from pr1lib.config import GRPOStageConfig

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental in TRL
warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")  # TRL 1.16 uses the old name
transformers.utils.logging.disable_progress_bar()
pd.set_option("display.max_colwidth", 100)
# On the tiny model this notebook runs a short version (`notebook=True`: batches of 32
# completions, 30 Stage-3 steps) so the tour stays within minutes; `python -m pr1lib grpo` runs
# the full tiny config (64, 60).
stage2 = GRPOStageConfig.for_stage(2, PROFILE, seed=SEED, notebook=True)
stage3 = GRPOStageConfig.for_stage(3, PROFILE, seed=SEED, notebook=True)
paper = GRPOStageConfig.for_stage(3, "paper")
knobs = ["num_generations", "per_device_train_batch_size", "learning_rate", "epsilon", "beta", "temperature",
         "max_completion_length", "max_steps", "loss_type", "use_lora"]
table = pd.DataFrame({"stage 2 (this profile)": [getattr(stage2, k) for k in knobs],
                      "stage 3 (this profile)": [getattr(stage3, k) for k in knobs],
                      "paper (stage 3)": [getattr(paper, k) for k in knobs]}, index=knobs)
table.loc["epsilon_high"] = [c.clip_high for c in (stage2, stage3, paper)]
table.loc["reward"] = [c.reward for c in (stage2, stage3, paper)]
table.loc["problems"] = [c.source for c in (stage2, stage3, paper)]
table.astype(str)

# %% [markdown]
# ## 1. The rewards, and the hacks they must not pay for
#
# Every reward follows TRL's contract `fn(completions, answer, **kwargs) -> list[float]` and is
# built from three facts about a completion: is the final answer right, are the tags strictly valid,
# how many `<Parallel>` blocks are there. `accuracy` ignores the tags (+1 / −1); `parallel_correct`
# pays only for a right answer inside a valid parallel response; `tiered` pays +1.2 for that, +1.0
# for a right linear answer and −1 otherwise; `structure` pays for valid blocks whatever the answer.
#
# The table scores adversarial completions, the tricks seen in the wild against format rewards
# (repeated or nested blocks, empty paths, the answer hidden inside a path, several candidate
# answers). Read a row as "what would GRPO teach if it found this completion": a row where a
# parallel-aware reward pays more than for `honest_parallel` is a hack that reward would learn.

# %%
from pr1lib.hacking import hacking_table

hacks = pd.DataFrame(hacking_table()).set_index("name")
hacks[["accuracy", "parallel_correct", "tiered", "structure", "why"]]

# %% [markdown]
# Only `structure` is fooled by anything here: it pays +1 for `empty_paths` and `answer_only_in_path`,
# because it never looks at the answer. That is the "parallel only" row of the paper's ablation, and
# the reason the paper never trains with it alone.

# %% [markdown]
# ## 2. The alternating schedule, before training
#
# The paper's S2 reward uses accuracy on 8 of every 10 steps and the tiered reward on the other 2.
# `alternating_reward` decides by TRL's `trainer_state.global_step` (0 while the first step runs), so
# the tiered steps are TRL's log rows 9, 10, 19, 20, … — the paper's 1-based steps. The panel below
# holds the knobs (mode, window, tiered steps, weights, steps per run); its preview redraws as you
# move them. Without a widget frontend (this notebook in CI) the same functions run from code.

# %%
from pr1lib.widgets import ControlPanel, PanelState, run_next, schedule_figure

schedule_figure(PanelState(reward="alternating", window=10, parallel_steps=2, steps=30))

# %% [markdown]
# ## 3. Where Stage 2 starts: the cold-start checkpoint
#
# Stage 2 starts from `INIT`, else the seen SFT run of the command line (`runs/sft-<profile>-seen`)
# or of notebook 03 (`runs/03_sft_lora-<profile>/seen`): its `merged/` model. If there is none, the
# base model is used instead, and the rewards stay at −1 (nothing has taught it the answer format):
# exactly the "reward is flat" symptom the doctor is for. In `smoke` the model is random, so only
# the plumbing is on show.
#
# A tiny-world caveat: SFT on easy problems only (the paper's Stage 1) leaves the 0.9M-parameter
# model almost no hard-tier accuracy (1 % greedy, against the base model's 28 %), so Stage 3's groups
# are nearly all −1 and there is little to reinforce. The README's GRPO numbers therefore start from
# an SFT on an even mix of easy and hard traces (`python -m pr1lib sft --profile tiny --variant seen
# --set source=tinygsm-easy+tinygsm-hard --out runs/sft-tiny-mix-seen`: easy 87 %, hard 20 %); set
# `INIT` to that folder to do the same here. A 4B model does not have this problem: its hard-problem
# skill survives SFT on GSM8K.

# %%
from pr1lib.paths import runs_dir

init = INIT or studies.default_init(2, "seen", PROFILE, SEED)
print("Stage 2 starts from:", init or "the base model (no SFT run found; run notebook 03 first)")
OUT = runs_dir() / f"04_grpo_rewards-{PROFILE}"
print("runs go under", OUT)

# %% [markdown]
# ## 4. The pre-flight doctor
#
# One call checks the things behind most "reward is zero" reports, on the real model, tokenizer,
# prompt, batch and reward: gold completions score the reward's maximum; the prompt does not
# pre-fill a tag; the completion budget fits a parallel trace; the batch holds whole groups; a
# dry-run group has reward spread (a group whose completions all score the same teaches nothing);
# and the tags survive TRL's `decode(skip_special_tokens=True)`. A loaded session is what trains.

# %%
from pr1lib.dashboard import Dashboard
from pr1lib.doctor import table as doctor_table

session = grpo.GRPOSession(stage2, init, OUT / "stage2",
                           dashboard=Dashboard(OUT / "stage2" / "metrics.csv", title="Stage 2 (easy problems)"))
print(doctor_table(grpo.doctor_checks(session)))

# %% [markdown]
# ## 5. Stage 2 with the panel and the live dashboard
#
# The dashboard is a `TrainerCallback`. Each step it adds a row: the reward and every reward term's
# score on the same completions, accuracy, parallel ratio, tag validity, where the first block sits,
# the truncated share (`clipped_ratio`), the PPO clip ratio, the share of zero-spread groups and the
# completion length. The rows also go to `metrics.csv` in the run folder. **Loss near 0 is normal
# here**: with β = 0 and one update per batch, GRPO's loss is ~0 at every step; watch the reward.
#
# The button of the panel calls `run_next(session, panel.state)`: train that many more steps, saving
# a checkpoint at the end, resuming from it the next time. The next cell makes the same call, so a
# headless run does exactly what a click does. Rerunning the notebook resumes from the last
# checkpoint instead of starting over (a Colab disconnect costs at most `save_steps` steps).

# %%
before2, _ = session.evaluate()
panel = ControlPanel(session, PanelState(reward=stage2.reward, steps=stage2.max_steps))
display(panel)
run_next(session, panel.state.replace(steps=max(stage2.max_steps - session.step, 0)))
run2 = grpo.finish(session, before2)

# %% tags=["report"]
from pr1lib.dashboard import dashboard_figure

dashboard_figure(run2.rows, "Stage 2 (easy problems): per-step metrics")

# %% [markdown]
# Held-out accuracy (greedy, problems never seen in training) before and after, per tier:

# %%
def before_after(result: dict) -> pd.DataFrame:
    rows = {f"{when} · {tier}": result[when][tier] for when in ("before", "after") for tier in result[when]}
    return pd.DataFrame(rows).T[["accuracy", "parallel_ratio", "valid_ratio", "mean_length", "n"]]


before_after(run2.result)

# %% [markdown]
# ## 6. Stage 3: hard problems, the alternating reward
#
# Stage 3 starts from Stage 2's `merged/` model and trains on the hard tier with the S2 recipe:
# alternating reward, clip-high 0.28. Same session, panel and dashboard code.

# %%
session3 = grpo.GRPOSession(stage3, run2.run_dir, OUT / "stage3",
                            dashboard=Dashboard(OUT / "stage3" / "metrics.csv", title="Stage 3 (hard problems)"))
panel3 = ControlPanel(session3, PanelState(reward=stage3.reward, window=stage3.window,
                                           parallel_steps=stage3.parallel_steps, steps=stage3.max_steps))
display(panel3)
run_next(session3, panel3.state.replace(steps=max(stage3.max_steps - session3.step, 0)))
run3 = grpo.finish(session3, run2.result["after"])
dashboard_figure(run3.rows, "Stage 3 (hard problems): per-step metrics")

# %% tags=["report"]
curriculum = pd.DataFrame({"SFT": run2.result["before"]["hard"], "after Stage 2": run2.result["after"]["hard"],
                           "after Stage 3": run3.result["after"]["hard"]}).T
curriculum[["accuracy", "parallel_ratio", "valid_ratio", "mean_length"]]

# %% [markdown]
# The `reward_mode/tiered` column of the dashboard is logged by the reward itself (through TRL's
# `log_metric`), so it shows which reward was really used at each step, not which one was planned.
# `train_seconds` and `rollout_seconds` below say where the time went: on a CPU, sampling dominates.

# %%
{k: run3.result[k] for k in ("steps", "train_seconds", "rollout_seconds", "run_dir")}

# %% [markdown]
# ## 7. Unseen: why the paper skips Stage 2
#
# The unseen variant trains with the path-isolating mask (`ParallelGRPOTrainer(variant="unseen")`
# overrides the one log-prob method of TRL so every forward sees the 4D mask and restarted positions).
# The paper found that giving it the seen recipe's Stage 2 (GSM8K) hurt: 38.5 average instead of
# 47.1, because it overfit superficial patterns of easy problems (Table 3; docs/recipe.md#9-the-stage-recipe-per-variant). Here both recipes run from
# the unseen SFT checkpoint: Stage 3 directly, and Stage 2 then Stage 3. The results are cached in
# the run folder; `python -m pr1lib grpo --stage all --variant unseen` makes the direct one.

# %%
effect = studies.unseen_stage2_effect(PROFILE, seed=SEED, notebook=True)
print("unseen start:", effect["init"])
pd.DataFrame({name: {"SFT hard accuracy": effect[name]["sft"]["hard"]["accuracy"],
                     "final hard accuracy": effect[name]["final"]["hard"]["accuracy"],
                     "final easy accuracy": effect[name]["final"]["easy"]["accuracy"],
                     "final parallel ratio (hard)": effect[name]["final"]["hard"]["parallel_ratio"]}
              for name in ("direct", "kept")}).rename(columns={"direct": "SFT → Stage 3 (paper)",
                                                               "kept": "SFT → Stage 2 → Stage 3"})

# %% [markdown]
# In the tiny world (measured with the first version of the rule teacher, seed 0, 50 held-out
# problems per tier, Stage 2 15 steps, Stage 3 20 steps) the paper's finding did **not** show:
# keeping Stage 2 *helped* the unseen model (hard 12 % → 18 %, easy 58 % → 78 %) while Stage 3
# alone did not (hard 12 % → 8 %, easy → 68 %). A likely reason: the tiny hard tier is more of the
# same arithmetic, not a different kind of problem as DAPO is next to GSM8K, so easy-problem
# practice transfers instead of overfitting. One seed and 50 problems also leave about ±7 points
# of noise; the cell above reruns it with the current teacher when its cache is missing.

# %% [markdown]
# ## 8. The reward-mode ablation, next to the paper's Table 4
#
# Same start (the SFT checkpoint), same seed, same steps; only the reward changes: accuracy only,
# alternating, structure only. The paper (unseen, Qwen3-4B, 200+ steps) saw the parallel ratio
# order accuracy (13.6 %) < alternating (63.0 %) < structure (80.3 %), with structure-only paying
# for it in accuracy. `parallel_ratio_%` and `accuracy_%` are measured greedily on held-out problems
# of the tier the run trained on; `sampled_parallel_ratio_%` and `sampled_accuracy_%` on the same
# problems with 8 samples each at T = 1, as the paper measures them; `train_parallel_ratio_%` is the
# sampled ratio over the last training steps. Results are cached in this notebook's run folder and
# reused while the start and the config stay the same (`refresh=True` retrains); `python -m pr1lib
# grpo --profile tiny` prints the command line's own table (the full-length runs quoted below).

# %%
results = ablation.run_ablation(PROFILE, "seen", INIT, seed=SEED, out=OUT / "ablation",
                                notebook=True)
print("start:", results[0]["init"])
table4 = pd.DataFrame(ablation.ablation_table(results)).set_index("reward")
rows = table4.reset_index().to_dict("records")
print("paper's order reproduced (greedy, sampled):", ablation.ordering_reproduced(rows),
      ablation.ordering_reproduced(rows, "sampled_parallel_ratio_%"))
table4

# %% tags=["report"]
import plotly.graph_objects as go

fig = go.Figure(layout=dict(title="parallel ratio by reward mode (%)", barmode="group", height=340))
fig.add_bar(x=table4.index, y=table4["parallel_ratio_%"], name=f"this run ({PROFILE}, held-out, greedy)")
if "sampled_parallel_ratio_%" in table4:
    fig.add_bar(x=table4.index, y=table4["sampled_parallel_ratio_%"], name=f"this run ({PROFILE}, held-out, T = 1)")
fig.add_bar(x=table4.index, y=table4["train_parallel_ratio_%"], name=f"this run ({PROFILE}, training samples)")
fig.add_bar(x=table4.index, y=table4["paper_parallel_ratio_%"], name="paper, Table 4")
fig

# %% [markdown]
# **What the tiny world showed.** The start decides what the ablation can show. The cold-start
# traces of notebook 03 put a block in every answer, and from an SFT on them
# (`runs/sft-tiny-mix-seen`, hard 20 %) every arm kept a block in 100 % of its greedy answers and
# about 98 % of its sampled ones: a policy that never samples an answer without a block cannot
# learn that such answers score better. So the command line's ablation starts from an SFT where
# half the traces lost their block (`plain_share=0.5`, `runs/sft-tiny-mix-half-seen`). That model
# answers greedily without a block (hard 27 % on these 100 problems, like the base model) and opens one in a third of its
# sampled answers. From there (`python -m pr1lib grpo --profile tiny --ablation --init
# runs/sft-tiny-mix-half-seen`, seed 0, 60 steps of 64 completions, 100 held-out hard problems,
# 8 samples each at T = 1):
#
# | reward | sampled parallel ratio | sampled accuracy (mean@8) | greedy accuracy | paper: parallel ratio |
# |---|---|---|---|---|
# | start (SFT) | 33.2 % | 11.8 % | 27 % | — |
# | accuracy only | 3.9 % | 18.8 % | 28 % | 13.6 % |
# | alternating (2 of 10 steps tiered) | 3.6 % | 17.2 % | 30 % | 63.0 % |
# | structure only | 93.1 % | 2.4 % | 9 % | 80.3 % |
#
# Seed 1 (`--seed 1`) gives 4.2 / 3.0 / 93.4 % from 32.2 %. Two of the paper's three findings
# show: accuracy alone makes the model drop parallel thinking,
# and a reward for structure alone buys blocks with accuracy. The third does not: alternating
# ends as low as accuracy-only, so the order accuracy < alternating < structure is **not**
# reproduced. Even 5 tiered steps of every 10 (`--set parallel_steps=5`) left 4.5 % of sampled
# answers with a block. The reason is visible in the table: here a block costs accuracy (the
# all-block SFT solves 20 % of hard problems, this one 27 %), so the accuracy steps push against
# blocks, and the tiered steps' +0.2 for a correct answer with a block is too small to push back.
# In the paper, blocks did not cost the 4B model accuracy, so the accuracy steps were close to
# neutral on them and the tiered steps could tip the balance.

# %% [markdown]
# **And the curriculum?** SFT → Stage 2 → Stage 3 (`python -m pr1lib grpo --profile tiny --stage
# all --seeds 0 1 2 --init runs/sft-tiny-mix-seen`) raised the *sampled* hard accuracy (mean@8 at
# T = 1, the way the paper validates) on every seed, from 7.8 % to 9.5 / 8.6 / 9.0 % (100 problems).
# It did not raise greedy hard accuracy: on 300 held-out problems the three seeds end at 19.0 /
# 18.0 / 18.3 %, against 19.3 % for the SFT. What else was tried, on seed 0 and 300 problems unless noted:
# - rollouts at T = 0.3 or 0.6 instead of 1.0, so that training samples sit closer to the greedy
#   answer: 20.3 % and 19.7 % after Stage 3, and 19.0 % for the whole curriculum at T = 0.3;
# - 120 Stage-3 steps instead of 60: 17.0 % (easy 81 %);
# - learning rate 5e-4 (13 %) or 1e-3 (sampled accuracy collapsed within 10 steps), or full
#   fine-tuning at 5e-5 (21 %), on 100 problems;
# - the half-plain start: greedy hard 29.0 % → 25.0 % after Stage 2 (which pushes blocks: 21 % of
#   greedy answers) → 26.3 % after Stage 3, while the sampled accuracy rose from 13.4 % to 19.5 % and
#   the sampled parallel ratio fell from 32 % to 3 %.
#
# GRPO here sharpens what the policy samples towards what it already answers greedily; it does not
# teach the 0.9M-parameter model arithmetic that it gets wrong greedily.

# %% [markdown]
# ## Summary
#
# - GRPO here is stock TRL: `GRPOTrainer` with the paper's knobs, a `rollout_func` that samples with
#   the parallel engine, and one overridden method for the unseen log-probs.
# - The rewards differ in what they pay for; the hacking table shows that only `structure` can be
#   fooled, and that a malformed block never beats an honest answer under the parallel-aware rewards.
# - The alternating schedule is a pure function of the step, previewed before training and logged
#   truthfully during it.
# - The doctor checks the usual reasons for a flat reward before any compute is spent.
# - Runs checkpoint every `save_steps` and resume exactly (same data order, RNG and weights); the panel
#   trains N steps at a time on top of that.
# - The curriculum is Stage 2 → Stage 3 for seen and Stage 3 only for unseen; the ablation puts this
#   tiny world's parallel ratios next to the paper's.
#
# ## Exercises
#
# 1. Give the structure reward a small weight next to accuracy (`structure_weight=0.3` in the panel,
#    or `extra_rewards=(("structure", 0.3),)` in the config). Predict first: does the parallel ratio
#    rise, and what happens to accuracy on the hard tier? Then run Stage 3 and check on the dashboard.
# 2. Set `parallel_steps=0` in the panel. Which reward mode is this now, and which row of the ablation
#    should it match? Preview the schedule, then set `window=5, parallel_steps=5`.
# 3. Interrupt a Stage 3 run halfway (stop the cell), then run the cell again. Check in `metrics.csv`
#    and in the `trainer/` folder that it resumed from the last checkpoint, not from step 0.

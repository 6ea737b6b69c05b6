# %% [markdown]
# # 06 · GRPO training: the paper's stages, a live dashboard, the plain baseline and Table 4
#
# **Goal:** train the cold-started model with GRPO the way Parallel-R1 does for each variant, watch
# it learn on a live dashboard, compare it with plain GRPO on the same problems and steps, and
# compare reward modes side by side with the paper's Table 4.
#
# You will learn
# - the paper's recipe per variant, as one table: seen SFT → Stage 2 (parallel-and-correct, easy
#   problems) → Stage 3 (accuracy, hard problems); unseen SFT → Stage 3 with S1 or S2;
# - the GRPO knobs that matter (group size, clip 0.2 / 0.28, no KL, temperature 1.0, lengths) and
#   how they map onto TRL's `GRPOConfig`; rollouts from the parallel engine; checkpoints and resume;
# - the control panel (with the block rate a schedule reached before, and its clip) and the live
#   dashboard (reward, accuracy, parallel ratio, block position);
# - the baseline the paper beats: GRPO without tags on the same problems and steps, with 95 %
#   intervals over problems for every comparison;
# - the reward ablation next to Table 4, where its order shows;
# - a model that writes its own plan (PlanWorld): RL widens its plans past its cold start's, live.
#
# On `tiny` and `smoke` the main line is **TinyWorld** (notebook 00), the tiny world where a block
# pays on hard items; on `colab` and `paper`, GSM8K and DAPO with Qwen3. TinyGSM, where a block
# does not pay, is the one contrast (section 9); PlanWorld, where the model writes its own plan,
# closes the notebook on every profile (section 10). The rewards themselves are notebook 05; the
# terms in bold are in the [glossary](../docs/glossary.md), the recipe in
# [docs/recipe.md](../docs/recipe.md#9-the-stage-recipe-per-variant).
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/pr1-tutorial/pr1/blob/main/notebooks/06_grpo_training.ipynb)

# %% tags=["parameters"]
PROFILE = None  # smoke | tiny | colab | paper (None: $PR1_PROFILE or auto)
SEED = 0
# run folder (with merged/) or model folder to start Stage 2 from; None: the world's shipped seen
# SFT (tiny, smoke: data/tinyworld-sft), else notebook 04's seen run
INIT = None
# section 7's reward ablation: False shows TinyWorld's committed runs (3 seeds x 2 variants, about
# 40 minutes of training); True trains it here (colab, paper: always trained here)
LIVE = False

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
from pr1lib.store.paths import REPO_ROOT

PROFILE = start_notebook(PROFILE, SEED)  # check the profile, seed everything, print versions
NB = NotebookConfig.for_profile(PROFILE)
WORLD = worlds.get(NB.world) if NB.world else None  # None: the profile's real data
print("main line:", WORLD.title if WORLD else "the profile's own problems")

# %% [markdown]
# ## 1. The recipe, per variant
#
# One table in `pr1lib.config` holds the paper's stage recipe (`STAGE_REWARDS`, `CURRICULA`): which
# stages each variant runs and with which reward. Choosing a reward also takes the clip-high the
# official S2 script pairs with it (0.28 with the alternating S2 reward, else ε = 0.2; the paper's
# text does not state it). The plain variant is this project's name for the paper's GRPO baseline:
# no tags, the baseline prompt, accuracy only. `world=` puts a world's problems and settings on top
# (TinyWorld: its easy items in Stage 2, its hard ones in Stage 3, a 384-token budget, full
# fine-tuning).

# %%
import pandas as pd

from pr1lib.config import CURRICULA, STAGE_REWARDS, GRPOStageConfig

pd.set_option("display.max_colwidth", 100)


def stage_config(stage: int, variant: str = "seen", **changes) -> GRPOStageConfig:
    """This notebook's config of one stage: the notebook's sizes, on the main line's problems."""
    return GRPOStageConfig.for_stage(stage, PROFILE, variant=variant, notebook=True, seed=SEED,
                                     world=NB.world, **changes)


recipe = pd.DataFrame([
    {"variant": v, "stage": s, "reward": stage_config(s, v).reward,
     "epsilon_high": stage_config(s, v).clip_high, "problems": stage_config(s, v).source,
     "rollout": stage_config(s, v).rollout_mode} for v in STAGE_REWARDS for s in CURRICULA[v]])
recipe.set_index(["variant", "stage"])

# %% [markdown]
# Stages 2 and 3 each have one `GRPOStageConfig`; the profile picks its size. Its field names are
# TRL's (`num_generations`, `epsilon`, `epsilon_high`, `beta`, …), so what you read here is what
# `GRPOConfig` receives. `per_device_train_batch_size` counts **completions**, not prompts: 32
# completions with a group of 8 are 4 prompts per step (a classic source of "valid values for
# num_generations are: []"). On the tiny model this notebook runs a short version
# (`notebook=True`: batches of 32 completions, 15 Stage-2 steps and 60 Stage-3 steps on
# TinyWorld, 200 held-out problems per tier) so the tour stays within minutes. Sixty steps is what
# moved hard accuracy beyond the noise in a committed run (`results/tinyworld-nb06-stage3-60.json`:
# 53.5 % → 61.8 %, +8.2 points, interval +2.4 to +14.0, 200 problems × 4); `python -m pr1lib
# grpo` runs the full tiny config (64, 60).

# %%
import transformers

transformers.utils.logging.disable_progress_bar()
stage2, stage3 = stage_config(2), stage_config(3)
paper = GRPOStageConfig.for_stage(3, "paper", variant="seen")
knobs = ["num_generations", "per_device_train_batch_size", "learning_rate", "epsilon", "clip_high",
         "beta", "temperature", "max_completion_length", "max_steps", "loss_type", "use_lora",
         "dynamic_sampling"]
pd.DataFrame({"stage 2 (this profile)": [getattr(stage2, k) for k in knobs],
              "stage 3 (this profile)": [getattr(stage3, k) for k in knobs],
              "paper (stage 3, seen)": [getattr(paper, k) for k in knobs]}, index=knobs).astype(str)

# %% [markdown]
# On Colab this notebook makes eleven GRPO runs: the seen stages, the plain baseline, the unseen
# study and four ablation arms. The colab profile's own Stage 3 (`python -m pr1lib grpo --profile
# colab`: 100 steps of up to 1,024 tokens) takes hours on a T4, so `notebook=True` shrinks each
# run until all of them fit one hour. The arithmetic, per run: steps × (one decode of the longest
# completion + training on prompt and completion tokens) + held-out evaluations + loading and
# saving, at rates assumed in `pr1lib.notebook.budget` (no GPU has run the colab path yet).

# %%
from pr1lib.notebook import budget

plan = budget.grpo_notebook_plan("colab")
full = budget.grpo_seconds(GRPOStageConfig.for_stage(3, "colab"), evals=2)
print(f"notebook 06 on one T4, computed: {budget.total_minutes(plan)} minutes "
      f"(the colab Stage 3 of the command line alone: {full['minutes']} minutes)")
pd.DataFrame(plan).T

# %% [markdown]
# ## 2. Where Stage 2 starts: the cold-start checkpoint
#
# Stage 2 starts from `INIT`, else from the cold start notebook 04 chose: on `tiny` and `smoke`
# the shipped TinyWorld SFT (`data/tinyworld-sft`; notebook 04 §6.1 measured why the tour does not
# train its own), on `colab` and `paper` the seen SFT run of the command line
# (`runs/sft-<profile>-seen`) or of notebook 04 (`runs/04_sft_lora-<profile>/seen`). If there is
# none, the base model is used instead, and the parallel-aware rewards stay at −1 (nothing has
# taught it the tags): exactly the "reward is flat" symptom notebook 05's doctor is for.

# %%
from pr1lib.store.paths import runs_dir, shown
from pr1lib.training import grpo, starts

if INIT:
    init = INIT
elif WORLD:
    init = REPO_ROOT / WORLD.init("seen")  # the shipped seen SFT
else:
    init = starts.default_init(2, "seen", PROFILE, SEED)
print("Stage 2 starts from:",
      shown(init) if init else "the base model (no SFT run found; run notebook 04 first)")
OUT = runs_dir() / f"06_grpo_training-{PROFILE}"
print("runs go under", shown(OUT))

# %% [markdown]
# ## 3. Stage 2 with the panel and the live dashboard, on the easy items
#
# The dashboard is a `TrainerCallback`. Each step it adds a row: the reward and every reward term's
# score on the same completions, accuracy, parallel ratio, tag validity, where the first block sits,
# the truncated share (`clipped_ratio`), the PPO clip ratio, the share of zero-spread groups and the
# completion length. The rows also go to `metrics.csv` in the run folder. **Loss near 0 is normal
# here**: with β = 0 and one update per batch, GRPO's loss is ~0 at every step; watch the reward.
#
# The button of the panel calls `run_next(session, panel.state)`: train that many more steps, saving
# a checkpoint at the end, resuming from it the next time. The training cell below makes the same
# call for the steps left of this notebook's plan (`run_to`), so a headless run does exactly what a
# click does, and it says where the run stands. Steps you add with the button stay: a rerun goes
# on from them, and Stage 3 then starts over from that Stage 2 (its earlier run is kept as
# `stage3.prev`, one line says so). Knobs a reward mode ignores are greyed out:
# window and tiered steps move only the alternating reward, and the main reward's weight matters
# only next to a structure bonus (GRPO divides each group's rewards by their spread, so a lone
# reward's scale cancels). Rerunning the notebook resumes from the last checkpoint instead of
# starting over (a Colab disconnect costs at most `save_steps` steps).

# %% [markdown]
# The panel also says what the chosen reward does to the clip (picking **alternating** sets
# ε_high = 0.28, the official S2 script's pairing; every other reward clips symmetrically at 0.2)
# and, on TinyWorld's easy items, which share of answers opened a block after 30 steps of the same
# schedule in the committed dose-response runs (`results/tinyworld-dose*.json`, notebook 05; three
# seeds, Stage 2 from `data/tinyworld-sft`). After a run it shows the measured seconds per step.
# The schedules the dose cards hold, as the panel reads them:

# %%
from pr1lib.notebook.panel import ControlPanel, PanelState, dose_rows, expected_block_rate, run_to

dose = dose_rows() if WORLD else None  # the dose-response cards are TinyWorld's
if dose:
    schedules = {"accuracy only": PanelState(reward="accuracy"),
                 "alternating, 2 tiered of 10 (S2)": PanelState(reward="alternating"),
                 "alternating, 5 tiered of 10": PanelState(reward="alternating", parallel_steps=5),
                 "tiered every step": PanelState(reward="tiered")}
    expected = pd.DataFrame({name: expected_block_rate(s, dose) for name, s in schedules.items()})
    display(expected.T.round(3))  # held-out easy items, after 30 steps; start: the SFT's share

# %%
from pr1lib.training.dashboard import Dashboard

session = grpo.GRPOSession(stage2, init, OUT / "stage2", follow=True, dashboard=Dashboard(
    OUT / "stage2" / "metrics.csv", title="Stage 2 (easy problems)"))
before2, _ = session.evaluate()
panel = ControlPanel(session, PanelState(reward=stage2.reward, steps=stage2.max_steps), dose=dose)
display(panel)
print(run_to(session, panel.state, stage2.max_steps, "Stage 2"))
run2 = grpo.finish(session, before2)
print(panel.facts.value)

# %% tags=["report"]
from pr1lib.training.dashboard import dashboard_figure

dashboard_figure(run2.rows, "Stage 2 (easy problems): per-step metrics")

# %% [markdown]
# Held-out accuracy before and after, per tier, by the paper's protocol: `accuracy` is mean@k of k
# samples per problem at T = 1, with pass@k and the parallel ratio of those samples; greedy decoding
# of the same problems is the labelled second column. `Δ accuracy` is after minus before on the
# same problems, in points, with a 95 % interval from a paired bootstrap over problems
# (`pr1lib.evaluation.headline.paired_change`).

# %%
from pr1lib.evaluation.headline import change_words, paired_change


def before_after(result: dict) -> pd.DataFrame:
    rows = {}
    for when in ("before", "after"):
        for tier, m in result[when].items():
            rows[f"{when} · {tier}"] = {**{k: m[k] for k in ("accuracy", "pass_at_k", "n", "k",
                                                            "parallel_ratio", "valid_ratio")},
                                        **{f"greedy {k}": m["greedy"][k]
                                           for k in ("accuracy", "parallel_ratio")}}
            if when == "after":
                change = paired_change(m, result["before"][tier])
                rows[f"{when} · {tier}"]["Δ accuracy (95 % interval)"] = (
                    f"{change['diff']:+.1f} ({change['low']:+.1f} to {change['high']:+.1f})")
    return pd.DataFrame(rows).T


before_after(run2.result)

# %% [markdown]
# ## 4. Stage 3: hard problems, accuracy only
#
# Stage 3 starts from Stage 2's `merged/` model and trains on the hard tier. For the seen variant
# the paper's Stage 3 reward is **accuracy only** (clip 0.2): nothing pays for a block as such. If
# blocks help, the parallel ratio has to climb by itself, because completions with a block win
# their groups more often. Same session, panel and dashboard code.

# %%
session3 = grpo.GRPOSession(stage3, run2.run_dir, OUT / "stage3", follow=True,
                            dashboard=Dashboard(OUT / "stage3" / "metrics.csv",
                                                title="Stage 3 (hard problems)"))
panel3 = ControlPanel(session3, PanelState(reward=stage3.reward, window=stage3.window,
                                           parallel_steps=stage3.parallel_steps,
                                           steps=stage3.max_steps))  # dose cards: easy items
display(panel3)
print(run_to(session3, panel3.state, stage3.max_steps, "Stage 3"))
run3 = grpo.finish(session3, run2.result["after"])

# %% tags=["report"]
from pr1lib.notebook.expect import should_see

seen_run = {"before": run2.result["before"], "after": run3.result["after"]}  # SFT -> Stage 2 + 3
hard = {when: seen_run[when]["hard"] for when in ("before", "after")}
if WORLD:
    should_see("TinyWorld hard parallel ratio after Stage 3", hard["after"]["parallel_ratio"],
               PROFILE)
    should_see("TinyWorld hard accuracy gain, Stage 3",
               hard["after"]["accuracy"] - hard["before"]["accuracy"], PROFILE)
curriculum = pd.DataFrame({"SFT": run2.result["before"]["hard"],
                           "after Stage 2": run2.result["after"]["hard"],
                           "after Stage 3": run3.result["after"]["hard"]}).T
print("what this shows:", change_words("after Stages 2 + 3 vs the SFT, hard tier",
                                       paired_change(hard["after"], hard["before"])))
curriculum[["accuracy", "pass_at_k", "parallel_ratio", "valid_ratio", "mean_length"]]

# %% [markdown]
# The `reward_mode/tiered` column of the dashboard (logged by the alternating reward itself, through
# TRL's `log_metric`) shows which reward was really used at each step, not which one was planned.
# `train_seconds` and `rollout_seconds` say where the time went: on a CPU, sampling dominates.

# %%
{**{k: run3.result[k] for k in ("steps", "train_seconds", "rollout_seconds")},
 "run_dir": shown(run3.result["run_dir"])}

# %% [markdown]
# You should see: each stage's run card and `merged/`, and the panel's line with its clip and the
# seconds per step (measured once this session has trained; a rerun that resumes a finished run
# trains nothing and says so).

# %%
for stage in (run2, run3):
    assert (stage.run_dir / "run_card.json").exists() and (stage.run_dir / "merged").is_dir()
assert "ε" in panel.facts.value and "s/step" in panel.facts.value  # the clip, the speed

# %% [markdown]
# ## 5. The baseline: plain GRPO on the same problems and steps
#
# The paper's central comparison (Table 2) is Parallel-R1 against GRPO without parallel thinking:
# the base model, the baseline prompt (no tags), the accuracy reward, the same problems. The plain
# variant runs exactly the seen curriculum's stages and steps with that setup, from the base model
# (TinyWorld's: `data/tinyworld-base`). Notebook 07 puts its row in the headline table next to the
# seen one. Each comparison below is on the same held-out hard problems, with a paired 95 %
# interval, and the "what this shows" lines are computed from those intervals.

# %%
from pr1lib.experiments.curriculum import run_curriculum

plain = run_curriculum(PROFILE, "plain", REPO_ROOT / WORLD.init("plain") if WORLD else None, SEED,
                       OUT / "plain", notebook=True, world=NB.world)
ends = {"base": plain["sft"]["hard"], "plain GRPO": plain["final"]["hard"],
        "Parallel-SFT (seen)": hard["before"], "Parallel-R1 (seen)": hard["after"]}
pd.DataFrame(ends).T[["accuracy", "pass_at_k", "parallel_ratio", "valid_ratio"]]

# %% tags=["report"]
pairs = [("plain GRPO", "base"), ("Parallel-R1 (seen)", "Parallel-SFT (seen)"),
         ("Parallel-R1 (seen)", "plain GRPO")]
changes = {f"{a} − {b}": paired_change(ends[a], ends[b]) for a, b in pairs}
for (a, b), change in zip(pairs, changes.values()):
    print("what this shows:", change_words(f"{a} vs {b}", change))
pd.DataFrame(changes).T.rename(columns={"diff": "Δ accuracy (points)", "low": "95 % low",
                                        "high": "95 % high"})

# %% [markdown]
# Read the three lines before the table: only a line that says "beyond the noise" is a finding of
# this run; "within the noise" means these few steps and problems cannot tell. Section 8 has the
# committed long runs, whose intervals are narrow enough to separate the arms.

# %% [markdown]
# ## 6. Unseen: the paper's recipe, Stage 3 with the alternating reward
#
# The unseen variant trains with the path-isolating mask (`ParallelGRPOTrainer(variant="unseen")`
# overrides the one log-prob method of TRL so every forward sees the 4D mask and restarted
# positions) and samples every block with the forked engine, so neither path sees the other. Its
# recipe is SFT → Stage 3 with the alternating reward (S2: 8 accuracy steps then 2 tiered ones in
# every window of 10, with the official script's ε_high = 0.28), and the model it makes is notebook
# 07's Parallel-R1-Unseen. On `tiny` and `smoke` it starts from the shipped
# `data/tinyworld-sft-unseen`.

# %%
from pr1lib.experiments.unseen_stage2 import (
    unseen_stage2_dir,
    unseen_stage2_effect,
    unseen_stage2_table,
)

r1_unseen = run_curriculum(PROFILE, "unseen", REPO_ROOT / WORLD.init("unseen") if WORLD else None,
                           SEED, notebook=True, world=NB.world,
                           out=unseen_stage2_dir(PROFILE, SEED) / "direct")
unseen = r1_unseen["stages"][-1]
print("unseen start:", shown(r1_unseen["stages"][0]["init"]), "| reward:", unseen["reward"])
print("what this shows:", change_words("Parallel-R1 (unseen) vs its SFT, hard tier",
                                       paired_change(unseen["after"]["hard"],
                                                     unseen["before"]["hard"])))
before_after(unseen)

# %% [markdown]
# How to read it on `tiny`: the computed line says whether the unseen model's hard accuracy moved
# beyond the noise, and the table how its share of answers with a block moved. In our runs of this
# section the alternating reward raised that share (the two tiered steps of every ten pay for
# blocks) without making the unseen model measurably more accurate on hard items (a change within
# the noise, either sign from run to run), unlike the seen run of section 4, and unlike the paper,
# where Parallel-R1-Unseen (S2) gains over its SFT; the lines above say whether this run agrees. Our
# reading, not the paper's: the unseen block's paths decode forked from the same prefix, so the
# second path cannot know it is the second and may try the same cheap price as the first, instead of
# the other one; a forced unseen block is worth half as much as a seen one on hard items (+13
# against +26 points, `results/tinyworld-blockcost-unseen.json`,
# `results/tinyworld-blockcost.json`), and this many steps do not turn that smaller edge into
# accuracy. Numbered paths (`path_headers`, this project's extension:
# `pr1lib.format.grammar.number_paths`) were tried as a remedy and did not pay: they lowered the
# forced block's gain (notebook 03, section 7); this notebook does not run them.

# %% [markdown]
# The paper found that giving the unseen variant the seen recipe's Stage 2 hurt: 38.5 average
# instead of 47.1 (Table 3), and explained it as the structured mask overfitting superficial
# patterns of easy problems. On `colab` and `paper` the next cell runs both recipes from the same
# SFT checkpoint: Stage 3 directly (the run above, reused) and Stage 2 then Stage 3. This project
# has not run that study in TinyWorld; the TinyGSM run of it is in section 9. (Notebook 07's
# controls run their unseen arm through Stage 2 and then Stage 3, like every arm there and unlike
# the paper's unseen recipe, with no direct arm beside it: they do not measure this either.)

# %%
if not WORLD:
    study = unseen_stage2_table(unseen_stage2_effect(PROFILE, seed=SEED, notebook=True))
    print("unseen start:", shown(study["init"]))
    display(pd.DataFrame(study["rows"]).set_index("recipe").T)  # held-out: mean@k, T = 1, greedy

# %% [markdown]
# ## 7. The reward ablation, next to the paper's Table 4
#
# Table 4 runs the **unseen** variant from its SFT checkpoint with one reward per arm: accuracy only
# (S1), alternating (S2) and "parallel only", whose reward the paper does not name (this project
# runs it as the tiered reward on every step); this project adds a `structure` arm (a valid block,
# whatever the answer). Same start, seed and steps; only the reward changes. The paper saw the
# parallel ratio order accuracy (13.6 %) < alternating (63.0 %) < parallel (80.3 %), with
# parallel-only paying for it in accuracy (its Table 4, in
# [docs/recipe.md](../docs/recipe.md#113-reward-ablation-table-4)). The verdict counts an order only
# when each gap is larger than its 95 % bootstrap interval over problems.
#
# On a hard TinyWorld item a block pays, so every reward arm ends with blocks (the committed
# ablation on hard items, in [docs/tinyworld.md](../docs/tinyworld.md#rl)). The paper's Table 4
# lives in another place: its accuracy-only arm keeps blocks in few answers, so there a block
# barely pays for itself. TinyWorld's easy items are such a place: one addition answers them, and a
# block costs a few tokens and helps little. Notebook 05's dose-response ran there; the committed
# runs below are the ablation itself: Stage 3 on easy items, one reward per arm, 30 steps, scored on
# 300 held-out easy items × 8 samples at T = 1, greedy beside, three seeds, in both variants. The
# **unseen** runs are the paper's own setting: they start from `data/tinyworld-sft-unseen` (the same
# SFT with the path-isolating mask) and sample every block with the forked engine, so neither path
# sees the other. The **seen** runs start from `data/tinyworld-sft` and sample plainly.

# %%
from pr1lib.experiments.ablation import ARMS, ablation_summary, run_ablation
from pr1lib.store.cards import committed

if LIVE or not WORLD:  # train the arms here (on a world: its easy items, the unseen variant)
    on_easy = {"data": WORLD.source("easy"), "world": WORLD.name} if WORLD else {}
    start = REPO_ROOT / WORLD.init("unseen") if WORLD else None
    summary = ablation_summary(run_ablation(PROFILE, init=start, seed=SEED, out=OUT / "ablation",
                                            notebook=True, **on_easy))
    table4 = pd.DataFrame(summary["ablation"]).set_index("arm")
    print("the paper's order reproduced:", summary["verdict"])
    display(table4)
    assert table4["reward"].to_dict() == ARMS  # one row per arm, trained on its reward

# %% [markdown]
# The committed TinyWorld runs (the cells below read them on every profile):

# %%
CARDS = {"unseen": "tinyworld-easy-ablation-unseen", "seen": "tinyworld-easy-ablation"}
easy = {(v, s): committed(name + (f"-s{s}" if s else "")) for v, name in CARDS.items()
        for s in range(3)}
for v in CARDS:
    start = easy[v, 0]["numbers"]["ablation"][0]["start_parallel_ratio_%"]
    print(f"{v}: {easy[v, 0]['command']}\n  at the start: {start} % blocks")
cols = ["parallel_ratio_%", "greedy_parallel_ratio_%", "accuracy_%", "greedy_accuracy_%"]
easy_table = pd.concat({key: pd.DataFrame(c["numbers"]["ablation"]).set_index("arm")[cols]
                        for key, c in easy.items()}, names=["variant", "seed", "arm"]).sort_index()
easy_table.unstack("seed")  # held-out easy items: 300 x 8 at T = 1, greedy beside

# %%
pd.DataFrame({f"{v}, seed {s}": {"order and accuracy as the paper's": verdict["reproduced"],
                                 **{f"{gap}, 95 % interval (points)":
                                    f"{100 * g['low']:.1f} to {100 * g['high']:.1f}"
                                    for gap, g in verdict["gaps"].items()}}
              for (v, s), verdict in ((key, c["numbers"]["verdict"]) for key, c in easy.items())})

# %% tags=["report"]
from plotly.colors import qualitative
from plotly.subplots import make_subplots

fig = make_subplots(rows=1, cols=2, shared_yaxes=True, subplot_titles=list(CARDS))
for col, v in enumerate(CARDS, start=1):
    for s in range(3):
        ratio = easy_table.loc[(v, s), "parallel_ratio_%"]
        fig.add_bar(x=ratio.index, y=ratio, name=f"seed {s}", legendgroup=f"seed {s}",
                    marker_color=qualitative.Plotly[s], showlegend=col == 1,
                    row=1, col=col)
    if v == "unseen":  # the paper's Table 4 is its unseen variant: its bars go in that panel only
        paper4 = pd.DataFrame(easy[v, 0]["numbers"]["ablation"]).set_index("arm")
        fig.add_bar(x=paper4.index, y=paper4["paper_parallel_ratio_%"], name="paper, Table 4",
                    marker_color="black", row=1, col=col)
fig.update_yaxes(title="share of samples with a block (%)", col=1)
fig.update_xaxes(title="reward arm")
fig.update_layout(title="TinyWorld easy items: parallel ratio by reward arm (%, T = 1)",
                  barmode="group", height=380)
fig

# %%
for arm, ratio in easy_table.groupby("arm")["parallel_ratio_%"]:  # 6 runs: 2 variants x 3 seeds
    print(f"{arm}: blocks in {ratio.min():.1f} to {ratio.max():.1f} % of samples at T = 1")
unseen_acc = easy_table.loc["unseen", "accuracy_%"].unstack("arm")
print("unseen, alternating - parallel accuracy per seed (points):",
      (unseen_acc["alternating"] - unseen_acc["parallel"]).round(1).tolist())

# %% [markdown]
# Read it as Table 4 (the lines above print the ranges). On every seed of both variants the order
# is the paper's and each gap is far outside its interval: accuracy alone lets blocks fade from
# 30 % of samples to 6-17 % (none at all greedy), alternating's 2 tiered steps in 10 hold a quarter
# to a half of them, and the tiered reward on every step puts one in 97 % of answers or more. The
# accuracy side holds as well, clearest on the unseen variant: there alternating keeps 2.1 to 4.3
# points more accuracy than parallel-only. The likely reason: an unseen block on an easy item costs
# more (a forced block: −3.3 points unseen, −0.6 seen,
# `results/tinyworld-blockcost-unseen.json`, `results/tinyworld-blockcost.json`). The paper's
# alternating arm (the black bars) sits higher and its parallel arm lower; compare the order, not
# the values. Where a block neither costs nor pays much, the reward mode decides how often the model
# opens one.
#
# The greedy accuracy of the block-heavy unseen arms reads low: greedy forked decoding opens path 2
# with its second-best token (`distinct_greedy_paths`, so the two paths are not copies), which on
# these items often starts a worse sum. T = 1 is the protocol's number; greedy is the second column.

# %% [markdown]
# ## 8. The long runs, and the headline
#
# Sections 3-5 are short versions of the committed runs below: Stage 2 then Stage 3, 3 seeds,
# 300 held-out problems per tier at k = 8, and the plain GRPO baseline from `data/tinyworld-base`
# on the same problems and steps.

# %%
import json

from pr1lib.experiments.curriculum import seed_rows

cards = {v: json.loads((REPO_ROOT / "results" / f"tinyworld-grpo-{v}.json").read_text())
         for v in ("seen", "plain")}
for v, card in cards.items():
    print(f"{v}: {card['command']}")
long_runs = pd.concat({v: pd.DataFrame(seed_rows(card["numbers"])).set_index("seed")
                       for v, card in cards.items()})
long_runs["greedy gain"] = long_runs["greedy end"] - long_runs["greedy start"]
for v in cards:  # each run's gain over its own start, in points, lowest to highest seed
    g = 100 * long_runs.loc[v, ["gain", "greedy gain"]]
    print(f"{v}: {g['gain'].min():+.1f} to {g['gain'].max():+.1f} points at T = 1, "
          f"greedy {g['greedy gain'].min():+.1f} to {g['greedy gain'].max():+.1f}")
long_runs  # hard tier: mean@8 at T = 1 on 300 held-out problems, greedy beside it

# %% tags=["report"]
import plotly.graph_objects as go

fig = go.Figure(layout=dict(title="TinyWorld, hard tier: mean@8 at T = 1 (%), per seed",
                            barmode="group", height=340, xaxis_title="seed",
                            yaxis_title="mean@8 (%)"))
for v, rows in long_runs.groupby(level=0):
    seeds = [f"seed {s}" for s in rows.index.get_level_values(1)]
    fig.add_bar(x=seeds, y=100 * rows["start"], name=f"{v}: start")
    fig.add_bar(x=seeds, y=100 * rows["end"], name=f"{v}: after Stage 2 + 3")
fig

# %% [markdown]
# Read the table as the paper's Table 2 in miniature (the lines above it print each gain).
# Parallel-R1 (seen) starts from its SFT and ends 15-19 points above it on every seed, greedy 24-29
# points above, with nearly every sample now opening a block; the plain GRPO baseline, from the base
# model on the same problems and steps, gains about 5 points sampled and loses about 3 greedy: its
# base model writes one guess per answer, and RL sharpens the guesses. Stage 2's reward pays for
# blocks on easy items for 15 steps, and the hard tier's share of samples with a block rises from
# 23 % to 38 % during it (seed 0, `results/tinyworld-grpo-seen.json`). Stage 3's reward never pays
# for a block, yet the share climbs to nearly every sample, because blocks win their groups. What
# the gap over plain GRPO credits is the search the cold start taught, not the block itself: written
# without tags, the same search ends as high after RL (`results/tinyworld-controls.json`: the serial
# arm goes from 56.9 % to 68.8 %, Parallel-R1-Seen from 48.6 % to 66.7 %; notebook 07, section 7).
# The price is on the easy tier (about 3 points, Stage 2 teaches blocks there too) and in pass@8,
# which falls as RL concentrates the samples (`long_runs` shows the hard tier only; the two cards
# read above keep every tier, pass@8 included, under each run's `sft` and `final`).
#
# This notebook's own seen run, start and end, as headline rows (percent). Under `make tour` they
# go on top of the report, above notebook 07's table.

# %% tags=["report"]
from pr1lib.evaluation.headline import loaded_label, write_headline
from pr1lib.evaluation.paper import for_display
from pr1lib.experiments.curriculum import world_headline

if WORLD:  # the model named by what was loaded (its architecture and size)
    world_table = world_headline(seen_run, loaded_label({"sft": init}, NB.model_label), WORLD.name)
    write_headline(world_table, f"{WORLD.title} headline ({PROFILE}): Stages 2 + 3 from "
                   f"{shown(init)}, held-out problems, T = 1 (greedy beside)",
                   name="headline-tinyworld.json")
    display(for_display(world_table))

# %% [markdown]
# ## 9. The contrast: when a block does not pay (TinyGSM)
#
# This project's first tiny world, TinyGSM, has no reason for a block: every item is a forward
# computation, so two paths can only do the same work twice, and its SFT loses accuracy when it
# opens one (notebook 04, section 11). The same notebook-sized runs there, committed (the command
# is in each card): the unseen reward ablation, and the unseen Stage-2 study of Table 3.

# %% tags=["report"]
tinygsm = committed("tiny-notebook06-ablation")
print(tinygsm["command"])
print("the paper's order reproduced:", tinygsm["numbers"]["verdict"]["reproduced"])
display(pd.DataFrame(tinygsm["numbers"]["ablation"]).set_index("arm")[
    ["reward", "start_accuracy_%", "accuracy_%", "start_parallel_ratio_%", "parallel_ratio_%",
     "paper_parallel_ratio_%"]])  # held-out TinyGSM hard: 100 x 4 at T = 1
study = committed("tiny-notebook06-unseen-stage2")
print(study["command"])
pd.DataFrame(study["numbers"]["rows"]).set_index("recipe").T

# %% [markdown]
# What it shows: on TinyGSM every arm ends where the unseen SFT started, between 3 and 5 % of hard
# samples right, with blocks in 95-99 % of answers whatever the reward, so the paper's order is
# not reproduced; keeping Stage 2 changes the hard tier by less than a point (4.5 % direct, 3.8 %
# through Stage 2). Why, in our reading (not the paper's claim): GRPO can only amplify what some
# samples of a group already do better, and there a block makes no sample better, while the SFT
# solves so few hard items that most groups of 8 are all wrong and carry no signal at all. In
# TinyWorld the cold start's search wins its group on hard items, and RL turns that into 15-19
# points for Parallel-R1-Seen (section 8); the same search written without tags ends as high
# (notebook 07's controls).

# %% [markdown]
# ## 10. The model writes its plan, and RL widens it (PlanWorld)
#
# **Goal:** watch RL change *how wide* the model searches, a choice the model makes itself. In
# every run above a block's width was fixed (a TinyWorld block has two paths), and in WideWorld
# (notebook 03, section 9) the engine opens nine paths and tells each its deal. **PlanWorld**
# (`pr1lib/worlds/planworld.py`, [docs/planworld.md](../docs/planworld.md)) hands both choices to
# the model. A question lists lettered deals and asks which one a price names; before its block
# the model writes one line, its **plan**, `Check (A)-(C)` (two deals: `Check (A), (B)`), and the
# forked engine reads that line and opens one path per deal it names, each path opening with the
# deal's label. The engine copies the model's words: how many paths, and which deal each one
# checks, is whatever the plan says.
#
# The cold start, `data/planworld-sft-unseen` (unseen mask, shipped with its card), learned from
# small searches only: plans of two or three deals in a row, never more. On a longer list its
# teacher's plan covers the deals that hold the answer, wherever they are, so the model has
# written plans that start at any letter; its paths do not read the plan (the mask hides it), so a
# path's context is the same at any width. RL's problems list ten deals. A plan of two finds the
# answer on about 2 items in 10, a plan of seven on about 7, so within a group the wider plans win
# more often. Two settings make that visible to RL: the grader pays a letter only where a path
# checked that deal and marked it ✓ (a guess after failed paths earns nothing), and the engine
# samples the plan's last letter hotter (`width_temperature`; the trainer still scores the
# policy's own log-probs), so plans wider than any the cold start wrote are tried and paid.
#
# What to watch on the dashboard below: its last panel, **block width** (mean paths per block,
# logged per step), and in *answers and structure* the share of blocks whose paths took distinct,
# correct deals (`split_rate`). The width should climb from the cold start's two-and-a-bit past
# three, the widest plan any cold-start row holds. The accuracy line is the training batch's and
# noisy. The run is short on purpose (the cell prints its steps, batch and learning rate; on
# `tiny` it trains in about a minute on two CPU cores, on `smoke` for a few steps), from the
# shipped start, on every profile (its model is a tiny one). A rerun resumes from its last
# checkpoint; a changed start or config moves the old run aside.

# %%
from pr1lib.evaluation.evaluate import held_out_config, sample_rows

PLAN = worlds.get("planworld")
plan_profile = "smoke" if PROFILE == "smoke" else "tiny"  # its model is tiny on every profile
pw_cfg = GRPOStageConfig.for_stage(3, plan_profile, variant="unseen", notebook=True, seed=SEED,
                                   world=PLAN.name)
pw_dir = OUT / "planworld"
print(f"{pw_cfg.max_steps} steps of {pw_cfg.per_device_train_batch_size // pw_cfg.num_generations}"
      f" problems x {pw_cfg.num_generations} samples, learning rate {pw_cfg.learning_rate:g}, "
      f"reward {pw_cfg.reward}")
pw_session = grpo.GRPOSession(pw_cfg, REPO_ROOT / PLAN.init("unseen"), pw_dir, follow=True,
                              dashboard=Dashboard(pw_dir / "metrics.csv",
                                                  title="PlanWorld, Stage 3 on ten deals"))
# 8 held-out ten-deal problems, one sample each at T = 1 (the same seed before and after)
peek = held_out_config(plan_profile, "hard", 8, "forked", pw_cfg.max_completion_length, k=1,
                       seed=SEED, prompt_style=pw_session.model_cfg.prompt_style,
                       source=pw_cfg.source)
pw_before = sample_rows(pw_session.policy, pw_session.tokenizer, peek)  # the cold start
print(run_to(pw_session, PanelState(reward=pw_cfg.reward, window=pw_cfg.window,
                                    parallel_steps=pw_cfg.parallel_steps,
                                    steps=pw_cfg.max_steps), pw_cfg.max_steps, "PlanWorld"))
pw_after = sample_rows(pw_session.policy, pw_session.tokenizer, peek)  # after RL
pw_run = grpo.finish(pw_session, evaluate_tiers=())  # merged/ and the run card, no evaluation

# %% [markdown]
# The dashboard above is this run's log (`metrics.csv`); here are its width and split rate over
# the first and the last few steps, and the check that the plans widened.

# %%
pw_log = pd.DataFrame(pw_run.rows).set_index("step")[["mean_paths", "split_rate"]]
few = max(1, min(5, len(pw_log) // 3))  # steps averaged at each end
pw_ends = pd.DataFrame({f"first {few} steps": pw_log.head(few).mean(),
                        f"last {few} steps": pw_log.tail(few).mean()})
widened = pw_ends.loc["mean_paths"].iloc[1] - pw_ends.loc["mean_paths"].iloc[0]
print(f"paths per block: {pw_ends.loc['mean_paths'].iloc[0]:.2f} -> "
      f"{pw_ends.loc['mean_paths'].iloc[1]:.2f}; blocks on distinct, correct deals: "
      f"{pw_ends.loc['split_rate'].iloc[0]:.0%} -> {pw_ends.loc['split_rate'].iloc[1]:.0%}")
should_see("PlanWorld RL: paths per block, last steps minus first", widened, plan_profile)
should_see("PlanWorld RL: paths per block, last steps", pw_ends.loc["mean_paths"].iloc[1],
           plan_profile)  # the cold start's rows plan 3 deals at most
should_see("PlanWorld RL: blocks on distinct, correct deals, last steps",
           pw_ends.loc["split_rate"].iloc[1], plan_profile)
pw_ends.round(3)

# %% [markdown]
# The same held-out problems, sampled with the same seed from the cold start and from the trained
# model: each one's plan line, and in full the first problem whose plan changed, its gold letter
# beside the question. A wider plan is no promise of a right answer: three deals checked out of
# ten still miss the answer most of the time. A line that is not a plan (`no plan`) ends its
# sample there, graded like any malformed block.

# %%
from pr1lib.format.plans import plan_items


def plan_of(row: dict) -> str:
    """The plan a sample wrote (its first line), or what it wrote instead."""
    first = row["samples"][0]["text"].split("\n")[0]
    return f"{len(plan_items(first))} deals: {first}" if plan_items(first) else f"no plan: {first}"


plans = pd.DataFrame({"cold start": [plan_of(r) for r in pw_before],
                      "after RL": [plan_of(r) for r in pw_after]})
changed = [i for i, (a, b) in enumerate(zip(plans["cold start"], plans["after RL"])) if a != b]
pick = changed[0] if changed else 0  # else the first problem
print(pw_before[pick]["question"], "| gold:", pw_before[pick]["answer"].split()[-1])
for when, rows in (("cold start", pw_before), ("after RL", pw_after)):
    print(f"\n{when}:\n{rows[pick]['samples'][0]['text']}")
plans

# %% [markdown]
# You should see the width climb past three, plans that name deals no cold-start row ever
# planned, within these few steps. Not every wider block works: the split rate is about half,
# because a path for a late letter, (H) to (J), which the cold start's paths checked least often,
# now and then checks another deal's prices. The committed runs of this recipe (300 steps, three
# cold starts trained with different seeds, and a serial control with the same cold-start
# problems and the same RL) are read in notebook 07, section 9, and
# [docs/planworld.md](../docs/planworld.md#regimes-tried) lists the regimes tried before this one:
# the plans stayed at three deals, the widest the cold start wrote, until the plans could start
# anywhere, the paths stopped reading the plan, guesses stopped paying and the width was explored.

# %% [markdown]
# ## Summary
#
# - GRPO here is stock TRL: `GRPOTrainer` with the paper's knobs, a `rollout_func` that samples with
#   the parallel engine, and one overridden method for the unseen log-probs.
# - The recipe is a table: seen SFT → Stage 2 (parallel-and-correct) → Stage 3 (accuracy); unseen
#   SFT → Stage 3 (S1 or S2, with the official script's ε_high = 0.28 for S2); the plain baseline
#   runs the seen stages without tags, from the base model.
# - Every held-out number is mean@k at T = 1 with greedy beside it, each model decoded the way its
#   variant rolls out, and every comparison carries a paired 95 % interval over problems.
# - Runs checkpoint every `save_steps` and resume exactly (same data order, RNG and weights); the
#   panel trains N steps at a time on top of that, and says which clip its reward takes and which
#   block rate its schedule reached in the dose-response runs.
# - Where a block pays against one guess (TinyWorld's hard items), Stage 2 then accuracy-only
#   Stage 3 raise hard accuracy well past the plain baseline in the committed 3-seed runs, and the
#   parallel ratio climbs in Stage 3, whose reward never pays for a block; the same search
#   without tags ends as high (notebook 07's controls). Sections 4-6 print whether this
#   notebook's short runs agree, beyond their noise or not.
# - The unseen variant's short S2 run is reported as it came out (section 6), with our reading of
#   why it differs from the paper.
# - Where a block neither costs nor pays much (TinyWorld's easy items), the reward mode sets how
#   often the model opens one, in Table 4's order on every seed, on the unseen variant (the
#   paper's) as on the seen one.
# - Where a block does not pay (TinyGSM, section 9), no reward makes RL find one worth keeping.
# - Where the model writes its own plan (PlanWorld, section 10), RL widens its plans past the
#   widest the cold start wrote: plans of more deals find the answer more often, and with guesses
#   unpaid and the width explored, RL finds and keeps them.

# %% [markdown]
# ## Exercises
#
# 1. Give the structure reward a small weight next to accuracy (`structure_weight=0.3` in the
#    panel, or `extra_rewards=(("structure", 0.3),)` in the config). Predict first: does the
#    parallel ratio rise, and what happens to accuracy on the hard tier? Then run Stage 3.
#
#    <details><summary>Hint</summary>
#
#    TRL logs each reward function's mean (`rewards/<name>/mean`) and their weighted sum
#    (`reward`) in `metrics.csv`. Section 7's `structure` arm shows what a reward that pays blocks
#    whatever the answer does to accuracy.
#    </details>
# 2. Run Stage 3 of the seen variant with the alternating reward instead of accuracy
#    (`GRPOStageConfig.for_stage(3, PROFILE, reward="alternating", notebook=True)`). Which
#    clip-high does it take, and why?
#
#    <details><summary>Hint</summary>
#
#    Print `GRPOStageConfig.for_stage(...).clip_high` for both rewards, and look up `CLIP_HIGH` in
#    `pr1lib.config` and clip-higher in docs/recipe.md.
#    </details>
# 3. Interrupt a Stage 3 run halfway (stop the cell), then run the cell again. Check in
#    `metrics.csv` and in the `trainer/` folder that it resumed from the last checkpoint.
#
#    <details><summary>Hint</summary>
#
#    `GRPOSession.step` reads the last `trainer/checkpoint-N`; a checkpoint lands every
#    `save_steps` steps. Compare the steps in `metrics.csv` before and after the rerun.
#    </details>
#
# Solutions, with the reasoning: [solutions/06_grpo_training.py](../solutions/06_grpo_training.py)
# (`python solutions/06_grpo_training.py` runs them).

# %% [markdown]
# # 07 · Evaluation: the paper's table, our numbers, and what training did to the blocks
#
# **Goal:** score every checkpoint the earlier notebooks made the way the paper scores its models,
# put the numbers in the layout of the paper's Table 2 without mixing them up with the paper's own,
# and read two training analyses on our runs: where blocks open over RL, and the mid-training
# scaffold.
#
# You will learn
# - what mean@k and pass@k measure, why pass@k needs an unbiased estimator, and how to write it;
# - the structure metrics next to accuracy: parallel ratio, tag validity, first-block position and
#   how different sibling paths are;
# - how to read the paper's Figure 3 (blocks drifting toward the end of the response) on your own
#   run, and how to say honestly whether the tiny run shows it;
# - the mid-training scaffold: an alternating reward first, then accuracy only, and what happens at
#   the switch;
# - whether a gain comes from *parallel* thinking or from a search any model could write serially:
#   five controlled arms, and accuracy against sequential decode steps.
#
# Terms: [glossary](../docs/glossary.md) · the whole recipe in one picture:
# [docs/recipe.md](../docs/recipe.md)
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/pr1-tutorial/pr1/blob/main/notebooks/07_evaluation.ipynb)

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

import transformers

transformers.utils.logging.disable_progress_bar()  # a loading bar per checkpoint: nothing to read

# %% [markdown]
# ## 1. What this profile evaluates
#
# The paper evaluates Qwen3-4B-Base and its descendants on AIME24, AIME25 and AMC23 with 16 samples
# per problem (mean@16, pass@16) and on a 316-problem MATH set with one sample (mean@1), all at
# T = 1.0 with the parallel rollout engine (docs/recipe.md#10-evaluation-protocol). A laptop
# cannot, so each profile picks its own benchmarks and sizes below. Every row is sampled at T = 1
# the way its variant rolls out in RL (`pr1lib.config.VARIANT_ROLLOUT`: unseen checkpoints with
# forked paths, seen ones as they were trained, the plain baseline as one stream; a world may say
# otherwise: TinyWorld's seen paths see each other, so its seen rows sample plainly,
# `pr1lib.worlds.World.rollout`) and with its own prompt. `table_n` is the number of problems,
# `table_k` the samples per problem; `switch`/`total` are the scaffold's steps (§6).

# %%
from pr1lib.config import NotebookConfig

NB = NotebookConfig.for_profile(PROFILE)  # this profile's sizes (pr1lib.config presets)
{k: getattr(NB, k) for k in ("benchmarks", "table_n", "table_k", "switch", "total", "window")}

# %% [markdown]
# ## 2. mean@k and pass@k, from scratch
#
# Sample k completions for each problem and check each one. **mean@k** is the share of correct
# samples, averaged over problems: the expected accuracy of a single sample. **pass@k** asks
# whether *at least one* of k samples is right: the chance a user with a perfect verifier would get
# an answer.
#
# Estimating pass@k from exactly k samples is noisy, and the naive plug-in `1 − (1 − c/n)^k` (with
# c correct out of n samples) is biased. The unbiased estimator draws k of the n samples *without*
# replacement: the chance that all k are wrong is C(n−c, k) / C(n, k), so
# pass@k = 1 − C(n−c, k) / C(n, k). Written with nothing but `math.comb`:

# %%
from math import comb


def pass_at_k_scratch(n: int, c: int, k: int) -> float:
    """1 - P(all k drawn samples are wrong), drawing k of n without replacement."""
    return 1.0 - comb(n - c, k) / comb(n, k)  # comb(a, b) = 0 when b > a: then pass@k = 1


print(
    "n=4 samples, c=1 correct: pass@1 =",
    pass_at_k_scratch(4, 1, 1),
    " pass@2 =",
    pass_at_k_scratch(4, 1, 2),
)
print(
    "plug-in 1-(1-c/n)^k for pass@2:", 1 - (1 - 1 / 4) ** 2, "(too low: it draws with replacement)"
)

# %% [markdown]
# The library's `pr1lib.evaluation.metrics.pass_at_k` computes the same quantity as a running
# product (the binomials overflow floats for large n). This cell checks the two agree on every case
# up to n = 20:

# %%
from pr1lib.evaluation.metrics import pass_at_k

cases = [(n, c, k) for n in range(1, 21) for c in range(n + 1) for k in range(1, n + 1)]
worst = max(abs(pass_at_k_scratch(n, c, k) - pass_at_k(n, c, k)) for n, c, k in cases)
assert worst < 1e-12, worst
print(f"{len(cases)} cases agree; largest difference {worst:.1e}")

# %% [markdown]
# ## 3. Which checkpoints exist
#
# Table 2 has one row per stage. Each earlier notebook (or its command-line twin) leaves a run
# folder with a `merged/` model; `find_checkpoints` looks in the usual places for this profile and
# seed and reports what it could not find. Nothing is trained here to fill a gap: a missing row
# stays empty.
#
# | row | made by |
# |---|---|
# | base | the profile's model (tags added, untrained) |
# | Parallel-SFT-Seen / -Unseen | notebook 04, `python -m pr1lib sft --variant seen\|unseen` |
# | plain GRPO, no tags (paper: "+ RL on GSM8K"; a world: easy, then hard) | notebook 06 §5 |
# | Parallel-R1-Seen | notebook 06 (Stage 2 → Stage 3), `python -m pr1lib grpo --stage all` |
# | Parallel-R1-Unseen (S1) | `python -m pr1lib grpo --stage 3 --variant unseen --reward accuracy` |
# | Parallel-R1-Unseen (S2) | notebook 06 §6, `python -m pr1lib grpo --stage 3 --variant unseen` |

# %%
import pandas as pd

from pr1lib import worlds
from pr1lib.evaluation.headline import (
    evaluate_checkpoints,
    find_checkpoints,
    headline_table,
    write_headline,
)
from pr1lib.store.paths import shown

# in a world: its base model, and its shipped SFTs where notebook 04 left no full-length run
shipped = {"base": "plain", "sft-seen": "seen", "sft-unseen": "unseen"}
defaults = {k: worlds.get(NB.world).init(v) for k, v in shipped.items()} if NB.world else {}
found, missing = find_checkpoints(PROFILE, SEED, defaults=defaults)
if NB.world:  # a world's main line trains one unseen recipe, S2 (notebook 06); S1 is not a row
    missing.pop("rl-unseen-s1", None)
print("found:")
for key, where in found.items():
    print(f"  {key:13s} {shown(where)}")
print("missing (searched):" if missing else "missing: none")
for key, where in missing.items():
    print(f"  {key:13s} {' | '.join(shown(w) for w in where)}")

# %% [markdown]
# ## 4. Scoring them
#
# `evaluate_checkpoints` runs `pr1lib.evaluation.evaluate.run_eval` per checkpoint and benchmark: k
# samples per problem, both answer checkers (the paper's strict `Final Answer:` match and a robust
# one), and per-sample structure statistics. Each problem becomes one line of a JSONL file under
# `runs/07_evaluation-<profile>/eval/`, so an interrupted run resumes, and a rerun with the same
# weights reads the results back without loading the model (retraining a checkpoint invalidates
# them).

# %%
import time

start = time.perf_counter()
# a world may sample a variant its own way (TinyWorld's seen paths see each other): the same here
modes = {v: worlds.get(NB.world).rollout(v) for v in ("seen", "unseen")} if NB.world else None
ours = evaluate_checkpoints(found, PROFILE, NB.benchmarks, n=NB.table_n, k=NB.table_k, modes=modes)
print(f"evaluated {len(ours)} checkpoints in {time.perf_counter() - start:.0f} s")
metrics = ["accuracy", "pass_at_k", "parallel_ratio", "valid_ratio", "blocks_per_response",
           "first_block_position", "path_diversity", "mean_length", "n", "k"]
per_stage = pd.DataFrame({(key, bench): {m: s[m] for m in metrics} for key, by in ours.items()
                          for bench, s in by.items()}).T
per_stage.rename(columns=lambda c: c.replace("_", " ")).round(3)  # headers wrap between words

# %% [markdown]
# Reading the columns: `accuracy` is mean@k and `pass at k` pass@k (strict checker);
# `parallel ratio` is the share of samples with at least one block; `valid ratio` the share whose
# tags follow the strict grammar; `first block position` where the first `<Parallel>` starts, as a
# fraction of the response in tokens; `path diversity` is 1 − the word overlap of sibling paths (0 =
# copies, 1 = disjoint; the paper used BLEU and embeddings instead).
#
# ### The paper's Table 2, and ours beside it
#
# `pr1lib.evaluation.paper.side_by_side` keeps the two apart: every paper column is labelled with
# the paper's model and benchmark, every one of ours with our model, benchmark, k and checker. A
# tiny-model number on a tiny world is **not** comparable with a Qwen3-4B number on AIME; the layout
# is the same so you can see which stages moved which way, nothing more. The table shows whose
# numbers they are above each column, ours first, then the paper's parallel % and Avg, then its
# benchmarks.

# %% tags=["report"]
from pr1lib.evaluation.headline import loaded_label
from pr1lib.evaluation.paper import for_display, side_by_side

MODEL = loaded_label(found, NB.model_label)  # what was loaded: its architecture and size
table = side_by_side(ours, MODEL, world=NB.world)  # a world's rows say what ran there
print(f"missing checkpoints (empty 'ours' cells): {', '.join(missing) or 'none'}")
for_display(table)

# %% [markdown]
# The short version of the same table goes to `runs/latest-headline.json` (and, under `make tour`,
# into the tour folder, where the tour prints it and puts it on top of its report):

# %% tags=["report"]
headline = headline_table(ours, MODEL, world=NB.world)
title = (f"Headline ({PROFILE}): paper = Qwen3-4B-Base, Avg over AIME/AMC/MATH; "
         f"ours = {MODEL} on {', '.join(NB.benchmarks)}, k={NB.table_k}")
write_headline(headline, title)
print(title)
for_display(headline)

# %% [markdown]
# You should see: one headline row per checkpoint found in section 3, each with our numbers; the
# base model, never trained on the tags, opens (almost) no block; and pass@k is never below mean@k.

# %%
from pr1lib.notebook.expect import should_see

assert "base" in found and set(ours) == set(found) and len(headline) == len(found)
assert headline.filter(like="ours:").notna().any(axis=1).all()  # no empty row of ours
base = ours["base"][NB.benchmarks[0]]
should_see("parallel ratio, base model", base["parallel_ratio"], PROFILE)
should_see("mean@k, base model", base["accuracy"], PROFILE)
gap_ok = should_see("pass@k minus mean@k, base model",
                    base["pass_at_k"] - base["accuracy"], PROFILE)

# %% [markdown]
# How far to trust a row: each mean@k below carries a 95 % interval from resampling the problems,
# and each comparison is a paired bootstrap on the same problems. The lines after the table are
# computed from these numbers: RL against its own cold start (what the RL stages add to the same
# model), and against plain GRPO with the same steps (what the cold start and its tags add
# together: the two arms differ in both, so this line cannot say which pays; section 7 adds the
# controls that separate *parallel* from *more search*).

# %%
from pr1lib.evaluation.headline import headline_intervals, headline_verdict

hard = NB.benchmarks[0]
print("\n".join(headline_verdict(ours, hard)))
acc = {key: by[hard]["accuracy"] for key, by in ours.items() if hard in by}
if {"rl-seen", "sft-seen", "grpo-gsm8k"} <= set(acc):  # the tour checks the lesson
    should_see("R1-Seen minus SFT-Seen, hard mean@k", acc["rl-seen"] - acc["sft-seen"], PROFILE)
    should_see("R1-Seen minus plain GRPO, hard mean@k", acc["rl-seen"] - acc["grpo-gsm8k"],
               PROFILE)
headline_intervals(ours, hard)

# %% [markdown]
# pass@j for j = 1, 2, 4, … k, per checkpoint, from the same samples (the unbiased estimator again).
# A curve that climbs steeply from pass@1 means the model *can* solve problems it usually misses:
# sampling diversity that RL can turn into accuracy.

# %% tags=["report"]
from pr1lib.notebook.reports import pass_curve_figure

pass_curve_figure(ours)

# %% [markdown]
# ## 5. Training analytics: where do blocks open? (the paper's Figure 3)
#
# During RL the paper tracked the relative position of the `<Parallel>` block (its start ÷ response
# length) and found it **rising**: early in training blocks open near the start, with paths trying
# different ways to solve the problem (exploration); late in training they open near the end, after
# one line of reasoning has found an answer, with paths checking it (verification). Its reading: a
# reward that pays for the final answer makes the model risk-averse, so it commits first and
# parallelises the checking (docs/recipe.md#12-analyses).
#
# Every GRPO run folder here logs the same series per step (`metrics.csv`, from the dashboard; a run
# without it falls back to the log kept in its last checkpoint). We plot the RL checkpoints found
# above: parallel ratio and mean first-block position of the training samples, against the step.

# %%
from pr1lib.notebook.curves import CURVE_KEYS, figure3, training_curves

rl_runs = {key: found[key] for key in ("rl-seen", "rl-unseen-s1", "rl-unseen-s2") if key in found}
curves = pd.concat(
    [training_curves(where, label=key) for key, where in rl_runs.items()]
    or [pd.DataFrame(columns=["step", "run", *CURVE_KEYS])],
    ignore_index=True,
)
print(
    {key: int((curves["run"] == key).sum()) for key in rl_runs}
    or "no RL run found: run notebook 06 first"
)
curves.groupby("run")[["parallel_ratio", "block_position", "accuracy"]].agg(
    ["first", "last", "mean"]
).round(3)

# %% tags=["report"]
figure3(curves) if len(curves) else print("no RL run to plot")

# %% [markdown]
# What this run shows, computed from the series above: the first third of the logged steps against
# the last third, and a least-squares slope. A change counts only if it exceeds 0.05 and twice its
# noise (the scatter of the per-step values); a step's value comes from a few dozen samples, so
# short runs are noisy. The share of groups with a learning signal says whether GRPO had anything to
# learn from: when every sample of a group gets the same reward, its advantage is zero and the
# policy does not move. A position that is 0 on every step is read apart from noise: then every
# block opened at the response's first token, and the verdict says so
# (`pr1lib.notebook.curves.read_figure3`).

# %% tags=["report"]
from pr1lib.notebook.curves import read_figure3

print("\n".join(read_figure3(curves)) if len(curves) else "no RL run to read")

# %% [markdown]
# Why a position can sit at 0: a model opens its block where its cold start taught it to. In the
# paper a response can reason before its block or after it, so the block's place can move (near
# the start early in RL, later toward the end). The cell below reads where this project's two
# worlds' cold-start traces (their rule teachers, 50 training items per tier) open their first
# block. Where every trace opens with its block, the model learns to open it first, and a logged 0
# is that habit, not noise a longer run would average away; a world whose traces compute before
# they branch is one where the position has room to move.

# %%
from pr1lib.notebook.curves import teacher_block_starts

for world in worlds.names():
    for tier, share in teacher_block_starts(world, n=50, seed=SEED).items():
        print(f"{world:9s} {tier}: {share['with a block']:.0%} of 50 traces have a block, "
              f"{share['block first']:.0%} of those open it at the response's first character")

# %% [markdown]
# ## 6. The mid-training scaffold
#
# The paper's last analysis (Figure 4; [docs/recipe.md, Analyses](../docs/recipe.md#12-analyses))
# uses parallel thinking as **scaffolding**: train with the alternating reward (S2: accuracy on 8 of
# every 10 steps, and on the other 2 the tiered reward, which pays a bonus for a valid block) for
# the first 200 steps, which keeps the parallel ratio high and forces exploration; then continue
# from the step-200 checkpoint with the accuracy reward alone. After the switch the parallel ratio
# falls while accuracy keeps rising (AIME25 peaked at 25.6 %). The authors call it preliminary, and
# the switch point was picked by hand.
#
# `mid_training` (`pr1lib.experiments.midtraining`) does the same with two `run_grpo` calls: phase 1
# from the unseen SFT checkpoint with the alternating reward for `switch` steps, phase 2 from phase
# 1's `merged/` model with the accuracy reward up to `total` steps (clip-high 0.28 then 0.2, as in
# the paper's scripts). Both phases train on the hard problems of this notebook's world
# (`world=NB.world`: on `tiny`, TinyWorld, the world the unseen SFT was trained in; a GRPO stage
# refuses a start from another world's problems). Held-out accuracy (mean@k at T = 1, greedy beside
# it) is measured at the start, at the switch and at the end. The tiny profile keeps the paper's
# window (2 tiered steps of every 10) and switches after one window: a short live run, read beside
# the three-seed study at the end of this section; `smoke` shrinks it to show the plumbing only.
# The result is cached in the run folder.

# %%
from pr1lib.experiments.midtraining import mid_training
from pr1lib.notebook.curves import scaffold_curves, scaffold_figure, switch_effect

scaffold_init = found.get("sft-unseen")
print("scaffold starts from:",
      shown(scaffold_init) if scaffold_init else "the base model (no unseen SFT run found)")
start = time.perf_counter()
# follow=True: a scaffold begun from an SFT retrained since (notebook 04 run again) moves aside
# with one line and trains again
scaffold = mid_training(PROFILE, scaffold_init, NB.switch, NB.total, seed=SEED,
                        variant="unseen", world=NB.world, window=NB.window, parallel_steps=2,
                        eval_n=NB.scaffold_eval_n,
                        per_device_train_batch_size=NB.scaffold_batch, follow=True)
print(f"{scaffold['total_steps']} steps ({scaffold['seconds']} s when trained; this call "
      f"{time.perf_counter() - start:.0f} s) in {[shown(r) for r in scaffold['runs']]}")

# %% tags=["report"]
scaffold_figure(scaffold)

# %% [markdown]
# Before and after the switch, in numbers (training samples: mean over each phase's steps; held-out:
# mean@k at T = 1 on the profile's hard test problems):

# %% tags=["report"]
effect = switch_effect(scaffold)


def change(key: str) -> str | None:
    """'rose' / 'fell' when the change beats 0.05 and twice its noise, else 'stayed within
    noise'."""
    before, after, se = effect[key]["before"], effect[key]["after"], effect[key]["se"]
    if before is None or after is None:
        return None
    bar = max(0.05, 2 * se)
    return (
        "rose"
        if after - before > bar
        else "fell"
        if before - after > bar
        else "stayed within noise"
    )


for key in ("parallel_ratio", "accuracy"):
    e = effect[key]
    print(
        f"{key} (training samples): {e['before']:.2f} before the switch, {e['after']:.2f} after "
        f"(±{2 * e['se']:.2f}): {change(key)}"
        if change(key)
        else f"{key}: not logged in both phases"
    )


print(pd.DataFrame(effect["held_out"]).to_string(index=False))
if change("parallel_ratio") and change("accuracy"):
    paper_like = change("parallel_ratio") == "fell" and change("accuracy") != "fell"
    print(
        "the paper's pattern (parallel ratio down, accuracy not down) is",
        "seen" if paper_like else "not seen",
        f"in this {scaffold['total_steps']}-step run",
    )

# %% [markdown]
# You should see: the scaffold starts from a trained SFT of this notebook's world, so its held-out
# accuracy at the start is that checkpoint's, far from 0, and this short run leaves it in the same
# range at the end. A start trained in one world and scored on another's problems would show 0 %
# here, and the assertion stops the tour.

# %%
held = {h["step"]: h for h in scaffold["held_out"]}
ok = [should_see("scaffold, hard mean@k at the start", held[0]["accuracy"], PROFILE),
      should_see("scaffold, hard mean@k at the end", held[NB.total]["accuracy"], PROFILE)]
assert False not in ok, "the scaffold scores outside its range: does it train in its start's world?"

# %% [markdown]
# The scaffold is an RL run too, so it gets the Figure 3 reading of section 5 as well (both phases
# on one step axis; the switch is at step `switch`):

# %% tags=["report"]
scaffold_frame = scaffold_curves(scaffold)
print("\n".join(read_figure3(scaffold_frame)))
figure3(
    scaffold_frame, title=f"Figure 3 on the scaffold run (switch at step {scaffold['switch_step']})"
).add_vline(x=scaffold["switch_step"], line_dash="dash")

# %% [markdown]
# ### The scaffold against its control, three seeds
#
# Does the scaffold help, or would accuracy-only RL from the same SFT have done as well in the same
# steps? The live run above cannot say: it has no control and one seed. The `midtraining` study
# runs both arms per seed, in the world of their start: the **scaffold** (S2 to the switch, then
# accuracy only) and the **control** (accuracy only throughout, split at the same step, so the two
# differ in phase 1's reward alone, and its clip-high, as in the paper's S2 and S1 scripts). Each
# is scored on the same held-out hard problems at the start, the switch and the end, and the
# scaffold minus the control is a paired bootstrap over those problems (each problem averaged
# over the seeds). The cell reads the committed card (the command on its first line runs it
# again) and prints what it shows, computed from its numbers.

# %%
from pr1lib.experiments.midtraining import scaffold_verdict
from pr1lib.notebook.curves import scaffold_card_figure
from pr1lib.store.cards import committed

study = committed("tinyworld-midtraining", world=NB.world)
if study is None:
    print(f"no committed scaffold study in this profile's world ({NB.world or 'real data'})")
else:
    print("the committed run:", study["command"])
    print("\n".join(scaffold_verdict(study["numbers"])))

# %% tags=["report"]
scaffold_card_figure(study["numbers"]) if study else None

# %% [markdown]
# How to read it on `tiny` (our reading of the lines above, not the paper's claim): the paper's
# scaffold holds up blocks that accuracy alone lets fall (its accuracy-only run kept a block in
# 13.6 % of answers, [Table 4](../docs/recipe.md#113-reward-ablation-table-4)), so after its switch
# the block rate falls while accuracy rises. In TinyWorld a block pays on hard items, so accuracy
# alone pays for blocks too: the per-arm lines show whether the block rate still rises after the
# switch in both arms, the contrasts whether the scaffold's tiered steps leave more blocks at the
# end and whether they buy accuracy over the control, and the last line puts the three together. The
# paper ran 200 steps of S2 on a 4B model; this study runs 20 on a 0.92M one, three seeds, so read a
# gap only with its interval.

# %% [markdown]
# ## 7. Parallel thinking, or just more search?
#
# Parallel-R1 beats plain GRPO in TinyWorld, but that comparison changes two things at once. The
# cold start teaches a *search* (try the candidate pairs, check each one, keep the one that fits),
# and it writes that search inside `<Parallel>` blocks. Which of the two pays? The `controls` study
# (`pr1lib/experiments/controls.py`) answers with five arms that differ in one thing each, on the
# same held-out hard problems, with the same Stage 2 and Stage 3 steps and the same three seeds:
#
# | arm | cold start | what it controls for |
# |---|---|---|
# | plain | none (the base model) | RL alone |
# | plain-sft | the same rows, each a one-guess solution | an SFT with the same steps, no search |
# | serial | the same search, no tags (`grammar.serialize`) | the search, not the parallel form |
# | seen | the shipped SFT: the search in blocks | Parallel-R1-Seen |
# | unseen | the search in blocks, numbered paths, the unseen mask | Parallel-R1-Unseen |
#
# Every arm runs Stage 2 then Stage 3 here. For the unseen arm that departs from the paper's unseen
# recipe, which goes from its SFT straight to Stage 3 (the paper's Table 3 found Stage 2 hurt it).
#
# Besides accuracy, every sample is scored in **sequential decode steps**: a block whose paths are
# decoded side by side (the forked engine of notebook 03) costs its longest path, not the sum. So
# the same search can finish in fewer steps when it is written as paths a machine can run at once.
# This is expensive (five arms × three seeds of Stages 2 and 3, about two hours on two cores), so
# the cell reads the committed card; the command on its first line runs it again.

# %%
from pr1lib.experiments.controls import verdict
from pr1lib.notebook.reports import controls_bars, controls_figure, controls_frame
from pr1lib.store.cards import committed

card = committed("tinyworld-controls")
print("the committed run:", card["command"])
controls = card["numbers"]  # the five arms' table, built from their run folders
controls_frame(controls)

# %% tags=["report"]
controls_bars(controls)

# %% [markdown]
# Each contrast below is a paired bootstrap over the same problems (in this card, each problem's
# accuracy averaged over the seeds; a table the study builds today resamples the seeds too, as
# its `interval_method` says), read by the code, not by hand:

# %%
print("\n".join(verdict(controls)))

# %% [markdown]
# Read the four lines as four questions. Against plain GRPO and against a plain SFT with the same
# steps, Parallel-R1-Seen is far ahead: the cold start's search pays. Against the same search
# written without tags it is level (the interval spans zero): in TinyWorld the block itself adds
# no accuracy. So "a block pays" holds against a forced one-guess answer (notebook 04, section 10),
# not against the serial search; the unseen arm, whose blind paths collide, ends far below it. The
# committed numbers are in `results/tinyworld-controls.json`: seen − plain +26.2 points, seen −
# plain-sft +19.9 points, seen − serial −2.1 points (interval −5.7 to +1.5 points).
#
# Accuracy is not the whole story: what a block can buy is *time*. The next figure counts a sample
# only if it is right **and** fits a cap on sequential decode steps (APR's way of comparing
# searches at equal latency). Where a serial trace does not fit a cap, the same search as parallel
# paths may.

# %% tags=["report"]
controls_figure(controls)

# %% [markdown]
# ## 8. A search split across paths: WideWorld
#
# Section 7's answer was *the search*: written without tags it does as well, and the unseen form,
# whose paths cannot see each other, split its two prices only by chance. WideWorld
# ([docs/wideworld.md](../docs/wideworld.md), notebook 03 section 9) is built to ask what parallel
# paths buy when they do split a search: ten lettered deals, one of which costs the total; a
# serial search checks them one by one and stops at the one that checks out; Parallel-R1 checks
# deal (A) and, when it fails, opens one block of nine paths, each told its deal by the letter the
# engine writes. The same `controls` study runs on it, with every cold start trained in one run of
# the pipeline (two SFT seeds for the serial, seen and unseen arms), three RL seeds per arm, and
# one more arm: the unseen variant in the paper's own curriculum, SFT then Stage 3 only, as many
# RL steps (`unseen-s3`).

# %%
wide = committed("wideworld-controls")
print("the committed run:", wide["command"])
print(f"wall time of the arms: {wide['numbers']['wall']['total'] / 3600:.1f} h")
wide_table = wide["numbers"]
controls_frame(wide_table)

# %% [markdown]
# Every sample is an answer in one of two modes: a checked guess (deal (A) was right, one line, no
# block) or a search. Both forms may stop after the guess, so the modes are the same in every arm
# and the steps are compared mode by mode:

# %%
from pr1lib.notebook.reports import cap_words, latency_frame, modes_frame

print("\n".join([*verdict(wide_table), cap_words(wide_table)]))
modes_frame(wide_table)

# %% tags=["report"]
controls_figure(wide_table)

# %% [markdown]
# Sequential steps are what a machine that runs the paths at once would take. Seconds are what
# this CPU took: `python -m pr1lib bench latency` times R1-Unseen (forked) and the serial arm, both
# after RL (seed 0, shipped as `data/wideworld-r1` and `data/wideworld-serial-r1`), on the same 64
# held-out hard items, one answer per call (a user waiting) and 64 per call (a server's batch).
# Its card also holds where each answer's seconds went (`pr1lib.decoding.clock`: prefill,
# sampling, steps of one row per answer, steps with the paths' k rows, fork, merge, drop and the
# Python between them), and the two ratios the measured one is read against: at batch 1, 1.1 x
# the sequential-steps ratio; at batch 64, where the cores are full, the token ratio:

# %%
from pr1lib.notebook.reports import latency_breakdown_figure, latency_lines

latency = committed("wideworld-latency")
print("the committed run:", latency["command"])
display(latency_frame(latency["numbers"]))
print("\n".join(latency_lines(latency["numbers"])))

# %% tags=["report"]
latency_breakdown_figure(latency) if "breakdown" in latency["numbers"] else None

# %%
rows = {r["arm"]: r for r in wide_table["rows"]}
step_ratio = rows["unseen"]["mean_sequential_steps"] / rows["serial"]["mean_sequential_steps"]
seconds_ratio = latency["numbers"]["unseen_over_serial"]["1"]
print(f"R1-Unseen takes {step_ratio:.2f}x the serial arm's sequential steps and "
      f"{seconds_ratio:.2f}x its seconds per answer at batch 1: the seconds save "
      f"{'less' if seconds_ratio > step_ratio else 'as much or more'} than the steps")
should_see("WideWorld: R1-Unseen's sequential steps over the serial arm's", step_ratio, PROFILE)
seconds_ok = should_see("WideWorld: R1-Unseen's seconds per answer over serial's, batch 1",
                        seconds_ratio, PROFILE)

# %% [markdown]
# How to read it: where each path is told its deal, the paths that cannot see each other answer at
# least as well as the serial search (the verdict lines give unseen − serial and its interval) in
# about half its sequential steps, and within a step cap the serial search does not fit they still
# answer. The lines above say whether the seconds follow the steps at each batch size, against its
# target, and the figure shows where they go: the serial search's one-row steps against R1-Unseen's
# fewer steps, some of one row (the deal it guesses first, the summary), some carrying the paths' k
# rows (a step's matrix work grows with its rows), with the fork, merge and drop that regroup the
# rows between them; the lines give a k-row step's cost and the regroups' share. The seen arm checks
# all nine deals in one stream, so it is the slowest; one of its two SFT seeds learned a summary
# that copies the wrong path ([docs/wideworld.md](../docs/wideworld.md) has every arm's numbers and
# the targets met and missed).

# %% [markdown]
# ## 9. Does RL teach the width? PlanWorld
#
# Sections 7 and 8 compare searches the cold start already holds: the engine decides when a block
# opens, how wide it is and which path checks what. [PlanWorld](../docs/planworld.md) hands those
# choices to the model, as the paper's thesis needs: before its block the model writes a plan,
# `Check (A)-(C)`, and the forked engine opens one path per deal it names, each path opening with
# that deal's label (the engine copies the model's words). The cold start holds small searches
# only, plans of two or three deals in a row that hold the answer, anywhere in a list; RL runs on
# lists of ten, where a wider plan finds the answer more often. RL pays a letter only where a check
# of that deal marked it ✓ (a guess after failed checks earns nothing, in both arms), and the
# forked engine samples the end letter of the unseen arm's plans hotter (`width_temperature`;
# the trainer still scores the policy's log-probs). Two arms of the `controls` study, the same
# cold-start problems, RL problems, steps and seeds:
#
# | arm | cold start | RL, Stage 3 | controls for |
# |---|---|---|---|
# | serial-s3 | the plans and checks in one stream, to the first ✓ | plain GRPO | the search |
# | unseen-s3 | the plan, a path per deal it names, unseen mask | R1-Unseen | the own plan |
#
# Each arm trains three cold starts (SFT seeds 0, 1, 2) and one RL run from each, and the
# intervals resample seeds and problems; the evaluation is 100 held-out ten-deal problems × 4
# samples at T = 1.

# %%
from pr1lib.notebook.reports import seeds_frame

wide = committed("planworld-controls-wide")
print("the committed run:", wide["command"])
wide_table = wide["numbers"]
print("widths in any arm's SFT rows:", wide_table["sft_widths"])
print(f"wall time of the arms: {wide_table['wall']['total'] / 3600:.1f} h")
controls_frame(wide_table)

# %%
print("\n".join(verdict(wide_table)))
should_see("PlanWorld regime 9: R1-Unseen minus serial, hard mean@k",
           wide_table["contrasts"]["unseen-s3-serial-s3"]["diff"], PROFILE)
display(seeds_frame(wide_table))
modes_frame(wide_table)

# %% [markdown]
# Did RL widen the plans past the cold start's, and did that pay? The paths per block before and
# after RL (the cold start's rows plan three deals at most), the share of blocks whose paths took
# distinct, correct deals, and each arm's mean@4 gain from its cold start (the mean over seeds):

# %%
wide_rows = {r["arm"]: r for r in wide_table["rows"]}
planner = wide_rows["unseen-s3"]
print(f"R1-Unseen, paths per block: {planner['start_paths_per_block']:.2f} after SFT, "
      f"{planner['paths_per_block']:.2f} after RL; blocks on distinct, correct deals: "
      f"{planner['start_distinct_share_rate']:.1%} -> {planner['distinct_share_rate']:.1%}")
gains = {arm: sum(s["accuracy"] - s["start"] for s in r["per_seed"]) / len(r["per_seed"])
         for arm, r in wide_rows.items()}
print("mean@4 gain from the cold start:", {a: f"{g:+.1%}" for a, g in gains.items()})
should_see("PlanWorld regime 9: R1-Unseen's paths per block after RL",
           planner["paths_per_block"], PROFILE)
should_see("PlanWorld regime 9: R1-Unseen's mean@k gain from its cold start",
           gains["unseen-s3"], PROFILE);

# %% [markdown]
# How to read it. From a cold start that never planned more than three deals, RL on ten-deal
# lists made the unseen model plan about six (the printout above), and its accuracy rose with the
# width: a wider plan finds the answer more often, and only a letter a path checked is paid. That
# is the paper's thesis in miniature: the cold start teaches the format on small problems, RL
# finds how wide to search. Two things temper it. The serial search, trained on the same problems
# with the same RL, gains about as much: the parallel arm's advantage is its sequential steps,
# about half the serial search's (the verdict's lines), not its accuracy. And about a third of the
# blocks after RL have a path that checks another deal's prices (the distinct-share rate above):
# the width grew faster than the split. The width sweep below shows a third limit.

# %% [markdown]
# **When does parallel pay?** `study widths` evaluates the serial and unseen models above (seed 0
# of each, after RL) on whole lists of 2, 3, 4, 6 and 10 deals: accuracy, sequential steps, and
# seconds per answer at batch 1 and 64 timed side by side in one run. A crossover is the width
# from which unseen stays below serial at every wider width. Move the slider to see each width's
# rows.

# %%
from pr1lib.notebook.sweep import ahead_words, width_slider, widths_figure

sweep = committed("planworld-widths-wide")
print("the committed run:", sweep["command"])
print("\n".join(sweep["numbers"]["verdict"]))
widths = sweep["numbers"]["widths"]
print("\n".join(ahead_words(sweep, int(w)) for w in sorted(widths, key=int)))
gap = {w: widths[w]["unseen"]["accuracy"] - widths[w]["serial"]["accuracy"] for w in widths}
batch1 = widths["10"]["unseen"]["seconds_per_answer"]["1"]
batch1 /= widths["10"]["serial"]["seconds_per_answer"]["1"]
print(f"unseen minus serial mean@k: {gap['10']:+.1%} at 10 deals, {gap['2']:+.1%} at 2; "
      f"at 10 deals unseen takes {batch1:.2f}x serial's seconds at batch 1")
should_see("PlanWorld sweep: unseen minus serial mean@k at 10 deals", gap["10"], PROFILE)
should_see("PlanWorld sweep: unseen's seconds over serial's at 10 deals, batch 1", batch1,
           PROFILE)
should_see("PlanWorld sweep: unseen minus serial mean@k at 2 deals", gap["2"], PROFILE);

# %% tags=["report"]
widths_figure(sweep)

# %% [markdown]
# Move the slider to read one width's rows (the line above the table says who is ahead there):

# %%
width_slider(sweep)

# %% [markdown]
# Read the lines with the accuracies beside them. At ten deals, the width RL trained on, the two
# models are about as often right and the unseen one gets there in far fewer sequential steps and,
# at batch 1, in about half the seconds (the printout above); at batch 64, where each path takes a
# row of the batch, its seconds are no lower. Below ten deals the crossovers the card names mean
# nothing: the unseen model is almost never right there. RL on ten-deal lists rewrote the line
# that opens its block for ten deals (its short plans now come out broken, `Check (AA)-…`), and
# nothing in its RL problems kept the short ones, while the serial model, with the same RL
# problems, still solves the short lists. Its cold start solved them
# ([docs/planworld.md](../docs/planworld.md#the-world-as-it-stands-rl-widens-the-plans) has the
# cold start's card). The seconds are medians of interleaved rounds on one thread (the card keeps
# each width's spread).

# %% [markdown]
# ### RL on a mix of widths (regime 10)
#
# Would RL on lists of every width keep the short plans? The same two arms, cold starts, seeds and
# steps, with RL's problems drawn from whole lists of 2 to 10 deals (`planworld-mixed`, each width
# as likely) instead of ten-deal lists only. The study's table (ten deals, as above) and the sweep
# of its seed 0:

# %%
mixed = committed("planworld-controls-mixed")["numbers"]
print("\n".join(verdict(mixed)))
display(seeds_frame(mixed))
mixed_rows = {r["arm"]: r for r in mixed["rows"]}
print(f"R1-Unseen, paths per block after RL: {mixed_rows['unseen-s3']['paths_per_block']:.2f}; "
      f"blocks on distinct, correct deals: {mixed_rows['unseen-s3']['distinct_share_rate']:.1%}")
mixed_sweep = committed("planworld-widths-mixed")
mixed_widths = mixed_sweep["numbers"]["widths"]
print("\n".join(ahead_words(mixed_sweep, int(w)) for w in sorted(mixed_widths, key=int)))
should_see("PlanWorld regime 10: R1-Unseen minus serial, hard mean@k",
           mixed["contrasts"]["unseen-s3-serial-s3"]["diff"], PROFILE)
should_see("PlanWorld regime 10 sweep: unseen mean@k at 2 deals",
           mixed_widths["2"]["unseen"]["accuracy"], PROFILE);

# %% [markdown]
# The mix bought part of the short plans back and paid for it where RL had worked: on two deals
# the unseen model is right far more often than after ten-deal RL, but less often than its cold
# start, and on ten deals it now ends below the serial search beyond the noise, its paths on
# distinct deals less often than before RL. The serial arm, from the same problems, ends where it
# did. On two deals the plan is the two-item list `Check (A), (B)`, a shape no wider plan uses
# (three deals and more are spans), and RL spent its steps on the spans. Keeping both, short
# plans and the ten-deal gain, is open
# ([docs/planworld.md](../docs/planworld.md#rl-on-a-mix-of-widths-regime-10)).

# %% [markdown]
# ### A false check costs the answer (regime 12)
#
# After regime 9 about a third of the unseen model's blocks were not split, mostly because a path
# added another deal's prices, which the checked grader lets pass unless that path's deal is the
# answer. The same two arms, cold starts, seeds and steps, with RL's grader stricter in both arms
# (`grader=honest`): a right letter pays only where every check the completion writes adds the
# prices the question gives that deal. Evaluation is as before.

# %%
honest = committed("planworld-controls-honest")["numbers"]
print("\n".join(verdict(honest)))
display(seeds_frame(honest))
honest_rows = {r["arm"]: r for r in honest["rows"]}
for name, rows in (("regime 9", wide_rows), ("regime 12", honest_rows)):
    row = rows["unseen-s3"]
    print(f"{name}: R1-Unseen after RL: {row['paths_per_block']:.2f} paths per block, "
          f"{row['distinct_share_rate']:.1%} of blocks on distinct, correct deals, "
          f"mean@k {row['accuracy']:.1%}")
shares = sorted(s["distinct_share_rate"] for s in honest_rows["unseen-s3"]["per_seed"])
print("R1-Unseen's blocks on distinct, correct deals per seed, sorted:",
      ", ".join(f"{x:.1%}" for x in shares))
should_see("PlanWorld regime 12: R1-Unseen's median seed, blocks on distinct, correct deals",
           shares[len(shares) // 2], PROFILE)
should_see("PlanWorld regime 12: R1-Unseen's paths per block after RL",
           honest_rows["unseen-s3"]["paths_per_block"], PROFILE)
should_see("PlanWorld regime 12: R1-Unseen minus serial, hard mean@k",
           honest["contrasts"]["unseen-s3-serial-s3"]["diff"], PROFILE);

# %% [markdown]
# The stricter grader trades one target for the other. On the seeds whose runs held, nine blocks in
# ten or more now keep every path on a deal of its own (the per-seed table's last column), far
# above regime 9's pooled rate; but each path more is one more check that must hold, so the plans
# stop under five paths, and the parallel arm ends below the serial one, which the same grader
# costs less (the verdict's interval just reaches zero, so it calls the gap within the noise).
# Seed 2's run collapsed near step 180 (its paths stop before their sums), which pulls the pooled
# share down; its regime-9 run dipped at the same step. Neither grader gives wide plans and split
# paths together: the world keeps the checked one
# ([docs/planworld.md](../docs/planworld.md#a-false-check-costs-the-answer-regime-12) has the
# learning curves and the pilots).

# %% [markdown]
# ### Checked, then honest (regime 13)
#
# The two graders in turn: each of regime 9's runs (300 steps under the checked grader) goes on for
# 150 steps under the honest one, at half the learning rate (5e-5). Two controls go on from the
# same runs for the same 150 steps at the same rate: the unseen arm under the checked grader (the
# grader alone differs) and the serial arm under the honest grader (the same schedule, the search
# in one stream). `study controls --arm switch` trains the three and writes one table with regime
# 9's two arms in it; the evaluation is as above.

# %%
switch = committed("planworld-switch")
print("the committed run:", switch["command"])
switch_table = switch["numbers"]
print("\n".join(verdict(switch_table)))
display(seeds_frame(switch_table))
switch_rows = {r["arm"]: r for r in switch_table["rows"]}
for arm in ("unseen-s3", "unseen-s3-checked", "unseen-s3-honest"):
    row = switch_rows[arm]
    print(f"{arm}: {row['paths_per_block']:.2f} paths per block, "
          f"{row['distinct_share_rate']:.1%} of blocks on distinct, correct deals, "
          f"mean@k {row['start']:.1%} -> {row['accuracy']:.1%}")
after = switch_rows["unseen-s3-honest"]
lowest = min(s["distinct_share_rate"] for s in after["per_seed"])
should_see("PlanWorld regime 13: R1-Unseen's blocks on distinct, correct deals",
           after["distinct_share_rate"], PROFILE)
should_see("PlanWorld regime 13: R1-Unseen's lowest seed, blocks on distinct, correct deals",
           lowest, PROFILE)
should_see("PlanWorld regime 13: R1-Unseen's paths per block", after["paths_per_block"], PROFILE)
should_see("PlanWorld regime 13: honest minus checked steps, hard mean@k",
           switch_table["contrasts"]["unseen-s3-honest-unseen-s3-checked"]["diff"], PROFILE)
should_see("PlanWorld regime 13: R1-Unseen minus serial, hard mean@k",
           switch_table["contrasts"]["unseen-s3-honest-serial-s3-honest"]["diff"], PROFILE);

# %% [markdown]
# Read the per-seed table first. The honest steps keep more than 85 % of the blocks on distinct,
# correct deals on every seed, where the same steps under the checked grader leave a seed far
# below; no seed collapsed at the lower rate. What they cost is width: each seed's plans narrow by
# more than half a path, and only seed 0 stays at six. Accuracy does not move with the grader (the
# verdict's honest-minus-checked line), and the serial search on the same schedule stays ahead,
# inside the noise, in more than twice the sequential steps. So the split can be
# taught after the width, by a grader that pays only honest checks; keeping the width at six on
# every seed while it splits is open
# ([docs/planworld.md](../docs/planworld.md#checked-then-honest-the-study-regime-13) has the
# pilot, the targets met and missed, and the wall time).

# %% [markdown]
# ### How we got here: the regimes before regime 9
#
# The cells below read the cards of the earlier regimes
# ([docs/planworld.md](../docs/planworld.md#regimes-tried)): the first study (regime 4: plans of a
# long list's first deals, read by the paths, any right letter paid), three arms of the `controls`
# study, the same problems and steps:
#
# | arm | cold start | what it controls for |
# |---|---|---|
# | serial | the same plans and checks in one stream, to the first ✓ | the search, not its form |
# | unseen | the plan, one path per item, the unseen mask | R1-Unseen, the model's own plan |
# | unseen-noplan | the same blocks, the plan line removed: three paths told nothing | the plan |
#
# Serial and unseen have three SFT seeds each, every RL seed from its own SFT seed; the
# plan-removed control and a plain SFT (the right deal's check alone, the same rows and steps,
# then plain GRPO) have one seed each (their own cards, printed below the table).

# %%
from pr1lib.notebook.reports import seeds_frame

plan = committed("planworld-controls")
print("the committed run:", plan["command"])
plan_table = plan["numbers"]
print("widths in any arm's SFT rows:", plan_table["sft_widths"])
print(f"wall time of the arms: {plan_table['wall']['total'] / 3600:.1f} h")
for name in ("planworld-control-noplan", "planworld-control-plain-sft"):
    one = committed(name)["numbers"]["runs"][0]
    print(f"{name}: mean@k {one['start']['accuracy']:.1%} after SFT, {one['end']['accuracy']:.1%} "
          f"after RL, {one['end']['mean_sequential_steps']:.0f} steps (seed 0)")
controls_frame(plan_table)

# %%
print("\n".join(verdict(plan_table)))
should_see("PlanWorld: R1-Unseen minus serial, hard mean@k",
           plan_table["contrasts"]["unseen-serial"]["diff"], PROFILE)
display(seeds_frame(plan_table))
modes_frame(plan_table)

# %% [markdown]
# Did RL widen the plans, and do the paths still split the search? The first two lines read the
# unseen arm's paths per block before and after RL; the third compares its forced blocks (section
# 8's split measure, on the model's own plan) with the plan-removed control's:

# %%
rows = {r["arm"]: r for r in plan_table["rows"]}
unseen = rows["unseen"]
noplan = committed("planworld-control-noplan")["numbers"]
blind = noplan["splits"]["rl"][0]["split_rate"]
print(f"R1-Unseen, paths per block: {unseen['start_paths_per_block']:.2f} after SFT, "
      f"{unseen['paths_per_block']:.2f} after RL (the cold start's widest plan: 3)")
print(f"forced blocks whose paths took distinct, correct deals after RL: with the plan "
      f"{unseen['split_rate']:.1%}, plan removed {blind:.1%}")
should_see("PlanWorld: R1-Unseen's paths per block, after RL minus after SFT",
           unseen["paths_per_block"] - unseen["start_paths_per_block"], PROFILE)
should_see("PlanWorld: R1-Unseen's paths per block after RL", unseen["paths_per_block"], PROFILE)
should_see("PlanWorld: split rate with the plan minus without", unseen["split_rate"] - blind,
           PROFILE);

# %% [markdown]
# How to read it (regime 4). RL did to the plans what the paper says it does to a behaviour the cold
# start holds: on every seed the plans moved from the cold start's mix of two and three deals to
# three, the widest it wrote, and the paths kept their distinct, correct deals. The plan is what
# splits the search: with the plan line removed, the same blocks' three blind paths mostly check the
# same deals. RL did not invent a fourth item (a chance near zero before and after RL:
# `tools/plan_widths.py`). And the serial search ends *above* R1-Unseen, against the paper's result.
# The reason is in the samples ([docs/planworld.md](../docs/planworld.md#the-first-study-regime-4)):
# after RL the serial model keeps checking past its plan, deal (D) and on, and when those fail it
# names a letter it has not checked, right often enough on ten deals to pay; the unseen model's
# block ends where its plan does, and its summary can only copy what its paths found. Parallel paths
# save sequential steps (the verdict's last line), but here they also search less.

# %% [markdown]
# **Could RL have found a wider plan?** A width RL never samples is never rewarded. A second run
# made the engine sample one choice hotter, the plan's "one more item?" after each item
# (`--set width_temperature=5`; the log-probs stay the policy's), so plans of four and more deals
# were drawn. `study plans` shows what happened to them: it writes a plan of the first w deals for
# the cold start and lets it carry the block out. "answer in the plan" is what a working block
# would find; "found by a path", how often a path did check the right deal and mark it ✓ (where
# "right" is lower, the summary lost it).

# %%
forced = committed("planworld-plans-coldstart")
print("the committed run:", forced["command"])
by_width = forced["numbers"]["widths"]
names = {"accuracy": "right", "found": "found by a path", "reach": "answer in the plan",
         "valid_ratio": "strictly valid", "split_rate": "paths on their own deals"}
carried = pd.DataFrame({w: {name: r[k] for k, name in names.items()} for w, r in by_width.items()})
display(carried.rename_axis(columns="deals planned").style.format("{:.0%}"))
explored = committed("planworld-rl-explore")["numbers"]
before, after = explored["before"]["hard"], explored["after"]["hard"]
print(f"RL with the width explored ({explored['steps']} steps): paths per block "
      f"{before['mean_paths']:.2f} -> {after['mean_paths']:.2f}; blocks by width after RL "
      f"{after['paths_hist']}")
four = committed("planworld-plans-explore")["numbers"]["widths"]["4"]
print(f"a forced plan of 4 deals after that RL: {four['accuracy']:.0%} right, {four['found']:.0%} "
      f"found by a path (the cold start: {by_width['4']['accuracy']:.0%}, "
      f"{by_width['4']['found']:.0%})")
should_see("PlanWorld: a forced plan of 3 deals, right minus in reach",
           by_width["3"]["accuracy"] - by_width["3"]["reach"], PROFILE)
should_see("PlanWorld: a forced plan of 4 deals, right minus in reach",
           by_width["4"]["accuracy"] - by_width["4"]["reach"], PROFILE)
should_see("PlanWorld: RL with the width explored, paths per block after RL",
           after["mean_paths"], PROFILE)
should_see("PlanWorld: a forced plan of 4 deals, right after that RL minus before",
           four["accuracy"] - by_width["4"]["accuracy"], PROFILE);

# %% [markdown]
# Up to three deals, the widths the cold start wrote, the block finds nearly every answer its plan
# holds. From four on its paths stop checking their own deals (with a longer plan line before them
# they check another deal, or none), so "found by a path" falls far below "answer in the plan".
# RL with the width explored made it worse: after it, a four-deal block's paths still find some
# answers, but its summary, paid only for blocks of three, rarely names the fourth path's. So a
# wider plan is not only unlikely, the model cannot carry it out; when exploration drew one, its
# block failed and RL learned to avoid it. The width RL can discover is bounded by the widths
# whose blocks work ([docs/planworld.md](../docs/planworld.md#can-the-model-carry-out-a-wider-plan)
# has the pilots that moved the break a deal further, and what to try next).

# %% [markdown]
# **What if the paths could not read the plan?** A path of a four-deal plan reads a longer plan
# line than any path of the cold start did. With `--set hide_plan=true` the unseen mask hides the
# plan (and its `<Parallel>`) from everything after it, and the engine leaves those keys out of
# its paths: a path reads the question and its own label, the same at any width. The same rows
# trained with that mask (the same rows, steps and seed; only the mask differs), then the same
# forced plans; and two RL runs from it with the width explored, the same start, problems, steps
# and seed, one paying any right letter, one paying only a letter a path checked and marked ✓
# (`--set grader=checked`: a guess after failed checks is wrong; both arms' answers are graded by
# it below, `checked mean@4`).

# %%
hidden = committed("planworld-plans-hidden")["numbers"]["widths"]
print("the committed run:", committed("planworld-plans-hidden")["command"])
both = pd.DataFrame({f"{w}, {who}": {name: r[k] for k, name in names.items()}
                     for w in ("3", "4", "6", "10")
                     for who, r in (("plan read", by_width[w]), ("plan hidden", hidden[w]))})
display(both.rename_axis(columns="deals planned").style.format("{:.0%}"))
runs = {"any right letter": committed("planworld-rl-hidden-guess")["numbers"],
        "checked letters only": committed("planworld-rl-hidden")["numbers"]}
for pay, run in runs.items():
    first, end = run["before"]["hard"], run["after"]["hard"]
    print(f"RL paying {pay}: paths per block {first['mean_paths']:.2f} -> "
          f"{end['mean_paths']:.2f}, blocks by width {end['paths_hist']}, checked mean@4 "
          f"{first['accuracy_checked']:.1%} -> {end['accuracy_checked']:.1%}")
should_see("PlanWorld: plan hidden, a forced plan of 4 deals, paths on their own deals",
           hidden["4"]["split_rate"], PROFILE)
should_see("PlanWorld: plan hidden, a forced plan of 4 deals, right minus 3 deals",
           hidden["4"]["accuracy"] - hidden["3"]["accuracy"], PROFILE)
should_see("PlanWorld: plan hidden, RL paying any right letter, paths per block after RL",
           runs["any right letter"]["after"]["hard"]["mean_paths"], PROFILE)
should_see("PlanWorld: plan hidden, RL paying checked letters, paths per block after RL",
           runs["checked letters only"]["after"]["hard"]["mean_paths"], PROFILE);

# %% [markdown]
# With the plan hidden from them, the paths of a four-deal block check their own deals about as
# often as a three-deal block's, and at ten deals paths still find answers: the plan line was what
# broke the wider blocks. RL still does not widen past three. Paying any right letter, it
# narrowed the plans to two: its summary, which no longer reads the plan, learned to name the
# next letter after two failed paths, a guess as good as a third path. Paying only checked
# letters, it widened them to three and stopped: a four-deal block is right no more often than a
# three-deal one, because later letters' paths and the summary of four paths lose what the
# fourth path finds. So the width RL can reach is bounded by how much a wider block is worth, and
# the cold start is what sets that
# ([docs/planworld.md](../docs/planworld.md#regimes-tried), regimes 7 and 8).

# %% [markdown]
# ## Summary
#
# - mean@k is the accuracy of one sample; pass@k the chance that one of k samples is right,
#   estimated without bias as 1 − C(n−c, k)/C(n, k) (written from scratch above and checked against
#   the library).
# - Structure gets measured next to accuracy: how often a block opens, whether its tags are valid,
#   where it starts, and how different its paths are.
# - The table follows the paper's Table 2 row by row, with our columns and the paper's kept apart
#   and labelled; rows whose checkpoint does not exist stay empty and are listed. Results are cached
#   per checkpoint and benchmark, so rerunning is cheap; `python -m pr1lib eval --model RUN_DIR`
#   does the same for one checkpoint and writes a table (`.md`) and plots (`.html`) next to its
#   results.
# - Figure 3 and the scaffold were read from this run's own logs; the printed verdicts come from the
#   numbers. A first-block position of 0 on every step is where the world's cold start puts the
#   block, not a short run's noise; a drift needs traces that can branch later.
# - The scaffold needs its control: accuracy-only RL from the same SFT for the same steps. The
#   three-seed study's card says, computed from its numbers, whether the scaffold beats it here.
# - A claim about *parallel* thinking needs its controls: a plain SFT with the same steps and a
#   serial search with the same content. Section 7 reads them from the committed card, with each
#   gap's interval, and counts what parallel paths save in sequential decode steps.
# - Where paths are told their share (WideWorld, section 8), the parallel search is measured
#   against the serial one in accuracy per answer mode, sequential steps and seconds.
# - Where the model writes its own plan (PlanWorld, section 9), RL widens it past the cold start's,
#   and a grader that pays only honest checks then keeps the paths on their own deals; each claim
#   beside its control (the serial search, the same steps under the other grader).

# %% [markdown]
# ## Exercises
#
# 1. Set `NB = NB.replace(table_k=8)` and rerun section 4's `evaluate_checkpoints` with `out=` a new
#    folder (a results file refuses samples drawn with another k). How much do mean@k and pass@k
#    move? Which of the two is more sensitive to k, and why?
#
#    <details><summary>Hint</summary>
#
#    For a problem the model solves with probability q per sample, what is the expected share of
#    right samples among k, and the chance that at least one of k is right?
#    </details>
# 2. Compute pass@k with the plug-in formula 1 − (1 − c/n)^k on the rows of `ours` (use the results
#    files: `correct_official` per problem, the strict checker) and compare with `pass_at_k` for
#    k = 2 and k = n. When do they agree exactly?
#
#    <details><summary>Hint</summary>
#
#    `ResultsFile(path).rows` gives one row per problem: n = `len(row["correct_official"])`, c its
#    sum. Try c = 0, c = n and k = 1 first, then c = 1 with k = n.
#    </details>
# 3. Rerun the scaffold with the switch at a quarter and at three quarters of `total`. Does the
#    parallel ratio after the switch depend on how long phase 1 lasted? Does held-out accuracy at
#    the end?
#
#    <details><summary>Hint</summary>
#
#    Give each `mid_training` call its own `out=` folder (and `world=NB.world`, as above), then
#    compare `switch_effect` of the two runs, with its noise bars.
#    </details>
#
# Solutions, with the reasoning: [solutions/07_evaluation.py](../solutions/07_evaluation.py)
# (`python solutions/07_evaluation.py` runs them).

# %% [markdown]
# # 02 · Cold-start data: GSM8K and TinyWorld → teacher → filter → an SFT set
#
# **Goal:** build a Parallel-GSM8K-style cold-start set, prompt–completion pairs whose
# completions think in `<Parallel>` blocks, and measure how much of each source survives the filter;
# then run the same pipeline on TinyWorld to make the traces notebook 04 trains on.
#
# You will learn
# - how the paper made its cold-start data (a teacher prompted zero-shot on easy GSM8K problems),
#   and what it measured on the harder DAPO-Math problems (0.0 % of traces in a valid parallel
#   format);
# - how this project's **rule teacher** turns a worked GSM8K solution into a parallel trace without
#   any model, and why its arithmetic is checked rather than trusted;
# - how to make generation **resumable**, so a Colab disconnect costs one batch and not the run;
# - this project's four filter checks (strict format, at least one block, the right answer, the
#   token budget; the paper states a format check, and whether it checked answers is not known),
#   the yield table, and how to switch to an LLM teacher (transformers or any OpenAI-compatible
#   server);
# - how TinyWorld's rule teacher writes blocks that search and check, why half of the rows stay
#   plain, and two other styles of the same rows this project trains as controls.
#
# Terms: [glossary](../docs/glossary.md) · the whole recipe in one picture:
# [docs/recipe.md](../docs/recipe.md)
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/pr1-tutorial/pr1/blob/main/notebooks/02_cold_start_data.ipynb)

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
from pr1lib.store.paths import runs_dir, shown

PROFILE = start_notebook(PROFILE, SEED)  # check the profile, seed everything, print versions

# %% [markdown]
# Everything this notebook writes goes under one run folder. `ColdStartConfig` holds the knobs
# (source, teacher, token budget, prompt style); the profile picks their values. In `smoke` only the
# first few hundred problems go through, so the notebook runs in well under a minute.

# %%
import time

import datasets
import pandas as pd

from pr1lib.config import ColdStartConfig

datasets.disable_progress_bars()
pd.set_option("display.max_colwidth", 120)
config = ColdStartConfig.for_profile(PROFILE, seed=SEED)
OUT = runs_dir() / f"02_cold_start_data-{PROFILE}"
OUT.mkdir(parents=True, exist_ok=True)
print(config)
print("outputs in", shown(OUT))

# %% [markdown]
# ## 1. The problems
#
# The paper's seed problems are the 7,473 GSM8K **train** problems. `pr1lib.data.sources` loads them
# from a local folder (`PR1_DATA_DIR`, or `../shared/data` next to the repo) or, when online, from
# the hub with `datasets.load_dataset("openai/gsm8k", "main")`; if neither works you get one error
# that names both fixes. Every source comes out in one shape: `id`, `question`, `answer_text` (the
# worked solution, with `<<48/2=24>>` calculator annotations) and `answer` (the gold number).
# DAPO-Math-17k has answers but **no worked solutions**. Without a copy and a network (a CI
# machine), TinyGSM-easy, this project's generator of GSM8K-shaped stories, stands in for GSM8K.

# %%
from pr1lib.data import sources as data

try:
    sources = {"gsm8k": data.load_gsm8k("train", limit=config.limit),
               "dapo": data.load_dapo(limit=min(config.limit or 2000, 2000))}
except data.DataNotFoundError as err:  # no local copy and no network: TinyGSM stands in
    print(err, "\n-> TinyGSM-easy stands in for GSM8K")
    sources = {"tinygsm-easy": data.load_source("tinygsm-easy", limit=config.limit or 2000,
                                                seed=SEED)}
print({name: len(probs) for name, probs in sources.items()})
pd.DataFrame([probs[0] for probs in sources.values()]).set_index("id")[["source", "question",
                                                                        "answer_text", "answer"]]

# %% [markdown]
# ## 2. A teacher that needs no model
#
# The paper's teacher is DeepSeek-R1-0528-Qwen3-8B, prompted with the parallel-thinking instruction.
# Here the default teacher is a **rule**: take the reference solution, pick one step, and write a
# block whose paths reach that step's number by *different computations*. The original line is the
# first path. The others are another order (`24+48`), a split product (`12*50 + 12*2`), repeated
# addition, regrouping (`100-(50+30+15)`), multiplying out a bracket, or the same sum followed by an
# inverse check (`48+24=72; check: 72-24=48` — result first, so the path never has to guess it).
# A one-line summary restates the first path's calculation; the remaining steps and
# `Final Answer: N` follow. Those three choices are not cosmetic: notebook 04 measures how they
# decide whether a small model keeps its accuracy through SFT.
#
# The teacher never evaluates text with `eval`: expressions go through a small `ast` whitelist
# (numbers and `+ - * /` only), and every `<<expr=value>>` in the finished trace is re-checked.

# %%
import re

from pr1lib.worlds import teachers

rule = teachers.RuleTeacher(seed=SEED)
pool = next(iter(sources.values()))[:50]  # one whose block has three paths, one a split or regroup
example = next((p for p in pool if (t := rule.generate([p])[0]["text"]).count("<Path>") == 3
                and re.search(r"<Path>[^<]*<<[^<]*<<", t)), pool[0])
print(example["answer_text"], end="\n\n---- becomes ----\n\n")
print(rule.generate([example])[0]["text"])

# %% [markdown]
# Which alternative computations exist depends on the expression. Each one below is checked before
# it is offered:

# %%
rows = []
for expr, value in [("48+24", "72"), ("12*52", "624"), ("3*16", "48"), ("100-50-30-15", "5"),
                    ("(4+6)*3", "30")]:
    for kind, text in teachers.alternatives(expr, value).items():
        rows.append({"original": f"{expr}={value}", "kind": kind, "other path": text})
pd.DataFrame(rows)

# %% [markdown]
# ## 3. Resumable generation
#
# An LLM teacher can take hours, and Colab sessions drop. `generate_traces` appends every finished
# batch to a JSON Lines cache keyed by (problem id, teacher name), flushed and `fsync`ed. A re-run
# skips what is done, so an interrupt loses at most the batch in flight, and a line torn by a crash
# is detected and cut off before the next append. The second call below finds everything cached.

# %%
from pr1lib.data import coldstart
from pr1lib.data.traces import TraceCache, generate_traces

cache = OUT / "traces.jsonl"
timings, traces = {}, {}
for name, probs in sources.items():
    start = time.perf_counter()
    traces[name] = generate_traces(rule, probs, cache, batch_size=config.batch_size)
    timings[name] = time.perf_counter() - start
start = time.perf_counter()
again = generate_traces(rule, sources[next(iter(sources))], cache)
print({k: f"{v:.2f} s" for k, v in timings.items()},
      f"| re-run from cache: {time.perf_counter() - start:.2f} s")
print(
    f"cache: {cache.stat().st_size / 1e6:.1f} MB, {len(TraceCache(cache).records)} traces"
)

# %% [markdown]
# ## 4. The filter
#
# This project keeps a trace only if it is **strictly valid** (`pr1lib.format.grammar.validate`),
# has **at least one block**, its **final answer matches** the gold answer, and the prompt plus
# completion **fit the token budget** (`config.max_tokens`, counted with the policy's tokenizer when
# it loads, else estimated at four characters per token). Duplicate questions keep their first
# trace. Each rejection is labelled with the first check it failed. The paper released the
# unfiltered 7.47k rows and 5.91k rows that passed its format check. No check of the answers against
# GSM8K's gold was found in the official code (a row's answer is read from the teacher's own text),
# and whether the filtered release checked them is not known (docs/recipe.md#4-cold-start-data).
# Which set trained which variant the paper does not say; the step counts suggest the unfiltered
# rows for the seen SFT and the filtered ones for the unseen, an inference recorded in one place,
# [docs/recipe.md](../docs/recipe.md#4-cold-start-data).

# %%
tokenizer = coldstart.budget_tokenizer(PROFILE)
results = {name: coldstart.filter_traces(probs, traces[name], config.prompt_style,
                                         config.max_tokens,
                                         tokenizer, config.dedupe)
           for name, probs in sources.items()}
kept_example = results[next(iter(results))][0][0]
print(kept_example["completion"])

# %% [markdown]
# And the rejected ones, one per reason: GSM8K solutions written as algebra in prose give the rule
# teacher nothing to branch on (`no_block`); DAPO problems have no worked solution to rewrite
# (`teacher_error`); a few long solutions exceed the tiny model's context (`too_long`).

# %%
rejected = pd.DataFrame([r for _, rej in results.values() for r in rej])
if len(rejected):
    one_each = rejected.groupby("reason").head(1)[["source", "reason", "detail", "question",
                                                   "completion"]]
    display(one_each.set_index("reason"))
else:
    print("nothing rejected")

# %% [markdown]
# ## 5. Yield per source, next to the paper
#
# The paper's numbers (Table 1, [docs/recipe.md](../docs/recipe.md#4-cold-start-data)) are the share
# of its teacher's traces in a valid parallel format: 83.7 % on GSM8K and 0.0 % on DAPO-Math. Ours
# count every check, the answer included. They measure a different teacher, so compare the pattern,
# not the digits. Easy problems with worked solutions go through; hard ones do not. Our DAPO zero
# has a plain cause: there is no worked solution to rewrite. The paper reports its 0.0 % without
# saying why its teacher failed there.

# %% tags=["report"]
table = coldstart.yield_table(results)
shares = {c: "{:.1%}" for c in ["yield", *coldstart.REASONS]}
display(table.style.format({"kept": "{:,.0f}", **shares}, na_rep="–"))
coldstart.plot_yield(table).show()

# %% [markdown]
# The `too_long` column counts the token budget with the tiny model's own tokenizer
# (`coldstart.budget_tokenizer`). The command `python -m pr1lib coldstart` estimates 4 characters
# per token unless given `--exact-budget`, so on real GSM8K it keeps the few long solutions this
# table rejects; [docs/results.md](../docs/results.md#the-tiny-profile-stage-by-stage) holds
# both counts.

# %% [markdown]
# ## 6. The SFT set
#
# The kept rows become a `datasets.Dataset` in TRL's prompt–completion form. `prompt` is the user
# turn in this profile's style (`tiny`: a short `Problem: … Solution:` for the tiny model; `v3`: the
# paper's parallel instruction, which stage 1 wraps in the chat template). `completion` is the trace
# alone; the SFT stage appends the end-of-text token. Provenance columns say where each row came
# from. It is saved with `save_to_disk`, as JSONL, and with a dataset card.

# %%
used = [name for name in results if name != "dapo"]  # DAPO keeps nothing
kept_all = [row for name in used for row in results[name][0]]
sft_set = coldstart.build_dataset(kept_all, config.prompt_style)
summary = coldstart.summarize(kept_all, [r for name in used for r in results[name][1]])
card = coldstart.dataset_card(summary, config.replace(source="+".join(used)), rule.name)
folder = coldstart.save_dataset(sft_set, OUT / "sft", card)
reloaded = datasets.load_from_disk(str(folder))
print(reloaded)
print(pd.Series(reloaded["source"]).value_counts().to_dict(), "->", shown(folder))

# %% [markdown]
# You should see: every kept trace in the saved set is strictly valid and opens at least one block.

# %%
from pr1lib.format import grammar as fmt

assert len(reloaded) == len(kept_all) > 0
for completion in reloaded["completion"]:
    assert fmt.validate(completion) == [] and "<Parallel>" in completion, completion

# %% [markdown]
# The same pipeline runs from the command line, one source at a time, and ends with one JSON line:
#
# ```bash
# python -m pr1lib coldstart --teacher rule --source gsm8k --out runs/coldstart-gsm8k
# ```

# %% [markdown]
# ## 7. The same pipeline in TinyWorld: the traces notebook 04 trains on
#
# Notebook 00 showed why a block can pay in TinyWorld: checking a pair of prices is one addition,
# finding the pair is a search. Its rule teacher (`WorldTeacher`, which `coldstart.make_teacher`
# picks for a TinyWorld source) writes blocks that use this. On a **hard** item the two paths split
# the search, each trying one cheap price with both dear ones and checking every sum honestly, and
# the summary keeps the pair that checks out; on an **easy** item both paths solve the whole item
# (pure overhead, which RL should learn to skip). `SFTStageConfig.for_world("tinyworld", PROFILE)`
# names notebook 04's cold start (its sources, how many rows, how many of them plain), and
# `sft.build_coldstart` generates, filters and saves it with the functions above, one source at a
# time (on `colab` and `paper`, notebook 04 trains on the real data of section 6 instead).

# %%
import json

from pr1lib.config import SFTStageConfig
from pr1lib.training import sft

WORLD_SFT = SFTStageConfig.for_world("tinyworld", PROFILE)  # notebook 04's cold start
world_set = sft.build_coldstart(WORLD_SFT, config.prompt_style, OUT / "tinyworld")
print(f"{len(world_set)} rows of {WORLD_SFT.source} -> {shown(OUT / 'tinyworld' / 'dataset')}")
made = {part: json.loads((OUT / "tinyworld" / part / "summary.json").read_text())
        for part in WORLD_SFT.source.split("+")}  # each source's run_coldstart summary
pd.DataFrame({part: {"teacher": s["teacher"], "total": s["total"], "kept": s["kept"],
                     "yield": f"{s['yield']:.1%}", **s["rejected"]}
              for part, s in made.items()}).T

# %% [markdown]
# You should see a yield of 100 % on both tiers (the paper's LLM teacher is in the table of
# section 5): the rule teacher writes every path from the question's price lists and
# recomputes every sum, so the filter finds nothing to reject. That says the teacher never fails,
# not that its traces teach well; notebook 04 measures what they teach. One trace of each tier:

# %%
for tier in ("hard", "easy"):
    row = next(r for r in world_set if r["source"] == f"tinyworld-{tier}")
    print(f"[{row['source']}] {row['question']}\n{row['completion']}\n")

# %% [markdown]
# **Half of the rows plain.** A cold start made only of blocks teaches the model to open one on
# every item, and RL then has no choice to learn from. So `plain_share` (0.5 here) turns a random
# half of the rows into the same item solved without a block (`World.plain_solution`: on a hard
# item, the one guess that checks out), and a `parallel` column says which is which
# (`sft.with_plain_share`; notebook 04 applies it when it trains):

# %%
shaped = sft.with_plain_share(world_set, WORLD_SFT.plain_share, WORLD_SFT.seed)
print(f"{shaped['parallel'].count(False)} of {len(shaped)} rows plain; a plain hard row:\n")
plain = next(r for r in shaped if not r["parallel"] and r["source"] == "tinyworld-hard")
print(plain["completion"])

# %% [markdown]
# These are exactly the rows the shipped TinyWorld SFT (`data/tinyworld-sft`) trained on: its card
# records a hash of its prompt–completion pairs (`sft.data_hash`), and the same pairs, rendered as
# notebook 04 renders them (`sft.sft_rows`), give the same hash in the `tiny` profile (12,000 rows;
# `smoke` builds only a few, so there the hashes differ).

# %%
from transformers import AutoTokenizer

from pr1lib import worlds
from pr1lib.notebook.expect import should_see
from pr1lib.store.paths import REPO_ROOT

shipped = REPO_ROOT / worlds.get("tinyworld").init("seen")
styled = sft.with_trace_style(shaped, WORLD_SFT.trace_style, WORLD_SFT.path_headers)
rows, _ = sft.sft_rows(styled, AutoTokenizer.from_pretrained(shipped), WORLD_SFT.max_length)
ours, theirs = sft.data_hash(rows), json.loads((shipped / "card.json").read_text())["data_hash"]
print(f"{len(rows)} rows: data hash {ours}; the card of {shown(shipped)}: {theirs}")
should_see("TinyWorld cold start has the shipped SFT's rows (1 = the same hash)",
           int(ours == theirs), PROFILE);

# %% [markdown]
# **Two other styles of the same rows.** This project adds two switches of `SFTStageConfig`, both
# applied by `sft.with_trace_style` to the rows that have a block:
#
# - `trace_style="serial"` takes the tags out and changes nothing else (`format.grammar.serialize`):
#   the same four checks, written as one stream. A model trained on it searches as much as the
#   parallel one, with no block. It is the control arm of `study controls` (notebook 07), which asks
#   whether a gain comes from the block or only from writing the search down.
# - `path_headers=True` opens each path with its number, `(1) ` and `(2) `
#   (`format.grammar.number_paths`). Under the unseen mask a path cannot see its sibling, so nothing
#   tells it which half of the search is its own; notebook 03 shows the shipped unseen SFT's two
#   paths often starting from the same price. The numbers are a remedy the project tried for that,
#   and it did not pay here: the forced block gains less with them, and the numbered unseen arm of
#   `study controls` ends below plain SFT (notebook 03 section 7 has the numbers;
#   [docs/tinyworld.md](../docs/tinyworld.md#parallel-or-just-more-search)).

# %%
from datasets import Dataset

hard_row = next(r for r in world_set if r["source"] == "tinyworld-hard")
one = Dataset.from_list([hard_row])
serial = sft.with_trace_style(one, "serial")[0]["completion"]
numbered = sft.with_trace_style(one, path_headers=True)[0]["completion"]
assert serial == fmt.serialize(hard_row["completion"])
assert numbered == fmt.number_paths(hard_row["completion"])
print("serial:\n" + serial, "\n\nnumbered paths:\n" + numbered)

# %% [markdown]
# `python -m pr1lib sft --world tinyworld` builds this set and trains on it from the world's base
# model (notebook 04 does the same in Python).

# %% [markdown]
# ## 8. Switching to an LLM teacher
#
# Two teachers share the rule teacher's interface (`generate(problems) -> traces`) and its cache:
#
# - `HFTeacher("deepseek-ai/DeepSeek-R1-0528-Qwen3-8B", load_in_4bit=True)` samples any causal LM
#   with the paper's v3 prompt in the model's chat template, in batches, and keeps what follows
#   `</think>`;
# - `OpenAITeacher(base_url=..., model=...)` talks to anything that serves chat completions: vLLM
#   (`vllm serve MODEL`), SGLang, TGI, llama.cpp's server, or a hosted API, through the `openai`
#   client. It has timeouts, retries with backoff on 429/5xx, a wall-clock deadline per problem,
#   rate and concurrency limits, and stops when the server keeps failing. URL, model and key can
#   also come from `OPENAI_BASE_URL`, `PR1_TEACHER_MODEL` and `OPENAI_API_KEY`.
#
# In `colab` and `paper` the next cell runs a real model on a few problems. In `tiny` and `smoke`
# there is no model to run, so it starts a **stand-in server** on 127.0.0.1. It speaks the same
# HTTP protocol, but behind it is the rule teacher, not a language model. That exercises the client
# for real (HTTP, JSON, `</think>` stripping, one injected 429 that is retried) without claiming
# anything about an LLM's yield.

# %%
import os

from pr1lib.config import NotebookConfig
from pr1lib.data import chat_teacher, standin
from pr1lib.data.hf_teacher import HFTeacher

llm_problems = next(iter(sources.values()))[: config.llm_limit]  # GSM8K, or its stand-in
NB = NotebookConfig.for_profile(PROFILE)  # which LLM demo this profile can afford
if NB.llm_teacher == "hf" and os.environ.get("OPENAI_BASE_URL"):  # a served model is set up
    llm = chat_teacher.OpenAITeacher(model=config.teacher_model, max_tokens=config.max_new_tokens)
    llm_traces = generate_traces(llm, llm_problems, OUT / "llm_traces.jsonl",
                                           batch_size=64)
elif NB.llm_teacher == "hf":
    llm = HFTeacher(config.teacher_model, load_in_4bit=config.load_in_4bit, batch_size=8,
                             max_new_tokens=config.max_new_tokens, seed=SEED)
    llm_traces = generate_traces(llm, llm_problems, OUT / "llm_traces.jsonl",
                                           batch_size=8)
else:
    with standin.StandInServer(llm_problems, faults=["429"]) as server:  # STAND-IN, not a model
        llm = chat_teacher.OpenAITeacher(base_url=server.base_url, model="stand-in")
        llm_traces = llm.generate(llm_problems)
        print(
            f"stand-in server at {server.base_url}: {server.requests} requests for "
            f"{len(llm_problems)} problems"
        )
llm_kept, llm_rejected = coldstart.filter_traces(llm_problems, llm_traces, config.prompt_style,
                                                 config.max_tokens)
print(f"{llm.name}: kept {len(llm_kept)} of {len(llm_problems)}")
print((llm_kept or llm_rejected)[0]["completion"][:600])

# %% [markdown]
# ## Summary
#
# - The cold-start set is made by a teacher, then **filtered**: strictly valid, at least one block,
#   the right answer, within the token budget, one row per question.
# - The rule teacher rewrites worked solutions into parallel traces with checked arithmetic. It
#   covers nearly all of GSM8K train, and nothing of DAPO-Math, which has no worked solutions. The
#   paper saw the same split between easy and hard problems (83.7 % vs 0.0 %) with a real LLM
#   teacher, and states a format filter (whether its filter checked answers is not known).
# - Generation is cached per (problem, teacher) with fsync'd appends, so interrupts are cheap.
# - The output is a prompt–completion `Dataset` with provenance, ready for stage 1 (notebook 04).
# - In TinyWorld the same pipeline, with the world's own rule teacher, keeps every trace: blocks
#   that split a search and check it on hard items, overhead on easy ones. Half of the rows go
#   plain; the result is, row for row, the set the shipped TinyWorld SFT trained on. Serial traces
#   and numbered paths are the same rows written as this project's two controls.

# %% [markdown]
# ## Exercises
#
# 1. Set `extra_path_rate=1.0` in `RuleTeacher` and count how many blocks get three paths. Which
#    problems can never have three?
#
#    <details><summary>Hint</summary>
#
#    A third path needs two alternatives of the blocked step: look at
#    `pr1lib.worlds.teachers.alternatives(expr, value)` for a product, a sum, a difference and a
#    quotient, and remember which step `step_choice="rare_op"` picks.
#    </details>
# 2. Lower `config.max_tokens` to 256 (`config.replace(max_tokens=256)`) and rerun the filter on
#    GSM8K and on both TinyWorld tiers. Which source loses most, and why does the tiny tokenizer
#    count more tokens than `chars/4`?
#
#    <details><summary>Hint</summary>
#
#    Count `too_long` among the rejected rows per source at both budgets; a TinyWorld source's
#    traces come from `coldstart.make_teacher(config.replace(source=name))`. For the tokenizer,
#    compare `coldstart.count_tokens(text, tokenizer)` with `len(text) / 4` on a trace full of
#    numbers.
#    </details>

# %% [markdown]
# 3. Give the stand-in server `faults=["malformed", "timeout"]` and a client `timeout=0.5`. Predict
#    each problem's trace before you run it, and check that a second run retries only the failures.
#
#    <details><summary>Hint</summary>
#
#    Faults are played one per request in arrival order, so use `concurrency=1`. The
#    `OpenAITeacher` docstring says which outcomes are retried and which are recorded at once; the
#    cache in `generate_traces` says which problems a rerun asks again (`server.asked`).
#    </details>
# 4. With a GPU, run `HFTeacher` on 32 GSM8K problems and compare its rejection reasons with the
#    rule teacher's. Which check does an LLM fail most often?
#
#    <details><summary>Hint</summary>
#
#    Run both teachers on the same problems and count `reason` in the rejected rows of
#    `coldstart.filter_traces`. The filter's checks run in order: teacher error, format, block,
#    answer, length.
#    </details>
#
# Solutions, with the reasoning:
# [solutions/02_cold_start_data.py](../solutions/02_cold_start_data.py)
# (`python solutions/02_cold_start_data.py` runs them).

# %% [markdown]
# # 01 · The parallel-thinking format
#
# **Goal:** know exactly what a well-formed Parallel-R1 response looks like, check one
# with two validators, and give the six tags a sensible place in the model's vocabulary.
#
# You will learn
# - the grammar of `<Parallel>`, `<Path>` and `<Summary>` blocks, and how `pr1lib.format.grammar`
#   parses a response into text and blocks;
# - how the official checker differs from this project's strict grammar, case by case;
# - how to add the tags as single tokens that survive TRL's decoding, and why their new
#   embedding rows should start as the mean of the pieces they used to split into.
#
# Terms: [glossary](../docs/glossary.md) · the whole recipe in one picture:
# [docs/recipe.md](../docs/recipe.md)
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/pr1-tutorial/pr1/blob/main/notebooks/01_parallel_format.ipynb)

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
# ## 1. The grammar
#
# A response is ordinary reasoning text with zero or more **blocks** inside it:
#
# ```
# response := text (block text)*            ending with a line "Final Answer: X"
# block    := <Parallel> path path+ </Parallel> ws <Summary> text </Summary>
# path     := <Path> text </Path>            (text must not be empty)
# ```
#
# Between the tags of a block only whitespace is allowed, blocks never nest, and every
# `</Parallel>` is followed by exactly one summary. At RL time the rollout engine writes as many
# paths per block as the world's layout says (the last lines of the cell below print each world's:
# two in TinyWorld, nine in WideWorld); teacher data may have more. `pr1lib.format.grammar.parse`
# turns a response into its parts, with character spans that point back into the text.
#
# The running example is the block TinyWorld's rule teacher writes for a hard item (notebook 00):
# two paths split the search for the pair of prices that makes the total, each checks its pairs,
# and the summary keeps the one that checks out (`pr1lib.worlds.tinyworld.search_block`).

# %%
import pandas as pd

from pr1lib import worlds
from pr1lib.format import grammar as fmt
from pr1lib.worlds.tinyworld import parse_hard, search_block

question = worlds.get("tinyworld").generate(1, "hard", "test", seed=SEED)[0]["question"]
example = search_block(*parse_hard(question))
print(question, "\n")
print(example, "\n")

from pr1lib.config.stages import RolloutConfig

for name in worlds.names():  # the engine's paths per block: its default, or the world's layout
    layout = {"num_paths": RolloutConfig().num_paths, **worlds.get(name).layout()}
    headers = " (each opened with its header)" if layout.get("path_headers") else ""
    print(f"{name}: the rollout engine writes {layout['num_paths']} paths per block{headers}")

# %%
parsed = fmt.parse(example)
rows = []
for part in parsed.parts:
    if isinstance(part, str):
        rows.append(("text", None, None, part))
        continue
    for path in part.paths:
        rows.append(("path", path.start, path.end, path.text))
    s = part.summary
    rows.append(("summary", s.start, s.end, s.text))
parts = pd.DataFrame(rows, columns=["part", "start", "end", "content"])
parts.astype({"start": "Int64", "end": "Int64"})  # text parts have no span

# %% [markdown]
# `render` writes a structure back in the canonical layout (tags adjacent, one newline
# before `<Summary>`), and `parallel_stats` gives the numbers later notebooks track:
# how many blocks, whether the response is valid, and where the first block starts
# (as a fraction of the response; the paper watches this rise during RL).

# %%
assert fmt.render(parsed) == example
fmt.parallel_stats(example)

# %% [markdown]
# ### A real teacher trace
#
# The official repository ships 341 teacher traces (an early Parallel-GSM8K pilot).
# If the shared data folder is present we read them and count how many each validator
# accepts; the strict grammar catches three real slips the official checker lets through.

# %% tags=["report"]
import json

from pr1lib.store.paths import shared_data_dir

SUBSET = "parallel_gsm8k/parallel_gsm8k_v2_subset.jsonl"
data_dir = shared_data_dir()
trace_file = data_dir / SUBSET if data_dir else None
traces = []
if trace_file is not None and trace_file.exists():
    traces = [json.loads(line) for line in trace_file.open(encoding="utf-8")]
    stats = pd.DataFrame([fmt.parallel_stats(t["response"]) for t in traces])
    right = sum(fmt.answers_match(fmt.extract_answer(t["response"]), t["answer"])
                for t in traces)
    print(f"{len(traces)} traces | official valid {stats.valid_official.sum()} | "
          f"strict valid {stats.valid.sum()} | answer matches record {right}")
    print(f"blocks per trace: {stats.blocks.mean():.2f}; mean first-block position: "
          f"{stats.first_block_position.mean():.2f}")
    print(traces[0]["response"][:700])
else:
    print("Shared data not found (set PR1_DATA_DIR); skipping the real traces.")

# %% [markdown]
# ## 2. Two validators, side by side
#
# The paper's reward code uses a small stack machine (docs/recipe.md#1-tags-and-grammar). It
# counts paths per block and checks that summaries follow blocks, but it is lenient in
# three ways: a `<Path>` outside any block passes, an unclosed `<Summary>` passes, and
# well-formed nesting passes. `validate(text, strict=False)` reproduces it, error for
# error; `validate(text)` (strict, the default) is the grammar above.

# %%
P = "<Parallel><Path>a</Path><Path>b</Path></Parallel>"
cases = {
    "no tags": "2 + 2 = 4\nFinal Answer: 4",
    "one good block": P + "\n<Summary>s</Summary>\nFinal Answer: 4",
    "three paths": P[:-11] + "<Path>c</Path></Parallel><Summary>s</Summary>",
    "path outside a block": "<Path>just me</Path> Final Answer: 4",
    "unclosed summary": P + "<Summary>s ... Final Answer: 4",
    "nested block": "<Parallel><Path>" + P + "<Summary>s</Summary></Path>"
                    "<Path>c</Path></Parallel><Summary>t</Summary>",
    "text between paths": P.replace("</Path><Path>", "</Path> then <Path>")
                          + "<Summary>s</Summary>",
    "only one path": "<Parallel><Path>a</Path></Parallel><Summary>s</Summary>",
    "missing summary": P + "\nFinal Answer: 4",
    "two summaries": P + "<Summary>s</Summary><Summary>t</Summary>",
    "truncated": "<Parallel><Path>a</Path><Path>b",
    "stray closing tag": "done. </Parallel>",
}

# %% tags=["report"]
def verdict(errors):
    return "valid" if not errors else f"{len(errors)} error(s)"


table = pd.DataFrame(
    {
        "official": [verdict(fmt.validate(t, strict=False)) for t in cases.values()],
        "strict": [verdict(fmt.validate(t)) for t in cases.values()],
        "first strict error": [(fmt.validate(t) or [""])[0] for t in cases.values()],
    },
    index=list(cases),
)
table

# %% [markdown]
# You should see: the strict validator accepts the canonical trace and rejects the malformed ones;
# four rows of the table pass the official checker only, and none passes the strict one only.
# With the shared data, three of the real traces pass the official checker only.

# %%
from pr1lib.notebook.expect import should_see

assert fmt.validate(example) == [] and fmt.validate(cases["one good block"]) == []
for name in ("only one path", "missing summary", "path outside a block", "unclosed summary"):
    assert fmt.validate(cases[name]), f"strict grammar accepted {name!r}"
assert not ((table.official != "valid") & (table.strict == "valid")).any()  # strict is stricter
only_official = (table.official == "valid") & (table.strict != "valid")
should_see("validator table rows only the official checker accepts",
           only_official.sum(), PROFILE)
if traces:
    should_see("real traces only the official checker accepts",
               (stats.valid_official & ~stats.valid).sum(), PROFILE)

# %% [markdown]
# Every row the official checker rejects, the strict grammar rejects too; the reverse is
# not true. Rewards in this project use the strict grammar, so a learner cannot earn the
# "parallel" bonus with a lone `<Path>` or a summary that never ends.
#
# ## 3. Reading the answer
#
# `extract_answer` takes the last `Final Answer:` line that is **not** inside a path (a
# path may try an answer that the summary later rejects). `answers_match` compares
# numbers by value and falls back to math-verify for LaTeX.

# %%
answer_cases = [
    ("<Path>Final Answer: 11</Path> ... Final Answer: 12", "12"),
    ("Final Answer: $1,200.", "1200"),
    ("Final Answer: 027", "27"),
    ("Final Answer: \\frac{1}{2}", "0.5"),
    ("<Path>Final Answer: 3</Path>", "3"),
]
pd.DataFrame(
    [(t, fmt.extract_answer(t), gold, fmt.answers_match(fmt.extract_answer(t), gold))
     for t, gold in answer_cases],
    columns=["response", "extracted", "gold", "match"],
)

# %% [markdown]
# ## 4. The tags as tokens
#
# Out of the box a tokenizer splits `<Path>` into several pieces. The paper adds the six
# tags as single tokens. It marks them *special*, which means a decode with
# `skip_special_tokens=True` (what TRL does before calling reward functions) deletes
# them. We add them as **normal** added tokens instead: still one id each, still matched
# before the BPE runs, but kept by every decode.

# %%
from pr1lib.decoding import tokens
from pr1lib.decoding.models import ModelNotAvailableError, build_random_tiny, load_policy

try:
    model, tokenizer, _ = load_policy(PROFILE)
except ModelNotAvailableError as err:  # e.g. tiny profile before data/tiny-base exists
    print(f"{err}\nFalling back to a random tiny model.")
    model, tokenizer = build_random_tiny(seed=SEED)
sample = "so <Path>12</Path>"
pd.set_option("display.max_columns", 40)

# %% tags=["report"]
def show_tokens(tok, text):
    ids = tok.encode(text, add_special_tokens=False)
    return pd.DataFrame({"token": tok.convert_ids_to_tokens(ids), "id": ids}).T


pieces = tokens.tag_pieces(tokenizer)  # what each tag splits into right now
print(f"before: {len(tokenizer)} tokens")
show_tokens(tokenizer, sample)

# %%
added = tokens.add_tag_tokens(tokenizer)
ids = tokens.tag_token_ids(tokenizer)
print(f"added {len(added)} tags -> {len(tokenizer)} tokens; ids {ids}")
show_tokens(tokenizer, sample)

# %%
text = sample + tokenizer.eos_token
decoded = tokenizer.decode(tokenizer.encode(text, add_special_tokens=False),
                           skip_special_tokens=True)
print(repr(decoded))  # eos removed, tags kept
assert decoded == sample and tokens.add_tag_tokens(tokenizer) == []  # idempotent

# %% [markdown]
# ## 5. Where the new rows start
#
# A new token needs a row in the embedding matrix (and in the LM head, if it is not tied
# to the embeddings). A plain `resize_token_embeddings` fills new rows with nearly the
# same vector, and Qwen's padded vocabulary hands the tags whatever sat in its unused
# rows. An independent reproduction of the paper (not the authors' own runs; docs/recipe.md
# cites it) found those rows identical on Qwen3-0.6B-Base, and the tags stayed
# indistinguishable through training. The fix used here: start each tag at
# the **mean of its old pieces' rows**, so `<Path>` begins near `<`, `Path`, `>` (its pieces in
# section 4's first table). We first do the plain resize, measure, then initialise and measure
# again.

# %%
import torch

if model.get_input_embeddings().weight.shape[0] < len(tokenizer):
    model.resize_token_embeddings(len(tokenizer))  # the plain way
before = tokens.tag_similarity(model, tokenizer)  # (6, 6) cosine similarities
tokens.init_tag_embeddings(model, tokenizer, pieces)
after = tokens.tag_similarity(model, tokenizer)
off_diag = ~torch.eye(6, dtype=torch.bool)
print(f"mean off-diagonal cosine: before {before[off_diag].mean():.3f}, "
      f"after {after[off_diag].mean():.3f}")

# %% tags=["report"]
import plotly.graph_objects as go
from plotly.subplots import make_subplots

names = list(fmt.TAGS)
fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                    subplot_titles=("plain resize", "mean of pieces"))  # one row of tag names
for col, matrix in enumerate((before, after), start=1):
    fig.add_trace(go.Heatmap(z=matrix.numpy().round(3), x=names, y=names, zmin=-1, zmax=1,
                             colorscale="RdBu_r", showscale=col == 2,
                             colorbar=dict(title="cosine")), 1, col)
fig.update_xaxes(title="tag", tickangle=-45)
fig.update_yaxes(title="tag", autorange="reversed", col=1)
fig.update_layout(title="Cosine similarity between the six tag embeddings", height=460, width=900,
                  margin=dict(l=100, t=90))
fig.show()

# %% [markdown]
# What the start gives, pair by pair (the cell prints the cosines the heatmap colours):

# %%
def cosine(a, b, matrix=after):
    return matrix[names.index(a), names.index(b)].item()


pairs = [("<Parallel>", "</Parallel>"), ("<Path>", "</Path>"), ("<Summary>", "</Summary>"),
         ("<Parallel>", "<Path>"), ("</Parallel>", "</Path>"), ("<Path>", "<Summary>")]
opening_closer = cosine("<Parallel>", "<Path>") > cosine("<Path>", "</Path>")
should_see("<Parallel>/<Path> closer than <Path>/</Path> (1 = yes)", int(opening_closer), PROFILE)
for a, b in pairs:
    print(f"{a:>11} / {b:<11} cosine {cosine(a, b):.3f} (plain resize {cosine(a, b, before):.3f})")

# %% [markdown]
# On the tiny model the plain resize leaves every tag on one vector (cosine 1.000 for every
# pair), and the mean of pieces gives each tag its own row. The rows are not grouped by family,
# though: they follow the pieces they share, so two opening tags (both start with `<`) sit closer
# than a tag and its own closing tag (`<Parallel>`/`<Path>` above `<Path>`/`</Path>` in the lines
# above). Nothing at the start tells the families apart; the SFT in notebook 04 has to.
#
# For LoRA the embedding matrix is frozen, so the tag rows would never learn. PEFT's
# `trainable_token_indices` trains just these rows; `lora_kwargs_for_tags` builds it
# (a list when the head is tied, a per-module dict when it is not). `add_parallel_tags`
# does sections 4 and 5 in one idempotent call.

# %%
print(tokens.lora_kwargs_for_tags(tokenizer, model))
size = len(tokenizer)
assert tokens.add_parallel_tags(tokenizer, model) == ids  # nothing added twice
assert len(tokenizer) == size

# %% [markdown]
# ## 6. From scratch: the official checker in a dozen lines
#
# The whole official checker is one pass over the tags with a stack, a per-block path
# counter, and a "summary expected" flag. Written out by hand:

# %%
import random
import re


def tiny_checker(text):
    """True when the official-style stack machine finds no error."""
    stack, counts, expecting, summaries, ok = [], [], False, 0, True
    for tag in re.findall(r"</?(?:Parallel|Path|Summary)>", text):
        if tag in ("<Parallel>", "<Path>"):
            stack.append(tag)
            if tag == "<Parallel>":
                counts.append(0)
                expecting = False
        elif tag in ("</Path>", "</Parallel>"):
            if not stack or stack[-1] != tag.replace("/", ""):
                ok = False
                continue
            stack.pop()
            if tag == "</Path>" and counts:
                counts[-1] += 1  # a path counts for the newest open block
            elif tag == "</Parallel>":
                ok = ok and counts.pop() >= 2
                expecting = True
        elif tag == "<Summary>":
            ok, expecting, summaries = ok and expecting, False, summaries + 1
    closes = text.count("</Parallel>")
    return ok and not stack and not expecting and summaries == closes

# %% [markdown]
# It must agree with `pr1lib` on the hand-made cases, on the real traces, and on a few
# thousand random "tag soups":

# %% tags=["report"]
rng = random.Random(SEED)
alphabet = list(fmt.TAGS) + ["x", " "]
soups = ["".join(rng.choices(alphabet, k=rng.randint(0, 10))) for _ in range(3000)]
texts = list(cases.values()) + [t["response"] for t in traces] + soups
mine = [tiny_checker(t) for t in texts]
theirs = [not fmt.validate(t, strict=False) for t in texts]
assert mine == theirs
print(f"tiny_checker agrees with pr1lib on all {len(texts)} texts "
      f"({sum(mine)} valid)")

# %% [markdown]
# ## Summary
#
# - A response is text with flat `<Parallel>` blocks of two or more non-empty paths, each
#   followed by one `<Summary>`; the answer is the last `Final Answer:` outside a path.
# - `validate(text, strict=False)` is the paper's lenient checker; `validate(text)` is
#   the strict grammar that this project's rewards use. On the 341 real teacher traces
#   they disagree on three.
# - The tags are **normal** added tokens, so they stay in TRL's decoded completions.
# - New tag rows start at the mean of their old pieces, which keeps them distinct; with
#   LoRA, `trainable_token_indices` lets those rows train.

# %% [markdown]
# ## Exercises
#
# 1. Find a response, not in the table, that the official checker accepts and the
#    strict grammar rejects. Predict both verdicts before you run `validate`.
#
#    <details><summary>Hint</summary>
#
#    The official checker reads only the tags, never the text between them. Which rules of
#    the strict grammar are about text: inside a path, or between `</Parallel>` and `<Summary>`?
#    </details>
# 2. Make `tiny_checker` reject a `<Path>` outside any block (one extra condition).
#    Which rows of the table in section 2 change, and does the assert still pass?
#
#    <details><summary>Hint</summary>
#
#    When a `<Path>` opens, look at the top of `stack`. Then reread what the assert of
#    section 6 compares `tiny_checker` with.
#    </details>
# 3. Add the tags with `special=True` on a copy of the tokenizer and decode `sample`
#    with `skip_special_tokens=True`. What would a TRL reward function receive, and what
#    would the strict validator say about it?
#
#    <details><summary>Hint</summary>
#
#    `copy.deepcopy(tokenizer)`, then `add_tokens(..., special_tokens=True)`. A text with no
#    tags breaks no rule; score it with `pr1lib.rewards.functions.tiered_reward` to see what it
#    costs. </details>
#
# Solutions, with the reasoning:
# [solutions/01_parallel_format.py](../solutions/01_parallel_format.py)
# (`python solutions/01_parallel_format.py` runs them).

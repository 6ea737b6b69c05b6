"""Pre-flight doctor: each check's verdict on a named good and bad input.

Run alone: .venv/bin/python -m pytest tests/test_doctor.py -q
"""

from __future__ import annotations

import tempfile

import pytest

from pr1lib.format.grammar import TAGS
from pr1lib.format.prompts import chat_prompt
from pr1lib.rewards.functions import (
    accuracy_reward,
    alternating_reward,
    structure_reward,
    tiered_reward,
)
from pr1lib.training import doctor as D

BLOCK = "<Parallel><Path>6+6=12</Path><Path>2*6=12</Path></Parallel>\n<Summary>12</Summary>\n"
PARALLEL_GOLD = BLOCK + "Final Answer: 12"
LINEAR_GOLD = "2*6=12\nFinal Answer: 12"
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{{ prefill }}{% endif %}"
)


class WordTokenizer:
    """A stand-in tokenizer: one token per whitespace-separated word."""

    def encode(self, text, add_special_tokens=False):
        return text.split()


def hf_tokenizer(tags_as_special: bool | None = None, prefill: str = ""):
    """A tiny real ``PreTrainedTokenizerFast`` (word level), optionally with the tags added."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate("[UNK] <eos> a b c Final Answer: 12".split())}
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer, core.decoder = pre_tokenizers.WhitespaceSplit(), decoders.WordPiece()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", eos_token="<eos>")
    if tags_as_special is True:
        tok.add_special_tokens({"additional_special_tokens": list(TAGS)})
    elif tags_as_special is False:
        tok.add_tokens(list(TAGS))
    tok.chat_template = CHATML.replace("{{ prefill }}", prefill)
    return tok


# ---------------------------------------------------------------- gold_max
@pytest.mark.parametrize(
    "reward, gold, answer, step, ok",
    [
        (accuracy_reward, LINEAR_GOLD, "12", 0, True),
        (tiered_reward, PARALLEL_GOLD, "12", 0, True),
        (tiered_reward, LINEAR_GOLD, "12", 0, False),  # linear gold tops out at 1.0 < 1.2
        (
            tiered_reward,
            PARALLEL_GOLD,
            "2*6=<<2*6=12>>12\n#### 12",
            0,
            True,
        ),  # raw GSM8K answer column
        (accuracy_reward, "2*6=12\nAnswer: 12", "12", 0, False),  # no 'Final Answer:' line
        (structure_reward, PARALLEL_GOLD, "99", 0, True),  # structure ignores the answer
        (alternating_reward(), LINEAR_GOLD, "12", 0, True),  # accuracy step
        (alternating_reward(), LINEAR_GOLD, "12", 8, False),  # tiered step wants a block
    ],
)
def test_gold_max(reward, gold, answer, step, ok):
    check = D.check_gold(reward, [gold, gold], [answer, answer], step)
    assert (check.name, check.ok) == ("gold_max", ok)
    assert ("2/2" in check.detail) is (not ok)


def test_gold_max_is_skipped_when_the_reward_has_no_range():
    check = D.check_gold(lambda completions, **kw: [0.5] * len(completions), [LINEAR_GOLD], ["12"])
    assert check.ok is None and "no range" in check.detail


# ---------------------------------------------------------------- prompt_prefill
def test_v3_prompt_mentions_tags_but_prefills_none():
    tok = hf_tokenizer()
    assert "<Parallel>" in chat_prompt("x", tok, "v3")  # the instructions name the tags...
    assert D.check_prefill(lambda p: chat_prompt(p, tok, "v3")).ok is True  # ...which is fine


def test_template_that_prefills_a_tag_fails():
    tok = hf_tokenizer(prefill="<Parallel><Path>")
    check = D.check_prefill(lambda p: chat_prompt(p, tok, "v3"))
    assert check.ok is False and "['<Parallel>', '<Path>']" in check.detail


def test_render_that_drops_the_problem_fails():
    assert D.check_prefill(lambda p: "a fixed prompt").ok is False


# ---------------------------------------------------------------- truncation
@pytest.mark.parametrize(
    "max_len, ok, shown",
    [
        (20, True, "0/4 samples (0%) exceed 20"),
        (6, False, "2/4 samples (50%) exceed 6"),
        (3, False, "4/4 samples (100%) exceed 3"),
    ],
)
def test_truncation(max_len, ok, shown):
    samples = ["w " * 3, "w " * 4, "w " * 9, "w w " + PARALLEL_GOLD]  # 4, 5, 10, 8 tokens with EOS
    check = D.check_truncation(samples, WordTokenizer(), max_len)
    assert check.ok is ok and check.detail.startswith(shown)
    if not ok:
        assert "1/1 with a parallel block" in check.detail
        assert "raise max_completion_length to about 10" in check.hint


def test_truncation_accepts_a_raw_tokenizers_encoding():
    tok = hf_tokenizer(tags_as_special=False)
    check = D.check_truncation([PARALLEL_GOLD], tok.backend_tokenizer, 5)
    assert check.ok is False and "longest" in check.detail


# ---------------------------------------------------------------- batch_groups
# per_device, num_generations, grad_accum, generation_batch_size, ok (what TRL 1.16 says)
BATCHES = [
    (8, 4, 1, None, True),
    (8, 3, 1, None, False),
    (4, 8, 2, None, True),  # 2 accumulation steps make one 8-completion group
    (4, 8, 1, None, False),
    (2, 4, 1, 8, True),
    (2, 4, 1, 6, False),
    (4, 2, 1, 6, False),  # 6 is not a multiple of the global batch 4
    (8, 1, 1, None, False),  # GRPO needs >= 2 generations
]


@pytest.mark.parametrize("per_device, g, accum, gen, ok", BATCHES)
def test_batch_groups(per_device, g, accum, gen, ok):
    check = D.check_batch(
        dict(
            per_device_train_batch_size=per_device,
            num_generations=g,
            gradient_accumulation_steps=accum,
            generation_batch_size=gen,
        )
    )
    assert check.ok is ok


def test_batch_groups_agrees_with_trl_and_reads_a_grpo_config():
    trl = pytest.importorskip("trl")
    for per_device, g, accum, gen, ok in BATCHES:
        kwargs = dict(
            per_device_train_batch_size=per_device,
            num_generations=g,
            gradient_accumulation_steps=accum,
            generation_batch_size=gen,
        )
        try:
            config = trl.GRPOConfig(
                output_dir=tempfile.mkdtemp(), report_to="none", use_cpu=True, **kwargs
            )
        except ValueError:
            assert not ok, kwargs
            continue
        assert ok and D.check_batch(config).ok is True, kwargs


def test_batch_groups_suggests_valid_group_sizes():
    check = D.check_batch({"per_device_train_batch_size": 6, "num_generations": 4})
    assert "[2, 3, 6]" in check.hint


# ---------------------------------------------------------------- group_variance
def test_group_variance_flags_groups_that_all_fail():
    groups = [["Final Answer: 1", "Final Answer: 2"], ["Final Answer: 3", "Final Answer: 4"]]
    check = D.check_group_variance(accuracy_reward, groups, ["12", "12"])
    assert (
        check.ok is False
        and "frac_reward_zero_std = 1.00 (2/2 groups), mean reward -1.00" in check.detail
    )


def test_group_variance_passes_when_groups_disagree():
    groups = [[LINEAR_GOLD, "Final Answer: 2"], [PARALLEL_GOLD, LINEAR_GOLD], ["x", PARALLEL_GOLD]]
    check = D.check_group_variance(accuracy_reward, groups, ["12", "12", "12"])
    assert check.ok is True and "0.33 (1/3 groups)" in check.detail  # the second group is all +1


def test_group_variance_uses_the_step_for_alternating():
    groups = [[PARALLEL_GOLD, LINEAR_GOLD]]
    # 1.0, 1.0
    assert D.check_group_variance(alternating_reward(), groups, ["12"], step=0).ok is False
    # 1.2, 1.0
    assert D.check_group_variance(alternating_reward(), groups, ["12"], step=9).ok is True


def test_dry_run_groups_samples_per_prompt():
    groups = D.dry_run(lambda prompt, n: [f"{prompt}-{i}" for i in range(n)], ["p", "q"], 3)
    assert groups == [["p-0", "p-1", "p-2"], ["q-0", "q-1", "q-2"]]


# ---------------------------------------------------------------- tags_survive_decoding
@pytest.mark.parametrize("special, ok", [(True, False), (False, True)])
def test_tags_survive_decoding(special, ok):
    check = D.check_tags_survive(hf_tokenizer(tags_as_special=special))
    assert check.ok is ok
    if not ok:
        assert "<Parallel>" in check.detail and "special=False" in check.hint


# ---------------------------------------------------------------- doctor + table
def test_doctor_all_green():
    tok = hf_tokenizer(tags_as_special=False)
    checks = D.doctor(
        tiered_reward,
        gold_completions=[PARALLEL_GOLD] * 2,
        answers=["12", 12],
        render=lambda p: chat_prompt(p, tok, "v3"),
        tokenizer=tok,
        max_completion_length=64,
        batch={"per_device_train_batch_size": 4, "num_generations": 4},
        groups=[[PARALLEL_GOLD, LINEAR_GOLD, "Final Answer: 3", BLOCK]],
        group_answers=["12"],
    )
    assert [c.name for c in checks] == [
        "gold_max",
        "prompt_prefill",
        "truncation",
        "batch_groups",
        "group_variance",
        "tags_survive_decoding",
    ]
    assert [c.ok for c in checks] == [True] * 6


def test_doctor_skips_what_it_was_not_given_and_table_shows_hints():
    checks = D.doctor(tiered_reward, gold_completions=[LINEAR_GOLD], answers=["12"])
    assert [c.status for c in checks] == [
        "FAIL",
        "skipped",
        "skipped",
        "skipped",
        "skipped",
        "skipped",
    ]
    # samples default to the gold
    assert checks[2].detail == "needs tokenizer, max_completion_length"
    text = D.table(checks)
    assert text.splitlines()[0].split() == ["check", "status", "detail"]
    assert "-> check the answer column" in text and text.count("skipped") == 5


def test_table_wraps_long_details_between_words_within_its_width():
    """Notebook 05's doctor table wrapped mid-word in the browser: its lines now end by width."""
    long = "frac_reward_zero_std = 1.00 (2/2 groups), mean reward -1.00 " * 3
    checks = [D.Check("group_variance", False, long, hint="prime the format with SFT " * 4)]
    text = D.table(checks, width=72)
    assert all(len(line) <= 72 for line in text.splitlines())
    assert text.split() == [
        "check",
        "status",
        "detail",
        "group_variance",
        "FAIL",
        *long.split(),
        "->",
        *("prime the format with SFT " * 4).split(),
    ]  # no word cut
    column = text.splitlines()[1].index("frac_reward_zero_std")
    assert all(line[:column].strip() == "" for line in text.splitlines()[2:])  # under its column


def test_notebook_05s_doctor_loads_the_start_notebook_06_trains_never_the_base(
    tmp_path, monkeypatch
):
    """The issue: 05's prose says the doctor loads 04's seen SFT; on tiny it loaded the base model
    (no SFT run found) and its group_variance failed. In a world it loads the shipped SFT."""
    from pr1lib.config import NotebookConfig
    from pr1lib.store.modelfiles import check_model_files
    from pr1lib.store.paths import REPO_ROOT
    from pr1lib.training.starts import notebook_start

    monkeypatch.setenv("PR1_RUNS_DIR", str(tmp_path))  # no SFT run anywhere
    for profile in ("smoke", "tiny"):
        world = NotebookConfig.for_profile(profile).world
        start = notebook_start(profile, 0, world)
        assert start == REPO_ROOT / "data" / "tinyworld-sft"
        check_model_files(start)  # a whole trained model folder, not a name
    assert notebook_start("tiny", 0, "tinyworld", init="runs/mine") == "runs/mine"  # INIT wins
    assert notebook_start("colab", 0, None) is None  # no world, no SFT run: the base model
    (tmp_path / "04_sft_lora-colab" / "seen" / "merged").mkdir(parents=True)
    assert notebook_start("colab", 0, None) == tmp_path / "04_sft_lora-colab" / "seen"

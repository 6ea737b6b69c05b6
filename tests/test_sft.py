"""pr1lib.training.sft on a tiny random Qwen3 and a byte-level BPE built here (no hub, CPU,
seconds).

Run: .venv/bin/python -m pytest tests/test_sft.py -q -p no:cacheprovider
"""

from __future__ import annotations

import json

import pytest
import torch

from pr1lib.config import ModelConfig, SFTStageConfig
from pr1lib.decoding.models import TINY_MODEL_DIR, load_training_policy
from pr1lib.decoding.tokens import add_parallel_tags, tag_token_ids
from pr1lib.format.grammar import TAGS
from pr1lib.store.paths import REPO_ROOT
from pr1lib.training.runs import load_run
from pr1lib.training.sft import ParallelCollator, build_trainer, response_starts, run_sft, sft_rows

EOS = "<|endoftext|>"
QUESTION = "Tom has {a} apples and gets {b} more. How many now?"
PROMPT = "Problem: " + QUESTION + "\nSolution:\n"  # pr1lib.format.prompts' "tiny" style
TRACE = (
    "<Parallel><Path>{a}+{b}={c}</Path><Path>{b}+{a}={c}</Path></Parallel>\n"
    "<Summary>Both give {c}.</Summary>\nFinal Answer: {c}"
)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny matrices: one torch thread is much faster than two fighting over shared cores."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def rows(n: int) -> list[dict]:
    out = []
    for i in range(n):
        a, b = 2 + i % 7, 3 + i % 5
        out.append(
            {
                "question": QUESTION.format(a=a, b=b),
                "completion": TRACE.format(a=a, b=b, c=a + b),
                "prompt_style": "tiny",
                "answer": f"{a}+{b}=<<{a}+{b}={a + b}>>{a + b}\n#### {a + b}",
            }
        )
    return out


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    """A saved base model folder (as ``data/tiny-base``): random 2-layer Qwen3 + BPE with the
    tags."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    corpus = [PROMPT.format(a=1, b=2) + "Final Answer: 3 Both give Path Summary Parallel"] * 20
    tok.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=300,
            special_tokens=[EOS],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=EOS)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config)
    add_parallel_tags(tokenizer, model)
    folder = tmp_path_factory.mktemp("base")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def model_config(base_dir, **kw) -> ModelConfig:
    return ModelConfig(name=str(base_dir), use_lora=True, lora_r=4, lora_alpha=8, **kw)


def train_cfg(**kw) -> SFTStageConfig:
    base = dict(
        max_steps=3,
        per_device_train_batch_size=4,
        learning_rate=2e-2,
        warmup_ratio=0.0,
        logging_steps=1,
        max_length=128,
        eval_n=2,
        eval_max_new_tokens=4,
    )
    return SFTStageConfig(**{**base, "profile": "smoke", **kw})


def trained(base_dir, tmp_path, variant: str, four_bit: bool):
    """(trainer, named trainable params before, frozen state before) after a 3-step run."""
    mcfg = model_config(base_dir, load_in_4bit=four_bit)
    model, tok, lora = load_training_policy(mcfg)
    frozen = {k: v.clone() for k, v in model.state_dict().items()}
    data, _ = sft_rows(rows(8), tok, 128)
    trainer = build_trainer(train_cfg(variant=variant), model, tok, lora, data, tmp_path, mcfg)
    start = {
        n: p.detach().float().clone()
        for n, p in trainer.model.named_parameters()
        if p.requires_grad
    }
    trainer.train()
    return trainer, tok, start, frozen


@pytest.mark.parametrize("variant", ["seen", "unseen"])
def test_4bit_lora_sft_moves_lora_and_tag_rows_only(base_dir, tmp_path, variant):
    trainer, tok, start, frozen = trained(base_dir, tmp_path, variant, four_bit=True)
    model = trainer.model
    assert model.base_model.model.is_loaded_in_4bit
    assert (
        type(model.base_model.model.model.layers[0].self_attn.q_proj.base_layer).__name__
        == "Linear4bit"
    )
    now = {n: p.detach().float() for n, p in model.named_parameters() if p.requires_grad}
    lora = [n for n in now if "lora_" in n]
    assert len(lora) == 2 * 7 * 2  # A and B on 7 linear layers x 2 layers: all-linear
    assert all(not torch.equal(start[n], now[n]) for n in lora if "lora_B" in n)
    [tag_rows] = [n for n in now if "trainable_tokens_delta" in n]
    assert not torch.equal(start[tag_rows], now[tag_rows])
    assert set(now) == set(lora) | {tag_rows}  # nothing else trains
    base, compared = model.get_base_model(), 0
    for key, value in base.state_dict().items():  # the frozen base: 4-bit codes, norms, embedding
        plain = key.replace(".base_layer", "").replace("token_adapter.", "")
        if "lora_" in key or "trainable_tokens" in key or plain not in frozen:
            continue
        assert torch.equal(value, frozen[plain]), key
        compared += 1
    assert compared >= 2 * 7 + 1  # at least every 4-bit weight and the embedding
    embed = base.get_input_embeddings()
    ids = sorted(tag_token_ids(tok).values())
    merged = embed.token_adapter.get_merged_weights(["default"])
    assert not torch.equal(merged[ids].float(), frozen["model.embed_tokens.weight"][ids].float())


def encode(tok, prompt: str, completion: str) -> dict:
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    c = tok(completion, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    return {"input_ids": p + c, "labels": [-100] * len(p) + c}


@pytest.fixture(scope="module")
def policy(base_dir):
    model, tok, _ = load_training_policy(
        model_config(base_dir, load_in_4bit=False), train_tag_rows=False
    )
    return model.eval(), tok


def logits_of(model, batch: dict) -> torch.Tensor:
    with torch.no_grad():
        return model(**batch).logits  # (B, L, V)


def spans(ids: list[int], tok, start: int = 0) -> dict[str, list[int]]:
    """Token indices of path 1, path 2 and the summary (tags included) at or after ``start``."""
    t = tag_token_ids(tok)
    at = {tag: [i for i, x in enumerate(ids) if x == t[tag] and i >= start] for tag in TAGS}
    return {
        "path1": list(range(at["<Path>"][0], at["</Path>"][0] + 1)),
        "path2": list(range(at["<Path>"][1], at["</Path>"][1] + 1)),
        "summary": list(range(at["<Summary>"][0], at["</Summary>"][0] + 1)),
    }


def test_unseen_collator_isolates_sibling_paths_and_summary_sees_both(policy):
    model, tok = policy
    trace, prompt = TRACE.format(a=2, b=3, c=5), PROMPT.format(a=2, b=3)
    # path 1 only
    a = encode(tok, prompt, trace.replace("2+3=5</Path><Path>", "1+4=5</Path><Path>", 1))
    b = encode(tok, prompt, trace.replace("2+3=5</Path><Path>", "4+1=5</Path><Path>", 1))
    assert len(a["input_ids"]) == len(b["input_ids"]) and a["input_ids"] != b["input_ids"]
    where = spans(a["input_ids"], tok)
    changed = [i for i, (x, y) in enumerate(zip(a["input_ids"], b["input_ids"])) if x != y]
    assert changed and set(changed) <= set(where["path1"])  # only path 1 differs
    collate = ParallelCollator(tok, "unseen")
    la, lb = logits_of(model, collate([a])), logits_of(model, collate([b]))
    torch.testing.assert_close(la[0, where["path2"]], lb[0, where["path2"]], atol=1e-5, rtol=0)
    assert (la[0, where["summary"]] - lb[0, where["summary"]]).abs().max() > 1e-3
    # the control: causal attention does leak path 1 into path 2
    seen = ParallelCollator(tok, "seen")
    sa, sb = logits_of(model, seen([a])), logits_of(model, seen([b]))
    assert (sa[0, where["path2"]] - sb[0, where["path2"]]).abs().max() > 1e-3


def test_collator_reads_structure_from_the_response_only(policy):
    _, tok = policy
    prompt = "Use <Parallel> with <Path> and </Path>, then </Parallel> and <Summary> </Summary>.\n"
    ex = encode(tok, prompt, TRACE.format(a=2, b=3, c=5))
    short = encode(tok, "Hi\n", "Final Answer: 1")
    batch = ParallelCollator(tok, "unseen")([ex, short])
    n_prompt = ex["labels"].count(-100)
    assert batch["attention_mask"].shape == (2, 1, len(ex["input_ids"]), len(ex["input_ids"]))
    # the prompt stays sequential
    assert batch["position_ids"][0, :n_prompt].tolist() == list(range(n_prompt))
    assert response_starts(batch["labels"]).tolist() == [n_prompt, short["labels"].count(-100)]
    where = spans(ex["input_ids"], tok, n_prompt)
    pos = batch["position_ids"][0]
    # both paths restart at the same position
    assert pos[where["path1"][0]] == pos[where["path2"][0]]
    # right padding is not trained
    assert (batch["labels"][1, len(short["input_ids"]) :] == -100).all()


def test_sft_run_saves_reloadable_adapter_and_merged_copy(base_dir, tmp_path, monkeypatch):
    from datasets import Dataset

    data = tmp_path / "data"
    Dataset.from_list(rows(8)).save_to_disk(str(data))
    mcfg = model_config(base_dir)
    run = run_sft(train_cfg(variant="unseen"), data=data, out=tmp_path / "run", model_cfg=mcfg)
    card = json.loads((run.run_dir / "run_card.json").read_text())
    assert card["steps"] == 3 and card["variant"] == "unseen" and len(card["data_hash"]) == 16
    assert card["config"]["learning_rate"] == 2e-2 and len(card["loss"]) == 3
    assert set(card["before"]) >= {"valid_block_rate", "parallel_ratio", "accuracy", "mean_length"}
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ids = torch.tensor(
        [encode(run.tokenizer, PROMPT.format(a=2, b=3), TRACE.format(a=2, b=3, c=5))["input_ids"]]
    )
    run.model.eval()
    with torch.no_grad():
        expected = run.model(input_ids=ids).logits
    for merged in (True, False):
        model, tok = load_run(run.run_dir, merged=merged)
        assert all(len(tok.encode(t, add_special_tokens=False)) == 1 for t in TAGS)
        text = tok.decode(tok.encode(TRACE.format(a=2, b=3, c=5)), skip_special_tokens=True)
        assert text == TRACE.format(a=2, b=3, c=5)
        with torch.no_grad():
            torch.testing.assert_close(
                model.eval()(input_ids=ids).logits, expected, atol=1e-4, rtol=1e-4
            )
    with pytest.raises(FileNotFoundError, match="neither merged/ nor adapter/"):
        load_run(run.run_dir / "trainer")


@pytest.mark.parametrize("reduction", ["sample", "token"])
def test_loss_is_a_mean_over_samples_of_per_sample_token_means(base_dir, tmp_path, reduction):
    import torch.nn.functional as F

    mcfg = model_config(base_dir)
    model, tok, lora = load_training_policy(mcfg)
    short, long = rows(2)
    long["completion"] = long["completion"].replace(
        "Both give", "Both paths give the same sum, so both give"
    )
    data, _ = sft_rows([short, long], tok, 128)
    trainer = build_trainer(
        train_cfg(loss_reduction=reduction), model, tok, lora, data, tmp_path, mcfg
    )
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(2)])
    trainer.model.eval()
    with torch.no_grad():
        loss = trainer.compute_loss(trainer.model, dict(batch))
        logits = trainer.model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).logits
    # (B, L-1)
    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2), batch["labels"][:, 1:], reduction="none")
    mask = batch["labels"][:, 1:] != -100  # (B, L-1)
    assert mask.sum(1)[0] != mask.sum(1)[1]  # two lengths, so the reductions differ
    per_sample = (nll * mask).sum(1) / mask.sum(1)  # (B,)
    expected = per_sample.mean() if reduction == "sample" else (nll * mask).sum() / mask.sum()
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)


def test_length_batches_pad_little_keep_every_row_and_reshuffle_each_epoch():
    from pr1lib.training.sft import LengthBatches

    gen = torch.Generator().manual_seed(0)
    # easy-like and hard-like rows, as in the tiny cold start's mix
    lengths = torch.cat(
        [
            torch.randint(100, 220, (1000,), generator=gen),
            torch.randint(180, 330, (1005,), generator=gen),
        ]
    ).tolist()
    sampler = LengthBatches(lengths, batch_size=16, seed=0)
    epochs = []
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        epochs.append(list(sampler))
        assert sorted(epochs[-1]) == list(range(len(lengths)))  # every row once per epoch

    def padded(order):  # tokens a batch of 16 pads to, over all batches
        return sum(
            max(lengths[i] for i in order[j : j + 16]) * len(order[j : j + 16])
            for j in range(0, len(order), 16)
        )

    shuffled = torch.randperm(len(lengths), generator=gen).tolist()
    assert padded(epochs[0]) < 0.8 * padded(shuffled)  # a random order pads ~1.4x, this ~1.02x
    assert padded(epochs[0]) < 1.05 * sum(lengths)
    assert epochs[0] != epochs[1]
    # batch order is shuffled, not longest first within each chunk (transformers' group_by_length)
    batch_max = [max(lengths[i] for i in epochs[0][j : j + 16]) for j in range(0, 800, 16)]
    assert batch_max != sorted(batch_max) and batch_max != sorted(batch_max, reverse=True)
    # the 5-row batch goes last: every 16 rows the loader cuts before it are one sorted run
    spreads = [
        max(lengths[i] for i in epochs[0][j : j + 16])
        - min(lengths[i] for i in epochs[0][j : j + 16])
        for j in range(0, len(lengths) - 5, 16)
    ]
    assert max(spreads) < 30


def test_sft_trainer_samples_length_batches_when_a_batch_holds_several_rows(base_dir, tmp_path):
    from pr1lib.training.sft import LengthBatches

    mcfg = model_config(base_dir)
    model, tok, lora = load_training_policy(mcfg)
    data, _ = sft_rows(rows(8), tok, 128)
    for size, grouped in ((4, True), (1, False)):
        trainer = build_trainer(
            train_cfg(per_device_train_batch_size=size),
            model,
            tok,
            lora,
            data,
            tmp_path / str(size),
            mcfg,
        )
        assert isinstance(trainer._get_train_sampler(), LengthBatches) is grouped


def test_cold_start_mix_shares_rows_between_sources_and_saves_one_set(tmp_path):
    from datasets import load_from_disk

    from pr1lib.training.sft import build_coldstart

    cfg = SFTStageConfig(train_n=9, source="tinygsm-easy+tinygsm-hard", profile="smoke")
    dataset = build_coldstart(cfg, "tiny", tmp_path)
    counts = {s: dataset["source"].count(s) for s in set(dataset["source"])}
    # the rule teacher keeps every TinyGSM problem
    assert counts == {"tinygsm-easy": 5, "tinygsm-hard": 4}
    assert dataset["source"] != sorted(dataset["source"])  # shuffled together, not easy then hard
    assert load_from_disk(str(tmp_path / "dataset"))["id"] == dataset["id"]
    with pytest.raises(ValueError, match="joined by '\\+'"):
        build_coldstart(cfg.replace(source="tinygsm-easy+tinygsm-easy"), "tiny", tmp_path / "x")


def test_plain_share_linearizes_a_seeded_subset_and_keeps_the_rest(tmp_path):
    from pr1lib.format.grammar import linearize, parallel_stats
    from pr1lib.training.sft import build_coldstart, with_plain_share

    dataset = build_coldstart(SFTStageConfig(train_n=40), "tiny", tmp_path)
    assert with_plain_share(dataset, 0.0) is dataset
    mixed = with_plain_share(dataset, 0.25, seed=1)
    assert mixed["parallel"].count(False) == 10 and mixed["id"] == dataset["id"]
    for before, after, kept in zip(dataset["completion"], mixed["completion"], mixed["parallel"]):
        assert after == (before if kept else linearize(before))
        assert parallel_stats(after)["blocks"] == int(kept)
    assert mixed["parallel"] == with_plain_share(dataset, 0.25, seed=1)["parallel"]
    assert mixed["parallel"] != with_plain_share(dataset, 0.25, seed=2)["parallel"]
    with pytest.raises(ValueError, match="within"):
        with_plain_share(dataset, 1.5)


# measured on 2026-12-01 (2-core VM, 1 thread): 100 samples (50 held-out easy problems x 2 at
# T = 1) after the run below were 76 % strictly valid with a block and 56 % correct
SHORT_SFT_MEASURED = {"valid_block_rate": 0.76, "accuracy": 0.56}


@pytest.mark.slow
@pytest.mark.skipif(
    not (REPO_ROOT / TINY_MODEL_DIR / "model.safetensors").exists(),
    reason="data/tiny-base not built",
)
def test_a_short_tiny_sft_learns_the_format(tmp_path):
    """A short full fine-tune of the shipped tiny model (1,000 rule-teacher traces, 3 epochs,
    ~2.5 min) must write valid blocks and keep answering: each rate stays above a floor 3 binomial
    standard deviations below its measured value (a broken collator, mask or loss falls far
    below)."""
    cfg = SFTStageConfig.for_profile(
        "tiny",
        train_n=1000,
        num_train_epochs=3.0,
        use_lora=False,
        learning_rate=1e-3,
        eval_n=50,
        eval_k=2,
    )
    after = run_sft(cfg, out=tmp_path, quiet=True).result["after"]
    samples = cfg.eval_n * cfg.eval_k
    for key, measured in SHORT_SFT_MEASURED.items():
        floor = measured - 3 * (measured * (1 - measured) / samples) ** 0.5
        assert after[key] >= floor, f"{key}: {after[key]:.2f} < floor {floor:.2f} ({measured})"

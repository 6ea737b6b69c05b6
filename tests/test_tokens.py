"""pr1lib.decoding.tokens on a byte-level BPE tokenizer and tiny random Qwen3 models built here (no
hub).

Run: .venv/bin/python -m pytest tests/test_tokens.py -q
"""

from __future__ import annotations

import copy

import pytest
import torch

from pr1lib.decoding.tokens import (
    add_parallel_tags,
    add_tag_tokens,
    embeddings_tied,
    lora_kwargs_for_tags,
    tag_pieces,
    tag_similarity,
    tag_token_ids,
)
from pr1lib.format.grammar import TAGS

EOS = "<|endoftext|>"
TRACE = "So <Parallel><Path>2+3=5</Path><Path>3+2=5</Path></Parallel>\n<Summary>5</Summary> ok"


@pytest.fixture(scope="module")
def base_tokenizer():
    """A 300-token byte-level BPE, the same kind of tokenizer as Qwen's, trained in milliseconds."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["Tom has 12 apples. Take the path to the park; the summary is short. 2 < 3 > 1"] * 20
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=EOS)


@pytest.fixture
def tokenizer(base_tokenizer):
    return copy.deepcopy(base_tokenizer)


def tiny_qwen3(vocab_size: int, tied: bool, seed: int = 0):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        tie_word_embeddings=tied,
    )
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(config)


def test_each_tag_becomes_one_token(tokenizer):
    assert all(len(tokenizer.encode(t, add_special_tokens=False)) > 1 for t in TAGS)
    add_parallel_tags(tokenizer)
    ids = tag_token_ids(tokenizer)
    assert list(ids) == list(TAGS) and len(set(ids.values())) == 6
    encoded = tokenizer.encode("x<Path>y</Path>z", add_special_tokens=False)
    assert ids["<Path>"] in encoded and ids["</Path>"] in encoded  # also glued to words


def test_tags_are_not_special_and_survive_skip_special_tokens(tokenizer):
    add_parallel_tags(tokenizer)
    assert not set(TAGS) & set(tokenizer.all_special_tokens)
    ids = tokenizer.encode(TRACE + EOS, add_special_tokens=False)
    assert tokenizer.decode(ids, skip_special_tokens=True) == TRACE  # eos gone, tags kept
    assert tokenizer.decode(ids, skip_special_tokens=False) == TRACE + EOS


def test_pieces_are_the_same_before_and_after_adding(tokenizer):
    before = tag_pieces(tokenizer)
    assert before == {t: tokenizer.encode(t, add_special_tokens=False) for t in TAGS}
    add_parallel_tags(tokenizer)
    assert tag_pieces(tokenizer) == before


def test_tag_token_ids_explains_missing_tags(tokenizer):
    with pytest.raises(ValueError, match="add_parallel_tags"):
        tag_token_ids(tokenizer)


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_new_rows_are_mean_of_pieces_finite_and_distinct(tokenizer, tied):
    model = tiny_qwen3(len(tokenizer), tied)
    pieces = tag_pieces(tokenizer)
    head_before = model.get_output_embeddings().weight.detach().clone()  # (V, H)
    ids = add_parallel_tags(tokenizer, model)
    embed = model.get_input_embeddings().weight  # (V + 6, H)
    assert embed.shape[0] == len(tokenizer) and embeddings_tied(model) is tied
    for tag, i in ids.items():
        torch.testing.assert_close(embed[i], embed[pieces[tag]].mean(0))
        torch.testing.assert_close(
            model.get_output_embeddings().weight[i], head_before[pieces[tag]].mean(0)
        )  # the head's own pieces
    rows = embed[list(ids.values())]  # (6, H)
    assert torch.isfinite(rows).all()
    assert torch.cdist(rows, rows)[~torch.eye(6, dtype=torch.bool)].min() > 1e-3
    sim = tag_similarity(model, tokenizer)
    assert sim.shape == (6, 6) and torch.allclose(sim.diagonal(), torch.ones(6))
    assert sim[~torch.eye(6, dtype=torch.bool)].max() < 0.9999


def test_naive_resize_gives_near_identical_rows_and_ours_does_not(tokenizer):
    naive = tiny_qwen3(len(tokenizer), tied=True)
    ours = tiny_qwen3(len(tokenizer), tied=True)
    naive_tok = copy.deepcopy(tokenizer)
    add_tag_tokens(naive_tok)
    naive.resize_token_embeddings(len(naive_tok))  # HF default: rows drawn around the mean
    add_parallel_tags(tokenizer, ours)
    off = ~torch.eye(6, dtype=torch.bool)
    naive_sim, our_sim = tag_similarity(naive, naive_tok)[off], tag_similarity(ours, tokenizer)[off]
    # the Qwen3-0.6B failure mode (docs/recipe.md#54-initial-embeddings-of-the-tags), in miniature
    assert naive_sim.min() > 0.99
    assert our_sim.mean() < naive_sim.min() - 0.2


def test_second_call_adds_and_reinitialises_nothing(tokenizer):
    model = tiny_qwen3(len(tokenizer), tied=True)
    ids = add_parallel_tags(tokenizer, model)
    with torch.no_grad():
        model.get_input_embeddings().weight[ids["<Path>"]] = 7.0  # as if training moved it
    size = len(tokenizer)
    assert add_parallel_tags(tokenizer, model) == ids and add_tag_tokens(tokenizer) == []
    assert len(tokenizer) == size and model.get_input_embeddings().weight.shape[0] == size
    assert (model.get_input_embeddings().weight[ids["<Path>"]] == 7.0).all()


def test_padded_vocabulary_is_not_resized(tokenizer):
    model = tiny_qwen3(len(tokenizer) + 26, tied=True)  # like Qwen3: rows beyond the tokenizer
    pieces = tag_pieces(tokenizer)
    ids = add_parallel_tags(tokenizer, model)
    embed = model.get_input_embeddings().weight
    assert embed.shape[0] == len(tokenizer) + 20  # unchanged
    torch.testing.assert_close(embed[ids["<Summary>"]], embed[pieces["<Summary>"]].mean(0))


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_lora_trains_exactly_the_tag_rows(tokenizer, tied):
    from peft import LoraConfig, get_peft_model

    model = tiny_qwen3(len(tokenizer), tied)
    ids = add_parallel_tags(tokenizer, model)
    kwargs = lora_kwargs_for_tags(tokenizer, model)
    assert isinstance(kwargs["trainable_token_indices"], list if tied else dict)
    before = [
        model.get_input_embeddings().weight.detach().clone(),
        model.get_output_embeddings().weight.detach().clone(),
    ]
    peft_model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj"], **kwargs))
    optimizer = torch.optim.SGD([p for p in peft_model.parameters() if p.requires_grad], lr=1.0)
    batch = torch.tensor([tokenizer.encode(TRACE)])  # (1, L)
    peft_model(input_ids=batch, labels=batch).loss.backward()
    optimizer.step()
    merged = peft_model.merge_and_unload()
    tag_rows = torch.zeros(before[0].shape[0], dtype=torch.bool)
    tag_rows[list(ids.values())] = True
    for old, new in zip(
        before, [merged.get_input_embeddings().weight, merged.get_output_embeddings().weight]
    ):
        assert torch.equal(old[~tag_rows], new[~tag_rows])  # nothing else moved
        assert (old[tag_rows] - new[tag_rows]).abs().sum(-1).min() > 0  # every tag row moved


def test_four_bit_model_on_cpu(tokenizer, tmp_path):
    pytest.importorskip("bitsandbytes")
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    tiny_qwen3(len(tokenizer), tied=False).save_pretrained(tmp_path)
    quant = BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float32
    )
    try:
        model = AutoModelForCausalLM.from_pretrained(
            tmp_path, quantization_config=quant, device_map="cpu"
        )
    except Exception as err:  # a bitsandbytes build without CPU support
        pytest.skip(f"4-bit loading is not available on this CPU: {err}")
    assert "4bit" in type(model.model.layers[0].self_attn.q_proj).__name__
    pieces = tag_pieces(tokenizer)
    ids = add_parallel_tags(tokenizer, model)
    embed = model.get_input_embeddings().weight  # not quantized: a float (V + 6, H) matrix
    torch.testing.assert_close(embed[ids["</Parallel>"]], embed[pieces["</Parallel>"]].mean(0))
    logits = model(input_ids=torch.tensor([tokenizer.encode(TRACE)])).logits  # (1, L, V + 6)
    assert logits.shape[-1] == len(tokenizer) and torch.isfinite(logits).all()

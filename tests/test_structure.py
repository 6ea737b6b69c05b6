"""pr1lib.decoding.structure: the unseen mask and positions (the rules of
docs/recipe.md#5-stage-1-cold-start-sft)."""

from __future__ import annotations

import pytest
import torch
from _tiny import ids, one_thread, toy_model, toy_tokenizer
from hypothesis import given, settings
from hypothesis import strategies as st

from pr1lib.decoding.structure import (
    TagIds,
    allowed_mask,
    attention_inputs,
    parse,
    structure_tensors,
    structured_logprobs,
    tag_ids,
)

ATOL = 1e-5
TOK = toy_tokenizer()
T = tag_ids(TOK)
P, EP, PA, EPA, S, ES = T.parallel, T.end_parallel, T.path, T.end_path, T.summary, T.end_summary


@pytest.fixture(scope="module", autouse=True)
def _threads():
    yield from one_thread()


@pytest.fixture(scope="module")
def model():
    return toy_model(len(TOK))


def tokens(text: str) -> list[int]:
    return ids(TOK, text)


def logits(
    model, seq: list[int] | torch.Tensor, mode: str = "unseen", attn: str = "sdpa", start=None
) -> torch.Tensor:
    x = torch.as_tensor(seq)[None] if not torch.is_tensor(seq) or seq.dim() == 1 else seq  # (B, L)
    inputs = attention_inputs(x, TOK, mode, start, attn)
    with torch.no_grad():
        return model(input_ids=x, use_cache=False, **inputs).logits  # (B, L, V)


# A worked example: q0 q1 q2 <Parallel> <Path> a1 a2 </Path> <Path> b1 b2 b3 </Path> …
HEAD = tokens("qrs") + [P, PA] + tokens("ab") + [EPA, PA] + tokens("cde") + [EPA]


def test_golden_summary_inside_block():
    seq = HEAD + [S] + tokens("t") + [ES, EP] + tokens("z")
    s = parse(seq, T)
    assert s.positions == [0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]
    real = torch.ones(1, len(seq), dtype=torch.bool)
    allowed = allowed_mask(torch.tensor([s.block]), torch.tensor([s.path]), real)[0]
    attends = {q: allowed[q].nonzero().squeeze(1).tolist() for q in range(len(seq))}
    assert attends[7] == list(range(8))
    assert attends[8] == [0, 1, 2, 3, 8]
    assert attends[11] == [0, 1, 2, 3, 8, 9, 10, 11]
    assert attends[13] == list(range(14))  # the summary sees everything
    assert s.spans() == [(0, 4, 8), (0, 8, 13)]


def test_golden_official_layout():
    seq = HEAD + [EP] + tokens("\n") + [S] + tokens("t") + [ES]
    s = parse(seq, T, strict=True)
    assert s.positions[13:] == [9, 10, 11, 12, 13]  # </Parallel> = max path end + 1
    assert s.path[13:] == [-1] * 5


def test_structure_read_only_from_response_start():
    seq = [P, PA] + tokens("a") + [EPA, PA] + tokens("b") + [EPA, EP]
    assert parse(seq, T, start=len(seq)).positions == list(range(len(seq)))
    assert parse(seq, T, start=0).positions == [0, 1, 2, 3, 1, 2, 3, 4]


@pytest.mark.parametrize(
    "bad",
    [
        [P, PA, 5, EPA, P, PA, 6, EPA, EP, EP],  # nested block
        [P, PA, 5, EPA, 7, PA, 6, EPA, EP],  # stray token between paths
        [5, EPA, 6],  # </Path> outside a block
        [P, EP],  # block without a path
    ],
)
def test_strict_rejects_malformed(bad):
    with pytest.raises(ValueError, match="malformed"):
        parse(bad, T, strict=True)
    parse(bad, T)  # lenient: never raises


def test_lenient_rules():
    # glue between paths belongs to the preceding path: the next sibling cannot see it
    s = parse([P, PA, 5, EPA, 7, PA, 6, EPA, EP], T)
    assert s.path == [-1, 0, 0, 0, 0, 1, 1, 1, -1] and s.positions == [0, 1, 2, 3, 4, 1, 2, 3, 5]
    # inside a path only </Path> closes it; a truncated block keeps its open path
    s = parse([P, PA, 5, P, EP, PA], T)
    assert s.path == [-1, 0, 0, 0, 0, 0] and s.positions == [0, 1, 2, 3, 4, 5]
    # tokens between <Parallel> and the first <Path> are shared; paths start after them
    s = parse([P, 9, PA, 5, EPA, PA, 6, EPA, EP], T)
    assert s.positions == [0, 1, 2, 3, 4, 2, 3, 4, 5] and s.path[1] == -1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([P, EP, PA, EPA, S, ES, 5, 6]), max_size=40), st.integers(0, 40))
def test_parse_is_prefix_consistent(seq, cut):
    """A truncated sequence parses as the prefix of the full parse (rollouts cut at the budget)."""
    full, part = parse(seq, T), parse(seq[:cut], T)
    n = min(cut, len(seq))
    assert (part.positions, part.path, part.block) == (
        full.positions[:n],
        full.path[:n],
        full.block[:n],
    )


def test_sibling_invariance(model):
    base = HEAD + [EP, S] + tokens("t")
    other = list(base)
    other[5:7] = tokens("xy")  # change path 1, same length
    a, b = logits(model, base), logits(model, other)
    torch.testing.assert_close(a[0, 8:13], b[0, 8:13], atol=ATOL, rtol=0)  # path 2 unchanged
    assert (a[0, 13:] - b[0, 13:]).abs().max() > 1e-3  # the summary sees path 1


def test_path_equals_plain_causal_forward(model):
    full = logits(model, HEAD + [EP, S])
    prefix = HEAD[:4]
    for lo, hi in ((4, 8), (8, 13)):
        alone = logits(model, prefix + HEAD[lo:hi], mode="seen")
        torch.testing.assert_close(full[0, lo:hi], alone[0, 4:], atol=ATOL, rtol=0)


def test_backends_agree():
    seq = torch.tensor([HEAD + [EP, S] + tokens("t")])
    ref = logits(toy_model(len(TOK), attn="eager"), seq, attn="eager")
    sdpa = toy_model(len(TOK), attn="sdpa")
    torch.testing.assert_close(logits(sdpa, seq), ref, atol=ATOL, rtol=0)  # sdpa + bool
    float_mask = attention_inputs(seq, TOK, attn_implementation="eager")
    with torch.no_grad():
        out = sdpa(input_ids=seq, use_cache=False, **float_mask).logits
    torch.testing.assert_close(out, ref, atol=ATOL, rtol=0)  # sdpa + additive float


def flex_unavailable() -> str | None:
    """Why flex attention cannot run on this torch / transformers build (``None``: it can): the
    import, one trivial ``create_block_mask`` and one ``flex_attention`` call on tiny tensors.
    Only this probe may skip the test; an error in the code under test fails it."""
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        from transformers.utils import is_torch_flex_attn_available

        if not is_torch_flex_attn_available():
            return "transformers says flex attention is unavailable"
        mask = create_block_mask(lambda b, h, q, k: k <= q, 1, None, 4, 4, device="cpu")
        q = torch.zeros(1, 1, 4, 8)  # (B, H, L, D)
        flex_attention(q, q, q, block_mask=mask)
    except Exception as err:  # pragma: no cover - depends on the torch build
        return f"{type(err).__name__}: {err}"
    return None


def test_flex_block_mask_agrees():
    if (why := flex_unavailable()) is not None:  # pragma: no cover - depends on the torch build
        pytest.skip(f"flex attention unavailable here: {why}")
    seq = torch.tensor([HEAD + [EP, S] + tokens("t")])
    got = logits(toy_model(len(TOK), attn="flex_attention"), seq, attn="flex_attention")
    ref = logits(toy_model(len(TOK), attn="eager"), seq, attn="eager")
    torch.testing.assert_close(got, ref, atol=ATOL, rtol=0)


def test_eager_gets_float_and_bool_would_be_ignored():
    seq = torch.tensor([HEAD + [EP, S]])
    eager = toy_model(len(TOK), attn="eager")
    inputs = attention_inputs(seq, TOK, attn_implementation="eager")
    assert inputs["attention_mask"].dtype == torch.float32
    as_bool = attention_inputs(seq, TOK, attn_implementation="sdpa")
    with torch.no_grad():
        right = eager(input_ids=seq, use_cache=False, **inputs).logits
        wrong = eager(input_ids=seq, use_cache=False, **as_bool).logits
    assert (right - wrong).abs().max() > 1e-3  # the trap: a bool mask is added as 0/1 under eager


def test_packed_sequence_trap_and_guard(model, monkeypatch):
    seq = torch.tensor([HEAD + [EP, S]])
    inputs = attention_inputs(seq, TOK)
    with torch.no_grad():
        masked = model(input_ids=seq, use_cache=False, **inputs).logits
        no_mask = model(input_ids=seq, use_cache=False, position_ids=inputs["position_ids"]).logits
    assert (masked[0, 8:] - no_mask[0, 8:]).abs().max() > 1e-3  # restart read as a new sequence
    seen = []
    forward = model.forward
    monkeypatch.setattr(
        model, "forward", lambda **kw: seen.append(kw["attention_mask"]) or forward(**kw)
    )
    structured_logprobs(model, seq, TOK)
    assert seen and all(m is not None and m.dim() == 4 for m in seen)


def test_padding_batch_equals_single_runs(model):
    a, b = HEAD + [EP, S], tokens("hello") + [P, PA] + tokens("x") + [EPA]
    pad = T.pad
    batch = torch.tensor([a, b + [pad] * (len(a) - len(b))])
    out = logits(model, batch)
    assert not torch.isnan(out).any()
    torch.testing.assert_close(out[0], logits(model, a)[0], atol=ATOL, rtol=0)
    torch.testing.assert_close(out[1, : len(b)], logits(model, b)[0], atol=ATOL, rtol=0)
    left = torch.tensor([[pad] * (len(a) - len(b)) + b])  # left padding through an explicit mask
    real = (torch.arange(len(a)) >= len(a) - len(b)).long()[None]
    inputs = attention_inputs(left, TOK, padding_mask=real, attn_implementation="eager")
    with torch.no_grad():
        got = toy_model(len(TOK), attn="eager")(input_ids=left, use_cache=False, **inputs).logits
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got[0, len(a) - len(b) :], logits(model, b)[0], atol=ATOL, rtol=0)


def test_seen_and_unseen_summary_differ(model):
    seq = HEAD + [EP, S] + tokens("t")
    seen, unseen = logits(model, seq, "seen"), logits(model, seq, "unseen")
    # identical before path 2
    torch.testing.assert_close(seen[0, :8], unseen[0, :8], atol=ATOL, rtol=0)
    assert (seen[0, 13:] - unseen[0, 13:]).abs().max() > 1e-3
    st_seen = structure_tensors(torch.tensor([seq]), TOK, "seen")
    assert (
        st_seen["position_ids"][0].tolist() == list(range(len(seq)))
        and (st_seen["path"] == -1).all()
    )


def test_structured_logprobs_match_log_softmax(model):
    seq = torch.tensor([HEAD + [EP, S]])
    full = structured_logprobs(model, seq, TOK)  # (1, L)
    ref = torch.log_softmax(logits(model, seq)[0, :-1], -1).gather(-1, seq[0, 1:, None]).squeeze(-1)
    torch.testing.assert_close(full[0, 1:], ref, atol=ATOL, rtol=0)
    torch.testing.assert_close(
        structured_logprobs(model, seq, TOK, logits_to_keep=5), full[:, -5:], atol=ATOL, rtol=0
    )


def test_tag_ids_and_api_drift_guards(model):
    assert tag_ids(T) is T and isinstance(T, TagIds) and T.pad == TOK.pad_token_id
    from transformers import DynamicCache
    from transformers.masking_utils import create_causal_mask

    mask = torch.ones(1, 1, 3, 3, dtype=torch.bool)
    emb = torch.zeros(1, 3, model.config.hidden_size)
    assert (
        create_causal_mask(
            config=model.config,
            inputs_embeds=emb,
            attention_mask=mask,
            cache=None,
            position_ids=None,
        )
        is mask
    )  # 4D masks pass through as-is
    kv = [(torch.zeros(1, 2, 4, 16), torch.zeros(1, 2, 4, 16)) for _ in range(2)]
    cache = DynamicCache(kv)
    cache.crop(-1)  # 5.x: a negative count of tokens to drop
    assert cache.get_seq_length() == 3
    with pytest.raises(ValueError):
        cache.crop(2)
    with pytest.raises(ValueError, match="2D"):
        model.generate(
            torch.tensor([[5, 6]]), attention_mask=torch.ones(1, 1, 2, 2), max_new_tokens=1
        )


def test_tokenizer_without_tags_is_a_clear_error():
    class NoTags:
        unk_token_id, pad_token_id = 1, 0

        def convert_tokens_to_ids(self, tokens):
            return [1] * len(tokens)

    with pytest.raises(ValueError, match="lacks"):
        tag_ids(NoTags())

"""pr1lib.decoding.rollout: forked decoding equals the masked full forward, re-read decoding the
causal one; recorded == recomputed log-probs; the block limit."""

from __future__ import annotations

import pytest
import torch
from _tiny import ids, one_thread, steer, toy_model, toy_tokenizer

from pr1lib.config import RolloutConfig
from pr1lib.decoding.engine import Engine
from pr1lib.decoding.kvcache import Streams, new_cache
from pr1lib.decoding.rollout import Rollout, as_columns, generate, rollout_logprobs, sample_tokens
from pr1lib.decoding.structure import attention_inputs, parse, tag_ids

TOK = toy_tokenizer()
T = tag_ids(TOK)
P, EP, PA, EPA, S, ES = T.parallel, T.end_parallel, T.path, T.end_path, T.summary, T.end_summary
EOS, NL = TOK.eos_token_id, ids(TOK, "\n")
PROMPTS = ["Q: 2+3?\n", "Q: a longer question here?\n", "Hi", "Q: x\n"]
CFG = RolloutConfig(max_completion_length=70, max_path_length=20)


def tokens(text: str) -> list[int]:
    return ids(TOK, text)


@pytest.fixture(scope="module", autouse=True)
def _threads():
    yield from one_thread()


@pytest.fixture(scope="module")
def model():
    return toy_model(len(TOK))


@pytest.fixture(scope="module")
def steered():
    """Emits <Parallel> early, closes paths and summaries after a few tokens (unequal lengths)."""
    return steer(toy_model(len(TOK), seed=1), {P: 4.0, EPA: 2.5, ES: 2.0, EOS: 0.5})


def full_logits(model, seq: list[int]) -> torch.Tensor:
    x = torch.tensor([seq])  # (1, L)
    with torch.no_grad():
        return model(input_ids=x, use_cache=False, **attention_inputs(x, TOK)).logits[0]  # (L, V)


def run(model, seed: int = 0, prompts=PROMPTS, **kw) -> list[Rollout]:
    return generate(model, TOK, prompts, CFG, generator=torch.Generator().manual_seed(seed), **kw)


def max_gap(
    model, rollouts: list[Rollout], mode: str = "forked", temperature: float = 1.0
) -> float:
    again = rollout_logprobs(model, TOK, rollouts, mode, temperature)
    return max(
        (torch.tensor(r.logprobs) - torch.tensor(lp)).abs().max().item()
        for r, lp in zip(rollouts, again)
    )


def test_fork_and_merge_equal_masked_forward(model):
    """Teacher-forced: prefix -> k rows with unequal paths (holes) -> KV concatenation ->
    summary."""
    prefix = tokens("Q: hi") + [P]
    paths = [[PA] + tokens("ab") + [EPA], [PA] + tokens("cdefg") + [EPA], [PA, EPA]]
    tail = [EP] + NL + [S] + tokens("ok") + [ES]
    full = full_logits(model, prefix + sum(paths, []) + tail)  # (L, V)
    other = tokens("a distractor row")  # another prompt decoding alongside, never mixed in
    st = Streams(model)
    with torch.no_grad():
        first = st.prefill([prefix, other], T.pad)  # (2, V)
        torch.testing.assert_close(first[0], full[len(prefix) - 1], atol=1e-5, rtol=0)
        n = st.n_real(0)
        pos = st.pos.tolist()
        st.regroup([[(0, 0, n)]] * 3 + [[(1, 0, st.n_real(1))]], [pos[0]] * 3 + [pos[1]])
        starts = [len(prefix) + sum(len(p) for p in paths[:j]) for j in range(3)]
        for t in range(max(len(p) for p in paths)):
            live = [t < len(p) for p in paths] + [True]
            feed = [p[t] if t < len(p) else T.pad for p in paths] + [5]
            out = st.step(torch.tensor(feed), torch.tensor(live))  # (4, V)
            for j in range(3):
                if live[j]:
                    torch.testing.assert_close(out[j], full[starts[j] + t], atol=1e-5, rtol=0)
        plan = [
            [(0, 0, st.n_real(0))] + [(j, n, st.n_real(j)) for j in (1, 2)],
            [(3, 0, st.n_real(3))],
        ]
        st.regroup(plan, [max(st.pos[:3].tolist()), int(st.pos[3])])
        # compacted: prefix + sum of paths
        assert st.n_real(0) == len(prefix) + sum(len(p) for p in paths)
        assert st.cache.get_seq_length() == max(st.n_real(0), st.n_real(1))
        at = len(prefix) + sum(len(p) for p in paths)
        for i, tok in enumerate(tail):
            out = st.step(torch.tensor([tok, 6]), torch.tensor([True, True]))
            torch.testing.assert_close(out[0], full[at + i], atol=1e-5, rtol=0)


def test_dropping_rows_moves_only_the_last_rows_into_the_gaps(model):
    """A regroup that only drops rows (the engine puts the last rows into the freed places,
    ``_from_tail``) copies those rows within the cache's own memory; the next step's logits are
    the first engine's, which rebuilds the cache."""
    from pr1lib.decoding.kvcache import storage
    from pr1lib.decoding.regroup import _from_tail

    keep = [(object(), [(old, 0, 9)], 0) for old in (0, 2, 5, 6)]  # rows 1, 3, 4 dropped
    assert [p[0][0] for _, p, _ in _from_tail(keep)] == [0, 5, 2, 6]
    forks = [(object(), [(0, 0, 9)], 0)] * 2
    assert _from_tail(forks) == forks  # a fork repeats a row: no reordering
    prompts = [tokens(f"Q: {t}") for t in ("one", "two", "six", "ten", "end")]  # no holes
    fast, first = Streams(model), Streams(model, buffered=False)
    with torch.no_grad():
        for st in (fast, first):
            st.prefill(prompts, T.pad)
            st.step(torch.tensor([5, 6, 7, 8, 9]), torch.ones(5, dtype=torch.bool))
        memory = storage(fast.cache.layers[0])[0].data_ptr()
        rows = [0, 4, 2]  # rows 1 and 3 end; row 4 moves into place 1
        for st in (fast, first):
            st.regroup([[(r, 0, st.n_real(r))] for r in rows], st.pos[rows].tolist())
        assert storage(fast.cache.layers[0])[0].data_ptr() == memory
        feed, live = torch.tensor([10, 11, 12]), torch.ones(3, dtype=torch.bool)
        torch.testing.assert_close(fast.step(feed, live), first.step(feed, live), atol=1e-5, rtol=0)


def test_recorded_logprobs_equal_recomputed_forked(steered):
    rollouts = run(steered)
    lengths = [lens for r in rollouts for lens in r.path_lengths]
    assert any(len(set(lens)) > 1 for lens in lengths), "expected paths of unequal length"
    assert sum(r.blocks for r in rollouts) >= 3
    assert max_gap(steered, rollouts) < 1e-4


def test_recorded_equal_recomputed_with_temperature_top_p_and_three_paths(steered):
    rollouts = run(steered, seed=3, num_paths=3, temperature=0.7, top_p=0.9)
    assert any(len(lens) == 3 for r in rollouts for lens in r.path_lengths)
    assert max_gap(steered, rollouts, temperature=0.7) < 1e-4


def test_trainer_layout_left_padded_prompts(steered):
    """TRL's layout: left-padded prompts, right-padded completions, scored with logits_to_keep."""
    from pr1lib.decoding.structure import structured_logprobs

    rollouts = run(steered, seed=11)
    wp, wc = max(len(r.prompt_ids) for r in rollouts), max(len(r.completion_ids) for r in rollouts)
    rows = [
        [T.pad] * (wp - len(r.prompt_ids))
        + r.prompt_ids
        + r.completion_ids
        + [T.pad] * (wc - len(r.completion_ids))
        for r in rollouts
    ]
    real = [
        [0] * (wp - len(r.prompt_ids))
        + [1] * (len(r.prompt_ids) + len(r.completion_ids))
        + [0] * (wc - len(r.completion_ids))
        for r in rollouts
    ]
    with torch.no_grad():
        lp = structured_logprobs(
            steered,
            torch.tensor(rows),
            TOK,
            "unseen",
            [wp] * len(rows),
            padding_mask=torch.tensor(real),
            logits_to_keep=wc,
        )  # (B, wc)
    assert lp.shape == (len(rollouts), wc)
    for b, r in enumerate(rollouts):
        got = lp[b, : len(r.completion_ids)]
        torch.testing.assert_close(got, torch.tensor(r.logprobs), atol=1e-4, rtol=0)


def test_seen_mode_is_plain_decoding(steered):
    rollouts = run(steered, mode="seen")
    assert all(sum(r.forced) == 0 and r.blocks == r.completion_ids.count(P) for r in rollouts)
    assert sum(r.blocks for r in rollouts) > 0
    assert max_gap(steered, rollouts, mode="seen") < 1e-4


def forced_ok(r: Rollout) -> None:
    """Every forced token is a structural insert at its place; everything else was sampled."""
    c = r.completion_ids
    s = parse(c, T)
    for i, (tok, f) in enumerate(zip(c, r.forced)):
        starts_path = tok == PA and s.path[i] >= 0 and (i == 0 or s.path[i - 1] != s.path[i])
        after_paths = tok == EP and s.block[i] >= 0 and s.path[i] < 0
        if starts_path or after_paths:
            assert f == 1
        if tok == EP and after_paths and i + len(NL) + 1 < len(c):
            assert c[i + 1 : i + 2 + len(NL)] == NL + [S] and r.forced[i + 1 : i + 2 + len(NL)] == [
                1
            ] * (len(NL) + 1)
        if f:
            assert tok in (PA, EPA, EP, S, ES, *NL)
        assert not (tok == P and s.path[i] >= 0), "<Parallel> inside a path"
    assert r.env_mask == [1 - f for f in r.forced]


def test_forced_tokens_and_loss_mask(steered):
    rollouts = run(steered, seed=5)
    for r in rollouts:
        forced_ok(r)
        # every <Parallel> forked: none inside paths/summaries
        assert r.completion_ids.count(P) == r.blocks
        assert sum(r.env_mask) == len(r.completion_ids) - sum(r.forced)
        assert len(r.logprobs) == len(r.completion_ids) <= CFG.max_completion_length
        assert all(n <= CFG.max_path_length for lens in r.path_lengths for n in lens)
        for (_, a, b), n in zip(parse(r.completion_ids, T).spans(), sum(r.path_lengths, [])):
            assert b - a == n or b == len(r.completion_ids)  # spans agree unless cut by the budget
    cols = as_columns(rollouts)
    assert cols["completion_ids"][0] == rollouts[0].completion_ids and len(cols["env_mask"]) == len(
        PROMPTS
    )


def test_eos_in_path_and_summary_is_replaced_by_closer():
    eager_eos = steer(toy_model(len(TOK), seed=2), {P: 6.0, EOS: 3.0})
    rollouts = run(eager_eos, seed=1)
    closers = 0
    for r in rollouts:
        forced_ok(r)
        s = parse(r.completion_ids, T)
        # no eos inside a path
        assert all(s.path[i] < 0 for i, t in enumerate(r.completion_ids) if t == EOS)
        closers += sum(f for t, f in zip(r.completion_ids, r.forced) if t in (EPA, ES))
    assert closers > 0
    assert max_gap(eager_eos, rollouts) < 1e-4


def test_block_cap_masks_parallel(steered):
    greedy_parallel = steer(toy_model(len(TOK), seed=1), {P: 8.0, EPA: 2.5, ES: 3.0})
    for mode in ("forked", "seen"):
        for r in run(greedy_parallel, mode=mode, max_blocks=1):
            assert r.blocks == 1 and r.completion_ids.count(P) == 1


def test_path_cap_forces_closer():
    no_close = steer(toy_model(len(TOK), seed=3), {P: 8.0, EPA: -30.0, EOS: -30.0})
    rollouts = run(no_close, prompts=["Hi"], max_path_length=6, max_completion_length=40)
    r = rollouts[0]
    assert r.path_lengths[0] == [6, 6]
    last = [i for i, t in enumerate(r.completion_ids) if t == EPA]
    assert all(r.forced[i] == 1 for i in last)
    assert max_gap(no_close, rollouts) < 1e-4


def test_batch_equals_single_runs(steered):
    batch = run(steered, temperature=0.0)
    for prompt, r in zip(PROMPTS, batch):
        alone = run(steered, prompts=[prompt], temperature=0.0)[0]
        assert alone.completion_ids == r.completion_ids
        torch.testing.assert_close(
            torch.tensor(alone.logprobs), torch.tensor(r.logprobs), atol=1e-5, rtol=0
        )
        assert not any(torch.isnan(torch.tensor(r.logprobs)))


def test_text_keeps_tags_and_config_presets(steered):
    r = run(steered, seed=7, prompts=["Hi"])[0]
    assert "<Parallel><Path>" in r.text and r.text == TOK.decode(
        [t for t in r.completion_ids if t != EOS]
    )
    assert RolloutConfig.for_profile("paper").max_completion_length == 3000
    with pytest.raises(ValueError):
        run(steered, mode="nope")


def test_engine_under_eager_attention():
    eager = steer(toy_model(len(TOK), seed=1, attn="eager"), {P: 4.0, EPA: 2.5, ES: 2.0, EOS: 0.5})
    rollouts = run(eager, seed=2)
    assert any(r.path_lengths for r in rollouts)
    assert max_gap(eager, rollouts) < 1e-4


def first_block_paths(r: Rollout) -> list[list[int]]:
    """The token lists of the first block's paths (tags stripped)."""
    ids_ = r.completion_ids
    start, end = ids_.index(P), ids_.index(EP)
    paths, cur = [], None
    for t in ids_[start + 1 : end]:
        if t == PA:
            cur = []
        elif t == EPA:
            paths.append(cur)
        else:
            cur.append(t)
    return paths


def test_greedy_forked_paths_open_with_distinct_tokens(steered):
    """Sibling paths share their context exactly, so plain argmax makes copies; the engine's greedy
    mode opens path 2 with the second most likely token that does not close it."""
    cfg = CFG.replace(temperature=0.0)
    same = generate(steered, TOK, PROMPTS, cfg.replace(distinct_greedy_paths=False))
    distinct = generate(steered, TOK, PROMPTS, cfg)
    copies = [first_block_paths(r) for r in same if r.path_lengths]
    assert copies and all(a == b for a, b in copies)
    for r in distinct:
        if not r.path_lengths:
            continue
        (a, b), prefix = (
            first_block_paths(r),
            r.prompt_ids + r.completion_ids[: r.completion_ids.index(P) + 2],
        )
        logits = full_logits(steered, prefix)[-1]  # (V,) after <Parallel><Path>
        logits[P] = float("-inf")  # no nesting: the engine bans <Parallel> inside paths
        ranked = [t for t in logits.argsort(descending=True).tolist() if t not in (EPA, EOS)]
        # path 1: plain argmax (an empty path if it closes)
        assert (a[0] if a else EPA) == logits.argmax().item()
        assert b[0] == ranked[1] and a[:1] != b[:1]
    assert max_gap(steered, distinct, temperature=0.0) < 1e-4  # greedy: log-probs at T = 1, not NaN


# ------------------------------------------------------------------ reread mode, the block limit
def test_reread_merge_equals_causal_forward(model):
    """Teacher-forced: prefix -> 2 rows -> keep path 1's row, re-read path 2 onto it -> summary,
    all equal to one plain causal forward over the linearized sequence."""
    prefix = tokens("Q: hi") + [P]
    paths = [[PA] + tokens("abc") + [EPA], [PA] + tokens("defgh") + [EPA]]
    tail = [EP] + NL + [S] + tokens("ok") + [ES]
    seq = prefix + sum(paths, []) + tail
    with torch.no_grad():
        full = model(torch.tensor([seq])).logits[0]  # (L, V) causal, sequential positions
        st = Streams(model)
        st.prefill([prefix, tokens("other")], T.pad)
        st.regroup([[(0, 0, len(prefix))]] * 2 + [[(1, 0, st.n_real(1))]], [len(prefix)] * 2 + [5])
        for t in range(max(map(len, paths))):
            live = [t < len(p) for p in paths] + [True]
            feed = [p[t] if t < len(p) else T.pad for p in paths] + [7]
            st.step(torch.tensor(feed), torch.tensor(live))
        again = torch.tensor([[T.pad] * len(paths[1]), paths[1], [T.pad] * len(paths[1])])  # (3, q)
        live = torch.tensor([[False], [True], [False]]).expand(-1, len(paths[1]))  # (3, q)
        out = st.extend(again[[1, 0, 2]], live[[1, 0, 2]])  # path 1's row (0) re-reads path 2
        at = len(prefix) + len(paths[0])
        torch.testing.assert_close(out[0], full[at : at + len(paths[1])], atol=1e-5, rtol=0)
        st.regroup([[(0, 0, st.n_real(0))], [(2, 0, st.n_real(2))]], [st.pos[0], st.pos[2]])
        for i, tok in enumerate(tail):
            out = st.step(torch.tensor([tok, 8]), torch.tensor([True, True]))  # (2, V)
            torch.testing.assert_close(out[0], full[at + len(paths[1]) + i], atol=1e-5, rtol=0)


def spy(monkeypatch) -> list[tuple[int, str, int, int, torch.Tensor]]:
    """Record every decision's logits as ``(sample, kind, path index, tokens before, logits)``;
    tokens before count the row's own path buffer for paths, the completion otherwise."""
    calls, decide = [], Engine.decide

    def wrapped(self, logits):
        for i, row in enumerate(self.rows):
            if not row.waiting:
                done = row.buf if row.kind == "path" else self.samples[row.sample]
                calls.append(
                    (row.sample, row.kind, row.index, len(done.completion_ids), logits[i].clone())
                )
        decide(self, logits)

    monkeypatch.setattr(Engine, "decide", wrapped)
    return calls


def script_path_one(monkeypatch) -> list[int]:
    """Path 1 of every block writes the returned list's tokens (fill it in), then ``</Path>``,
    instead of what it samples."""
    path_step, script = Engine.path_step, []

    def scripted(self, i, row, tok, lp):
        if row.index == 0 and not row.closing:
            n = len(row.buf.completion_ids) - 1  # tokens after its <Path>
            tok = script[n] if n < len(script) else EPA
            lp = self.lp(i, tok)
        path_step(self, i, row, tok, lp)

    monkeypatch.setattr(Engine, "path_step", scripted)
    return script


def test_reread_path_two_never_sees_path_one(monkeypatch, steered):
    """Path 1 changes, path 2's logits and sampled tokens (same generator) do not; its recorded
    log-probs do change: they are the causal ones over path 1, as the seen trainer scores them."""
    calls, script, runs = spy(monkeypatch), script_path_one(monkeypatch), []
    for text in ("aaaa", "zyxw"):
        script[:], start = tokens(text), len(calls)
        r = run(steered, seed=4, prompts=["Hi"], mode="reread")[0]
        kinds = [c[1] for c in calls[start:]] + ["summary"]
        block = calls[start : start + kinds.index("summary")]  # until the first summary
        two = {n: lg for _, kind, j, n, lg in block if kind == "path" and j == 1}
        runs.append((r, first_block_paths(r), two))
        assert max_gap(steered, [r], mode="reread") < 1e-4
    (r1, paths1, two1), (r2, paths2, two2) = runs
    assert paths1[0] == tokens("aaaa") and paths2[0] == tokens("zyxw") and paths1[1] == paths2[1]
    assert two1.keys() == two2.keys() and len(two1) == len(paths1[1]) + 2  # <Path> .. </Path> fed
    for n in two1:
        torch.testing.assert_close(two1[n], two2[n], atol=1e-5, rtol=0)
    a = r1.completion_ids.index(EPA) + 2  # path 2's first token after its <Path>
    assert r1.completion_ids[a : a + 3] == r2.completion_ids[a : a + 3]
    assert r1.logprobs[a : a + 3] != pytest.approx(r2.logprobs[a : a + 3], abs=1e-4)


@pytest.mark.parametrize("mode", ["reread", "forked", "seen"])
def test_trunk_and_summary_logits_equal_the_trainers_forward(monkeypatch, steered, mode):
    """Every trunk and summary decision equals one forward over the linearized sequence: plain
    causal for ``reread`` and ``seen``, the unseen mask (restarted positions) for ``forked``."""
    calls = spy(monkeypatch)
    rollouts = run(steered, seed=2, mode=mode)
    checked = {"trunk": 0, "summary": 0}
    for b, r in enumerate(rollouts):
        x = torch.tensor([r.prompt_ids + r.completion_ids])  # (1, L)
        with torch.no_grad():
            extra = attention_inputs(x, TOK) if mode == "forked" else {}
            full = steered(input_ids=x, use_cache=False, **extra).logits[0]  # (L, V)
        for smp, kind, _, n, logits in calls:
            if smp == b and kind != "path":
                at = len(r.prompt_ids) + n - 1  # the token the row has just fed
                torch.testing.assert_close(logits, full[at], atol=1e-5, rtol=0)
                checked[kind] += 1
    assert checked["trunk"] > 0 and (checked["summary"] > 0 or mode == "seen")


def test_recorded_logprobs_equal_recomputed_reread(steered):
    """The seen trainer's causal scoring reproduces every recorded log-prob (re-read path tokens
    included); the re-read tokens are counted: paths 2..k of every block."""
    for kw in ({}, dict(num_paths=3, temperature=0.7, top_p=0.9), dict(temperature=0.0)):
        stats: dict = {}
        rollouts = run(steered, seed=3, mode="reread", stats=stats, **kw)
        assert sum(r.blocks for r in rollouts) >= 3
        assert max_gap(steered, rollouts, "reread", kw.get("temperature", 1.0)) < 1e-4
        reread = sum(sum(n[1:]) for r in rollouts for n in r.path_lengths)  # paths 2..k
        assert stats["reprefill_tokens"] == reread
        for r in rollouts:
            forced_ok(r)


@pytest.mark.parametrize("mode", ["forked", "reread", "seen"])
def test_block_limit_stop_and_mask(mode):
    """``stop`` (the paper): the sample ends with the 4th block's </Summary>, no 5th block;
    ``mask``: <Parallel> is banned and decoding goes on to the budget."""
    eager_blocks = steer(toy_model(len(TOK), seed=1), {P: 8.0, EPA: 2.5, ES: 3.0, EOS: -30.0})
    cfg = dict(mode=mode, max_completion_length=160, max_path_length=8)
    for r in run(eager_blocks, prompts=PROMPTS[:2], **cfg):
        c = r.completion_ids
        assert r.blocks == c.count(P) == 4 and c[-1] == ES and r.finish_reason == "block_limit"
        opened = [i for i, (t, f) in enumerate(zip(c, r.forced)) if (t, f) in ((S, 1), (P, 0))]
        assert ES not in c[opened[-1] : -1]  # it ends with the 4th summary (seen: after <Parallel>)
    for r in run(eager_blocks, prompts=PROMPTS[:2], at_block_limit="mask", **cfg):
        c = r.completion_ids
        assert r.blocks == c.count(P) == 4 and r.finish_reason == "length" and len(c) == 160
    with pytest.raises(ValueError):
        run(eager_blocks, at_block_limit="nope")


@pytest.mark.parametrize(
    "temperature, top_p, expected",
    [
        (1.0, 1.0, torch.softmax(torch.tensor([0.0, 1.0, 2.0]), -1).tolist()),
        (2.0, 1.0, torch.softmax(torch.tensor([0.0, 0.5, 1.0]), -1).tolist()),
        (1.0, 0.7, [0.0, 0.2689, 0.7311]),  # top-p keeps 0.665 + 0.245, renormalised
    ],
)
def test_sampled_tokens_follow_the_tempered_softmax(temperature, top_p, expected):
    """Inverting the CDF draws each token at its probability (40k draws: a 4-sigma band of about
    0.01) and never a banned (-inf) or top-p-dropped token."""
    logits = torch.tensor([[0.0, 1.0, 2.0, float("-inf")]]).repeat(40_000, 1)  # (N, 4)
    draws = sample_tokens(logits, temperature, top_p, torch.Generator().manual_seed(0))
    freq = torch.bincount(draws, minlength=4).double() / len(draws)
    assert freq[3] == 0 and (freq[0] == 0) == (expected[0] == 0)
    assert (freq[:3] - torch.tensor(expected, dtype=freq.dtype)).abs().max() < 0.01


@pytest.mark.parametrize("mode", ["forked", "reread", "seen"])
def test_every_cache_samples_what_the_first_engine_samples(steered, mode):
    """The in-place KV cache, the re-reads on their own rows, the cheaper regroups, the prefill
    of each distinct prompt once, the packed rows (``RowStreams``, the default for this model)
    and the shared-column cache before them change no numbers: the first engine
    (``fast_cache=False``) samples the same tokens with the same log-probs; the fast ones feed
    the model each repeated prompt once."""
    prompts = PROMPTS * 2  # groups repeat their prompt
    ways = {"rows": {}, "shared": dict(cache="shared"), "first": dict(fast_cache=False)}
    stats = {way: {} for way in ways}
    out = {
        way: run(steered, seed=9, prompts=prompts, mode=mode, num_paths=3, stats=stats[way], **kw)
        for way, kw in ways.items()
    }
    assert sum(r.blocks for r in out["rows"]) > 0 or mode == "seen"
    for way in ("rows", "shared"):
        assert [r.completion_ids for r in out[way]] == [r.completion_ids for r in out["first"]]
        pairs = [
            (a, b) for x, y in zip(out[way], out["first"]) for a, b in zip(x.logprobs, y.logprobs)
        ]
        assert max(abs(a - b) for a, b in pairs) < 1e-5
        once = sum(len(tokens(p)) for p in PROMPTS)
        assert stats[way]["fed_tokens"] == stats["first"]["fed_tokens"] - once


def test_finished_rows_leave_the_batch(steered, monkeypatch):
    """Each step decodes only the rows of samples still going: a finished row is dropped at once
    (seen mode: one row per sample)."""
    from pr1lib.decoding.rowcache import RowStreams

    widths, step = [], RowStreams.step
    monkeypatch.setattr(
        RowStreams,
        "step",
        lambda self, tokens, live: widths.append(len(tokens)) or step(self, tokens, live),
    )
    rollouts = run(steered, seed=6, prompts=PROMPTS * 2, mode="seen")
    ends = sorted(len(r.completion_ids) for r in rollouts)
    assert len(set(ends)) > 1, "expected samples of unequal length"
    going = [sum(n > t + 1 for n in ends) for t in range(len(widths))]  # samples past token t+1
    assert widths == going


def test_decode_attention_is_sdpa_for_one_query_token():
    """The engine's one-token CPU attention (two matmuls) gives SDPA's numbers, with GQA, a
    key mask with holes (bool) and an additive mask; longer queries go to SDPA itself."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from pr1lib.decoding.decode import decode_attention

    torch.manual_seed(0)
    module = torch.nn.Module()
    module.num_key_value_groups, module.is_causal = 2, True
    keys, values = torch.randn(3, 2, 9, 16), torch.randn(3, 2, 9, 16)  # (B, H_kv, T, D)
    holes = torch.rand(3, 1, 1, 9) > 0.3
    holes[..., -1] = True  # every row keeps its own key
    additive = torch.zeros(3, 1, 1, 9).masked_fill(~holes, torch.finfo(torch.float32).min)
    for q_len, mask in ((1, holes), (1, additive), (1, None), (4, None)):
        query = torch.randn(3, 4, q_len, 16)  # (B, H, q, D)
        ours, _ = decode_attention(module, query, keys, values, mask, scaling=0.25)
        sdpa, _ = sdpa_attention_forward(module, query, keys, values, mask, scaling=0.25)
        assert ours.shape == sdpa.shape == (3, q_len, 4, 16)
        assert torch.allclose(ours, sdpa, atol=1e-5), (q_len, mask is None)


def test_the_fast_engine_decodes_with_its_attention_and_restores_the_model(model, monkeypatch):
    """While the fast engine decodes, its one-token steps run ``decode.row_step`` on packed rows
    (the toy model is a plain float32 Qwen3), ``decode.step`` on the shared cache, or, for a
    model it does not cover, the model with ``DECODE_ATTENTION``; afterwards the model attends
    with SDPA again; the first engine runs plain SDPA throughout."""
    import pr1lib.decoding.decode as decode

    seen, lean, rows = [], [], []
    real_attention, real_step, real_rows = decode.decode_attention, decode.step, decode.row_step
    monkeypatch.setitem(
        decode.AttentionInterface._global_mapping,
        decode.DECODE_ATTENTION,
        lambda module, query, *a, **kw: (
            seen.append(query.shape[2]) or real_attention(module, query, *a, **kw)
        ),
    )
    monkeypatch.setattr(decode, "step", lambda *a: lean.append(1) or real_step(*a))
    monkeypatch.setattr(decode, "row_step", lambda *a: rows.append(1) or real_rows(*a))
    run(model, seed=3, max_completion_length=6)
    assert rows and seen and 1 not in seen and not lean  # the prefill: the model; steps: rows
    rows.clear(), seen.clear()
    run(model, seed=3, max_completion_length=6, cache="shared")
    assert lean and seen and 1 not in seen and not rows  # the shared cache: decode.step
    assert model.config._attn_implementation == "sdpa"
    seen.clear(), lean.clear()
    monkeypatch.setattr(decode, "supported", lambda model: False)
    run(model, seed=3, max_completion_length=6)
    assert not lean and not rows and seen.count(1) >= len(seen) // 2  # the model, one token a step
    seen.clear()
    run(model, seed=3, max_completion_length=6, fast_cache=False)  # the first engine: plain SDPA
    assert seen == [] and lean == [] and rows == []


def test_the_lean_step_gives_the_models_logits(model):
    """``decode.step`` against the model's own forward on the same cache: rows at their own
    positions, one idling (a hole), GQA; LoRA-wrapped or bfloat16 models are not covered."""
    import copy

    from peft import LoraConfig, get_peft_model

    from pr1lib.decoding import decode

    assert decode.supported(model)
    assert not decode.supported(copy.deepcopy(model).to(torch.bfloat16))
    wrapped = get_peft_model(copy.deepcopy(model), LoraConfig(target_modules=["q_proj"]))
    assert not decode.supported(wrapped) and not decode.supported(wrapped.get_base_model())
    lean, plain = Streams(model), Streams(model)
    plain.lean = False
    prompts = [tokens("Q: hi"), tokens("a longer prompt"), tokens("x")]
    with torch.no_grad():
        for st in (lean, plain):
            st.prefill(prompts, T.pad)
        for t in range(4):
            feed, live = torch.tensor([5 + t, 9, 12]), torch.tensor([True, t != 1, True])
            torch.testing.assert_close(
                lean.step(feed, live), plain.step(feed, live), atol=1e-5, rtol=0
            )
    assert lean.pos.tolist() == plain.pos.tolist()
    one = [Streams(model), Streams(model)]  # one-token prompts: the prefill is the model's own
    one[1].lean = False
    with torch.no_grad():
        first = [st.prefill([[7], [8]], T.pad) for st in one]
        torch.testing.assert_close(first[0], first[1], atol=1e-5, rtol=0)
        with pytest.raises(ValueError, match="run the model on the prompt first"):
            decode.step(
                model,
                torch.tensor([[7]]),
                torch.tensor([[0]]),
                torch.ones(1, 1, dtype=torch.bool),
                new_cache(),
            )


def test_numbered_paths_open_with_their_own_header_and_stay_blind_to_each_other(steered):
    """``path_headers``: the engine writes "(j+1)" at the start of path j (forced tokens), the
    recorded log-probs still equal the masked forward's, and path 2's logits do not move when path
    1's tokens change (the unseen mask, headers included)."""
    from pr1lib.format.grammar import path_header

    rollouts = run(steered, seed=2, path_headers=True)
    headers = []
    for r in rollouts:
        j = 0
        for i, t in enumerate(r.completion_ids):
            j = 0 if t == P else j
            if t == PA and r.forced[i]:  # a path the engine opened at a fork
                n = next(
                    n
                    for n in range(i + 1, len(r.forced) + 1)
                    if n == len(r.forced) or not r.forced[n] or r.completion_ids[n] == EPA
                )
                headers.append((TOK.decode(r.completion_ids[i + 1 : n]), path_header(j)))
                j += 1
    # the header is all the engine writes at a path's start (a path cut by its budget: part of it)
    assert all(wanted.startswith(written) for written, wanted in headers)
    assert sum(written == wanted for written, wanted in headers) >= 4
    assert max_gap(steered, rollouts) < 1e-4
    prefix = tokens("Q: hi") + [P]
    two = [PA] + tokens("(2) x") + [EPA]
    for first in (tokens("(1) ab"), tokens("(1) zzzz")):
        seq = prefix + [PA] + first + [EPA] + two
        at = len(prefix) + len(first) + 2  # where path 2 starts
        logits = full_logits(steered, seq)[at:]
        if first[-1] == tokens("b")[0]:
            reference = logits
    torch.testing.assert_close(logits, reference, atol=1e-5, rtol=0)

"""Forced tokens cost one forward (``pr1lib.decoding.regroup._Rows.advance``): a block's path
headers and a summary's newline and ``<Summary>`` are fed with the token before them, while the
decisions (and their random draws) stay one per token: the packed-rows cache samples what the
shared cache, which feeds one token a step, samples, in fewer steps."""

from __future__ import annotations

import pytest
import torch
from _tiny import ids, one_thread, steer, toy_model, toy_tokenizer

from pr1lib.config import RolloutConfig
from pr1lib.decoding.rollout import generate, rollout_logprobs
from pr1lib.decoding.rowcache import RowStreams
from pr1lib.decoding.structure import tag_ids
from pr1lib.format.grammar import path_header

TOK = toy_tokenizer()
T = tag_ids(TOK)
EOS = TOK.eos_token_id
CFG = RolloutConfig(max_completion_length=60, max_path_length=8, path_headers=True)


@pytest.fixture(scope="module", autouse=True)
def _threads():
    yield from one_thread()


def both_caches(model, prompts: list[str], **kw) -> dict[str, tuple[list, dict]]:
    """``{cache: (rollouts, stats)}`` for the packed rows and the shared cache, same seed."""
    out = {}
    for cache in ("rows", "shared"):
        stats, gen = {}, torch.Generator().manual_seed(4)
        rollouts = generate(model, TOK, prompts, CFG, gen, stats=stats, cache=cache, **kw)
        out[cache] = rollouts, stats
    return out


def assert_same_samples(out: dict[str, tuple[list, dict]], model) -> None:
    (rows, _), (shared, _) = out["rows"], out["shared"]
    assert [r.completion_ids for r in rows] == [r.completion_ids for r in shared]
    again = rollout_logprobs(model, TOK, rows, "forked", 1.0)
    for r, s, lp in zip(rows, shared, again):
        torch.testing.assert_close(
            torch.tensor(r.logprobs), torch.tensor(s.logprobs), atol=1e-5, rtol=0
        )
        torch.testing.assert_close(torch.tensor(r.logprobs), torch.tensor(lp), atol=1e-4, rtol=0)


@pytest.mark.parametrize("style", ["number", "letter"])
def test_a_blocks_headers_and_summary_opening_cost_one_step_each(style):
    """One prompt whose paths never close early: every block's headers take one forward with
    their ``<Path>`` (not one per token), the summary's newline and ``<Summary>`` one with its
    ``</Parallel>``; the samples and log-probs are the one-token-a-step engine's."""
    no_close = steer(toy_model(len(TOK), seed=3), {T.parallel: 8.0, T.end_path: -30.0, EOS: -30.0})
    out = both_caches(no_close, ["Hi"], header_style=style)
    assert_same_samples(out, no_close)
    rollouts, stats = out["rows"]
    header = len(ids(TOK, path_header(0, style)))
    assert all(len(ids(TOK, path_header(j, style))) == header for j in range(CFG.num_paths))
    blocks = sum(len(r.path_lengths) for r in rollouts)  # merged blocks: a summary each
    assert blocks > 0
    saved = blocks * (header + len(ids(TOK, "\n")) + 1)
    assert stats["steps"] == out["shared"][1]["steps"] - saved
    assert stats["fed_tokens"] == out["shared"][1]["fed_tokens"]


def test_a_path_that_closes_inside_its_header_takes_its_fed_tokens_back(monkeypatch):
    """A numbered path that samples eos where its header goes closes there: the tokens the
    forward fed after that decision are taken back, and the samples stay the shared cache's."""
    taken = []
    unstep = RowStreams.unstep
    monkeypatch.setattr(
        RowStreams, "unstep", lambda self, live, n: taken.append(n) or unstep(self, live, n)
    )
    eager_eos = steer(toy_model(len(TOK), seed=2), {T.parallel: 6.0, EOS: 3.0})
    prompts = ["Q: 2+3?\n", "Hi", "Q: x\n"]
    out = {}
    for prompt in prompts:  # one at a time: every row of a block feeds its header together
        for cache, (rollouts, stats) in both_caches(eager_eos, [prompt]).items():
            got = out.setdefault(cache, ([], {"fed_tokens": 0}))
            got[0].extend(rollouts)
            got[1]["fed_tokens"] += stats["fed_tokens"]
    assert taken
    assert_same_samples(out, eager_eos)
    assert out["rows"][1]["fed_tokens"] == out["shared"][1]["fed_tokens"]

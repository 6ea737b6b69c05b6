"""RL's exploration of the plan's width (``RolloutConfig.width_temperature``, docs/planworld.md):
only the choice of one more item is sampled hotter, a plan line opens its block, and the recorded
log-probs stay the policy's."""

from __future__ import annotations

import pytest
import torch
from _tiny import planned_rollouts, planworld_shipped, toy_tokenizer

from pr1lib.decoding.explore import WidthTokens, next_choice, spread, widen
from pr1lib.decoding.rollout import generate, rollout_logprobs
from pr1lib.format import plans
from pr1lib.worlds import planworld


def test_widen_raises_an_unlikely_go_on_keeps_a_likely_one_and_the_others_ratios():
    logits = torch.tensor([[4.0, -5.0, 1.0], [-5.0, 4.0, 1.0]])  # go_on is token 1
    before = torch.softmax(logits, -1)
    after = torch.softmax(widen(logits, 1, 1.0, 3.0), -1)
    assert before[0, 1] < 2e-4 and 0.04 < after[0, 1] < 0.06  # p^(1/3) against (1-p)^(1/3)
    # a likely go_on is never lowered, and the other tokens keep their ratios
    assert float(after[1, 1]) == pytest.approx(float(before[1, 1]), rel=1e-5)
    ratio = lambda p: float(p[0, 0] / p[0, 2])  # noqa: E731
    assert ratio(after) == pytest.approx(ratio(before), rel=1e-5)


def test_a_tokenizer_without_one_token_plan_words_is_refused():
    tok = toy_tokenizer()
    if all(len(tok.encode(x, add_special_tokens=False)) == 1 for x in ("Check", "),", "A")):
        pytest.skip("the toy tokenizer writes the plan words as one token each")
    with pytest.raises(ValueError, match="one token"):
        WidthTokens.of(tok)


def test_spread_samples_the_letters_hotter_among_themselves_and_keeps_their_total():
    logits = torch.tensor([[1.0, 9.0, 0.0, 2.0]])  # letters: tokens 1 and 2
    before, after = (torch.softmax(x, -1)[0] for x in (logits, spread(logits, [1, 2], 1.0, 3.0)))
    assert float(after[1] + after[2]) == pytest.approx(float(before[1] + before[2]), rel=1e-5)
    assert after[2] > 50 * before[2]  # the unlikely letter: e^-9 -> e^-3 of the likely one
    assert float(after[0] / after[3]) == pytest.approx(float(before[0] / before[3]), rel=1e-5)


def test_the_width_choices_are_read_from_a_plan_line_only(shipped):
    _, tok, _ = shipped
    ids, row = WidthTokens.of(tok), (False, "")
    seen = []
    for t in tok.encode("(A) x\nCheck (A), (B)-(D)\n(C)", add_special_tokens=False):
        row = next_choice(ids, row[0], seen[-1][0] if seen else -1, t)
        seen.append((t, row[1]))
    marked = [(tok.decode([t]), c) for t, c in seen if c]
    assert marked == [("A", "go_on"), ("B", "go_on"), ("(", "end")]


@pytest.fixture(scope="module")
def shipped():
    return planworld_shipped(96)


def _plans(model, tok, prompts, hotter: float):
    cfg = planned_rollouts(max_completion_length=200, width_temperature=hotter)
    outs = generate(model, tok, prompts, cfg, generator=torch.Generator().manual_seed(0))
    items = [plans.plan_items(plans.last_line(o.text.split("<Parallel>")[0])) for o in outs]
    return outs, [len(i) if i else 0 for i in items]


def test_hotter_width_choices_sample_plans_wider_than_the_cold_starts_each_opening_its_block(
    shipped,
):
    model, tok, prompts = shipped
    _, cold = _plans(model, tok, prompts, 0.0)
    outs, hot = _plans(model, tok, prompts, 8.0)
    # the cold start plans 2 or 3 deals; a span's end letter now and then lands further out
    assert sum(w > 3 for w in cold) <= 0.1 * len(cold)
    wide = [(o, w) for o, w in zip(outs, hot) if 3 < w <= planworld.MOST]
    assert len(wide) >= sum(w > 3 for w in cold) + 3
    for o, w in wide:  # the plan line's newline is followed by <Parallel>, then w paths
        assert f"{plans.last_line(o.text.split('<Parallel>')[0])}\n<Parallel>" in o.text
        assert o.path_lengths[0] is not None and len(o.path_lengths[0]) == w
    again = rollout_logprobs(model, tok, [o for o, _ in wide])  # the trainer's view, at T = 1
    for (o, _), lps in zip(wide, again):
        keep = [i for i, f in enumerate(o.forced) if not f]
        assert max(abs(o.logprobs[i] - lps[i]) for i in keep) < 1e-3
        assert min(o.logprobs[i] for i in keep) < -4  # the unlikely choice, at the policy's odds

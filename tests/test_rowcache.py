"""pr1lib.decoding.rowcache: packed rows give the shared cache's logits through forks, merges, drops
and re-reads; finished rows really go; memory is reused, and whatever a reused buffer held never
reaches a logit."""

from __future__ import annotations

import pytest
import torch
from _tiny import ids, one_thread, toy_model, toy_tokenizer

import pr1lib.decoding.rowcache as rowcache
from pr1lib.decoding.kvcache import Streams
from pr1lib.decoding.rowcache import RowStreams
from pr1lib.decoding.structure import tag_ids

TOK = toy_tokenizer()
PAD = tag_ids(TOK).pad
PROMPTS = [ids(TOK, t) for t in ("Q: one", "Q: a longer question", "Hi", "Q: x y z")]


@pytest.fixture(scope="module", autouse=True)
def _threads():
    yield from one_thread()


@pytest.fixture(scope="module")
def model():
    return toy_model(len(TOK), seed=3)


def close(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def by_slot(logits: torch.Tensor, slots: list[int]) -> torch.Tensor:
    """Rows of a ``RowStreams`` result in the order of the plan's new rows."""
    return logits[torch.tensor(slots)]


@pytest.mark.parametrize("fan", [1, 3])
def test_fork_merge_drop_and_reread_give_the_shared_caches_logits(model, fan, monkeypatch):
    """The same plan on both caches: row 1 forks into three rows that decode unequal paths, one
    row ends, the three merge (path keys appended), one row re-reads a sequence; every logit of
    every live row agrees, with the rows' keys in one part (``fan=1``, distinct prompts) or
    after shared bases (``fan=3``: the fork's rows read one copy of its prefix)."""
    monkeypatch.setattr(rowcache, "SHARE_ROWS", 1)  # bases even for these few rows
    monkeypatch.setattr(rowcache, "SHARE_FAN", 2)
    shared, rows = Streams(model), RowStreams(model, fan=fan)
    with torch.no_grad():
        close(shared.prefill(PROMPTS, PAD), rows.prefill(PROMPTS, PAD))
        assert rows.shared == (fan > 1)
        n = [shared.n_real(i) for i in range(4)]
        plan = [[(0, 0, n[0])], [(1, 0, n[1])], [(1, 0, n[1])], [(1, 0, n[1])], [(2, 0, n[2])]]
        pos = [int(shared.pos[i]) for i in (0, 1, 1, 1, 2)]  # row 3 ends
        slots = rows.regroup(plan, pos)
        shared.regroup(plan, pos)
        for t in range(5):
            live = torch.tensor([True, True, t < 2, t < 4, True])
            feed = torch.tensor([10 + t, 20 + t, 30 + t, 40 + t, 50 + t])
            out = shared.step(feed, live)
            mine = rows.step(
                feed[torch.tensor(slots).argsort()], live[torch.tensor(slots).argsort()]
            )
            for i in range(5):
                if live[i]:
                    close(out[i], mine[slots[i]])
        merge = [
            [(0, 0, shared.n_real(0))],
            [(1, 0, shared.n_real(1))] + [(j, n[1], shared.n_real(j)) for j in (2, 3)],
            [(4, 0, shared.n_real(4))],
        ]
        new_pos = [int(shared.pos[0]), int(shared.pos[1:4].max()), int(shared.pos[4])]
        old = {i: s for i, s in enumerate(slots)}
        slots = rows.regroup([[(old[r], a, b) for r, a, b in p] for p in merge], new_pos)
        shared.regroup(merge, new_pos)
        assert [rows.n_real(s) for s in slots] == [shared.n_real(i) for i in range(3)]
        again = torch.tensor([[7, 8, 9], [PAD, PAD, PAD], [11, 12, PAD]])  # (3, q)
        live = torch.tensor([[True] * 3, [False] * 3, [True, True, False]])
        order = torch.tensor(slots).argsort()
        close(
            shared.extend(again, live)[[0, 2]],
            rows.extend(again[order], live[order])[[slots[0], slots[2]]],
        )
        feed, live = torch.tensor([1, 2, 3]), torch.ones(3, dtype=torch.bool)
        close(shared.step(feed, live), by_slot(rows.step(feed[order], live), slots))


@pytest.mark.parametrize("fan", [1, 3])
def test_dropped_rows_leave_and_the_last_rows_move_into_their_places(model, fan, monkeypatch):
    """A regroup that leaves rows out shrinks the batch; the survivors stay in their slots (no
    copy), the last rows move into the freed ones, and decoding goes on as on the shared cache."""
    monkeypatch.setattr(rowcache, "SHARE_ROWS", 1)
    monkeypatch.setattr(rowcache, "SHARE_FAN", 2)
    rows, shared = RowStreams(model, fan=fan), Streams(model)
    with torch.no_grad():
        close(rows.prefill(PROMPTS, PAD), shared.prefill(PROMPTS, PAD))
        plan = [[(i, 0, shared.n_real(i))] for i in (0, 2, 3)]  # row 1 ends
        pos = [int(shared.pos[i]) for i in (0, 2, 3)]
        assert rows.regroup(plan, pos) == [0, 2, 1]  # row 3 moved into slot 1
        shared.regroup(plan, pos)
        assert len(rows.pos) == 3 and rows.lens == [shared.n_real(i) for i in (0, 2, 1)]
        feed, live = torch.tensor([5, 6, 7]), torch.ones(3, dtype=torch.bool)
        out = rows.step(feed[torch.tensor([0, 2, 1])], live)
        close(out[torch.tensor([0, 2, 1])], shared.step(feed, live))


def test_a_reused_buffer_never_reaches_a_logit(model, monkeypatch):
    """Finished rollouts hand their buffer on; a buffer full of NaN (what unwritten memory may
    hold) is reused and every logit stays what a fresh buffer gives."""
    monkeypatch.setattr(rowcache, "_SPARE", [])
    first = RowStreams(model)
    with torch.no_grad():
        first.prefill(PROMPTS, PAD)
        memory = first.buf.kv.data_ptr()
        first.buf.kv.fill_(float("nan"))
        first.release()
        assert rowcache._SPARE and rowcache._SPARE[0].data_ptr() == memory
        reused, fresh = RowStreams(model), Streams(model)
        close(reused.prefill(PROMPTS, PAD), fresh.prefill(PROMPTS, PAD))
        assert reused.buf.kv.data_ptr() == memory  # the same memory, no new pages
        for t in range(40):  # past the zeroed columns ahead
            feed, live = torch.full((4,), 5 + t % 9), torch.tensor([True, t % 3 > 0, True, True])
            out, want = reused.step(feed, live), fresh.step(feed, live)
            assert torch.isfinite(out).all()
            close(out[live], want[live])


def test_samples_of_one_prompt_read_one_base_and_give_the_shared_caches_logits(model, monkeypatch):
    """Repeated prompts (a prompt's samples) share one base once there are ``SHARE_ROWS`` rows:
    their keys are kept once, and every logit agrees with the shared cache through steps and a
    fork; below that every row keeps its own keys."""
    prompts = [PROMPTS[0], PROMPTS[1], PROMPTS[0], PROMPTS[0]]
    rows, shared = RowStreams(model), Streams(model)
    with torch.no_grad():
        rows.prefill(prompts, PAD)
        assert not rows.shared and rows.buf.lens == [len(p) for p in prompts]
        monkeypatch.setattr(rowcache, "SHARE_ROWS", 4)
        close(rows.prefill(prompts, PAD), shared.prefill(prompts, PAD))
        assert rows.base_of == [0, 1, 0, 0] and rows.buf.lens == [0, 0, 0, 0]
        for t in range(3):
            feed, live = torch.tensor([5 + t, 6, 7, 8 + t]), torch.tensor([True, True, t > 0, True])
            close(rows.step(feed, live)[live], shared.step(feed, live)[live])
        plan = [[(0, 0, shared.n_real(0))]] * 2 + [[(i, 0, shared.n_real(i))] for i in (1, 2, 3)]
        pos = [int(shared.pos[i]) for i in (0, 0, 1, 2, 3)]
        slots = rows.regroup(plan, pos)
        shared.regroup(plan, pos)
        order = torch.tensor(slots).argsort()
        feed, live = torch.tensor([9, 10, 11, 12, 13]), torch.ones(5, dtype=torch.bool)
        close(by_slot(rows.step(feed[order], live), slots), shared.step(feed, live))

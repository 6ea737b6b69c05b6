"""Hidden plans (``hide_plan``, docs/planworld.md regime 7): a block's plan line is read by nothing
after its ``<Parallel>``, so a path reads the same context under a plan of any width; the engine
leaves the plan out of its paths' rows and records what the trainer's mask scores."""

from __future__ import annotations

import pytest
import torch
from _tiny import PLANWORLD_SFT, planned_rollouts, planworld_shipped

from pr1lib.decoding.rollout import generate, rollout_logprobs
from pr1lib.decoding.structure import (
    TagIds,
    allowed_mask,
    parse,
    plan_length,
    structure_tensors,
    structured_logprobs,
    tag_ids,
)
from pr1lib.format import plans

SHIPPED = PLANWORLD_SFT  # its plans name 2 or 3 deals
T = TagIds(1, 2, 3, 4, 5, 6, pad=0, newline=9)


def test_the_plan_line_and_its_parallel_are_hidden_from_the_paths_and_everything_after():
    #       x  \n  P  P  \n <Par> <Path> a </Path> <Path> b </Path> </Par> s
    ids = [7, 9, 8, 8, 9, 1, 3, 7, 4, 3, 7, 4, 2, 7]
    s = parse(ids, T, hide_plan=True)
    assert plan_length(ids[:6], T) == 4  # "P P \n <Parallel>"
    assert s.cut == [-1, -1, 5, 5, 5, 5, -1, -1, -1, -1, -1, -1, -1, -1]
    assert s.positions[6] == s.positions[9] == 2  # the paths start where the plan did
    assert s.positions[12] == 5  # </Parallel>: the longest path's end + 1
    st = structure_tensors(torch.tensor([ids]), T, hide_plan=True)
    mask = allowed_mask(st["block"], st["path"], st["valid"], st["cut"])[0]  # (L, L)
    assert mask[5, 2:6].all()  # <Parallel> still reads its plan
    assert not mask[6:, 2:6].any()  # paths, </Parallel> and later text do not
    assert mask[6:, :2].all() and not mask[9, 6:9].any()  # the question; no sibling path


def test_without_hide_plan_nothing_is_cut():
    ids = [7, 9, 8, 9, 1, 3, 7, 4, 2]
    assert parse(ids, T).cut == [-1] * len(ids)
    assert parse(ids, T).positions == parse(ids, T, hide_plan=False).positions
    with pytest.raises(ValueError, match="newline"):
        plan_length(ids[:5], TagIds(1, 2, 3, 4, 5, 6))


@pytest.fixture(scope="module")
def shipped():
    return planworld_shipped(8)


def _block(tok, prompt, plan: str, paths: list[str]) -> tuple[list[int], int]:
    """A prompt, its plan and a block of ``paths``; the index of the first path's ``<Path>``."""
    head = tok.encode(prompt + plan + "\n<Parallel>", add_special_tokens=False)
    body = "".join(f"<Path>{p}</Path>" for p in paths) + "</Parallel>\n<Summary>B</Summary>"
    return head + tok.encode(body, add_special_tokens=False), len(head)


def test_a_path_reads_the_same_under_a_plan_of_two_deals_and_one_of_ten(shipped):
    model, tok, prompts = shipped
    paths = ["(A) 4+9=13 vs 14 ✗", "(B) 6+8=14 vs 14 ✓ B"]
    two, at = _block(tok, prompts[0], "Check (A), (B)", paths)
    ten, at10 = _block(tok, prompts[0], "Check (A)-(J)", paths)
    n = len(two) - at - 1  # after the first <Path> (<Parallel> predicts it, reading the plan)
    start = [len(tok.encode(prompts[0], add_special_tokens=False))]
    for hide, same in ((True, True), (False, False)):
        lp = [
            structured_logprobs(model, torch.tensor([s]), tok, "unseen", start, hide_plan=hide)[
                0, -n:
            ]
            for s in (two, ten)
        ]
        assert torch.allclose(lp[0], lp[1], atol=1e-5) == same


def test_the_engine_leaves_the_plan_out_of_its_paths_and_records_the_trainers_log_probs(shipped):
    model, tok, prompts = shipped
    cfg = planned_rollouts(max_completion_length=160, hide_plan=True)
    outs = generate(model, tok, prompts, cfg, generator=torch.Generator().manual_seed(0))
    blocks = [o for o in outs if o.path_lengths and o.path_lengths[0]]
    assert len(blocks) >= 4
    for o in blocks:  # each block still follows its plan
        items = plans.plan_items(plans.last_line(o.text.split("<Parallel>")[0]))
        assert items is not None and len(o.path_lengths[0]) == len(items)
    hidden = rollout_logprobs(model, tok, blocks, hide_plan=True)
    seen = rollout_logprobs(model, tok, blocks)
    for o, lps, plain in zip(blocks, hidden, seen):
        keep = [i for i, f in enumerate(o.forced) if not f]
        assert max(abs(o.logprobs[i] - lps[i]) for i in keep) < 1e-3
        assert max(abs(o.logprobs[i] - plain[i]) for i in keep) > 1e-2  # the plan is unread


def test_tag_ids_reads_the_newline_from_the_tokenizer(shipped):
    _, tok, _ = shipped
    assert tag_ids(tok).newline == tok.encode("\n", add_special_tokens=False)[-1]


def test_the_sft_collator_and_the_grpo_trainer_hide_the_plan_they_are_told_to(shipped):
    from types import SimpleNamespace as S

    from pr1lib.training.grpo_trainer import ParallelGRPOTrainer
    from pr1lib.training.sft import ParallelCollator

    model, tok, prompts = shipped
    ids, at = _block(tok, prompts[0], "Check (A)-(C)", ["(A) 1", "(B) 2", "(C) 3"])
    start = len(tok.encode(prompts[0], add_special_tokens=False))
    plan = slice(start, at)  # the plan line, its newline and <Parallel>
    row = {"input_ids": ids, "labels": [-100] * start + ids[start:]}
    for hide in (False, True):  # SFT: right-padded rows, the response from the first label on
        mask = ParallelCollator(tok, hide_plan=hide)([row])["attention_mask"][0, 0]  # (L, L)
        assert bool(mask[at:, plan].any()) == (not hide)
        # GRPO: TRL's left-padded batch, one pad before the prompt
        stub = S(accelerator=S(unwrap_model=lambda m: m), processing_class=tok, hide_plan=hide)
        padded = torch.tensor([[tok.pad_token_id, *ids]])
        extra = ParallelGRPOTrainer._unseen_inputs(
            stub, model, padded, (padded != tok.pad_token_id).long(), len(ids) - start
        )
        mask = extra["attention_mask"][0, 0, 1:, 1:]  # (L, L) without the pad
        assert bool(mask[at:, plan].any()) == (not hide)


def test_a_start_trained_with_hidden_plans_is_trained_on_and_decoded_with_them(tmp_path, capsys):
    import json

    from pr1lib.cli.measure import as_trained
    from pr1lib.config import GRPOStageConfig
    from pr1lib.training.runs import follow_hidden_plans, recorded_hide_plan

    saved = {"type": "SFTStageConfig", "variant": "unseen", "hide_plan": True}
    (tmp_path / "config.json").write_text(json.dumps(saved))
    read = tmp_path / "read"  # an unseen start whose paths read the plan
    read.mkdir()
    (read / "config.json").write_text(json.dumps({**saved, "hide_plan": False}))
    assert recorded_hide_plan(tmp_path) and recorded_hide_plan(SHIPPED)
    assert not recorded_hide_plan(read)
    cfg = follow_hidden_plans(GRPOStageConfig(variant="unseen"), tmp_path)
    assert cfg.hide_plan and "hidden plans" in capsys.readouterr().out
    assert not follow_hidden_plans(GRPOStageConfig(variant="unseen"), read).hide_plan
    assert not follow_hidden_plans(GRPOStageConfig(variant="seen"), tmp_path).hide_plan
    assert as_trained(str(tmp_path), "tiny", {})["hide_plan"] is True
    assert "hide_plan" not in as_trained(str(tmp_path), "tiny", {"mode": "seen"})

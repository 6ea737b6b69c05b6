"""The plan-removed arm of PlanWorld's controls (docs/planworld.md, issue 49 §4): the same cold
start with the plan line taken out, and rollouts that fork a fixed width with nothing forced into
the paths, so paths that cannot see each other are told nothing about their share."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from _probes import run_cli
from _tiny import toy_model, toy_tokenizer
from datasets import Dataset

from pr1lib.config import GRPOStageConfig, RolloutConfig
from pr1lib.data.sftdata import with_trace_style
from pr1lib.decoding.rollout import generate
from pr1lib.experiments import controls
from pr1lib.experiments.split import unplanned
from pr1lib.format import plans
from pr1lib.format.grammar import parse
from pr1lib.worlds import planworld as pw

ARM = "unseen-noplan"


def _teacher_rows(n: int = 40) -> Dataset:
    records = pw.generate(n, "small", "train", seed=5)
    rows = [
        {"id": f"p{i}", **r, "answer_text": r["answer"], "source": "planworld-small"}
        for i, r in enumerate(records)
    ]
    texts = [t["text"] for t in pw.PlanTeacher().generate(rows)]
    return Dataset.from_dict(
        {
            "question": [r["question"] for r in rows],
            "completion": texts,
            "source": ["planworld-small"] * n,
        }
    )


def _plan_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if plans.plan_items(line)]


def test_the_noplan_rows_hold_no_plan_line_and_the_same_paths_and_answers():
    rows = _teacher_rows()
    blind = with_trace_style(rows, "noplan")
    planned = [t for t in rows["completion"] if _plan_lines(t)]
    assert len(planned) >= 30  # the cold start's searches open with a plan ...
    for before, after in zip(rows["completion"], blind["completion"]):
        assert _plan_lines(after) == []  # ... and no row keeps one
        paths = [[p.text for p in b.paths] for b in parse(before).blocks]
        assert [[p.text for p in b.paths] for b in parse(after).blocks] == paths
        assert after.splitlines()[-1] == before.splitlines()[-1]  # the same answer
        assert after == before.replace(next(iter(_plan_lines(before)), "") + "\n", "", 1)


def test_the_arms_sft_config_removes_the_plan_and_its_rl_forks_three_unforced_paths():
    sft = controls.sft_config("planworld", "smoke", ARM)
    assert (sft.variant, sft.trace_style) == ("unseen", "noplan")
    spec = controls.arm_spec("planworld", ARM)
    cfg = GRPOStageConfig.for_stage(3, "smoke", variant="unseen", world="planworld", **spec.grpo)
    assert (cfg.num_paths, cfg.header_style) == (pw.BLIND_PATHS, "none") == (3, "none")
    planned = GRPOStageConfig.for_stage(3, "smoke", variant="unseen", world="planworld")
    assert (planned.num_paths, planned.header_style) == (pw.MOST, "plan")  # the planned arm


class _Script(torch.nn.Module):
    """The output layer, made to write ``tokens`` first; later calls pass through."""

    def __init__(self, head: torch.nn.Module, tokens: list[int]):
        super().__init__()
        self.head, self.tokens, self.calls = head, tokens, 0

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.head(hidden)
        if self.calls < len(self.tokens):
            logits = logits.clone()
            logits[..., self.tokens[self.calls]] = logits.max() + 100.0
        self.calls += 1
        return logits


def _blind_rollouts(first: str = ""):
    """Rollouts of a toy model that writes ``first`` then ``<Parallel>``, in the arm's layout."""
    tok = toy_tokenizer()
    model = toy_model(len(tok), seed=3)
    script = tok.encode(first, add_special_tokens=False) if first else []
    model.lm_head = _Script(model.lm_head, script + [tok.convert_tokens_to_ids("<Parallel>")])
    spec = controls.arm_spec("planworld", ARM)
    stage = GRPOStageConfig.for_stage(3, "smoke", variant="unseen", world="planworld", **spec.grpo)
    cfg = replace(RolloutConfig.of(stage, "forked"), max_completion_length=120, max_path_length=8)
    gen = torch.Generator().manual_seed(1)
    return tok, generate(model, tok, ["Q: a"] * 4, cfg, generator=gen)


@pytest.mark.parametrize("first", ["", "Check (A), (B), (C), (D), (E)\n"])
def test_the_engine_forks_three_paths_and_forces_nothing_into_them(first):
    """No plan to read (or one the arm never reads): three paths, each first token sampled."""
    tok, rollouts = _blind_rollouts(first)
    path = tok.convert_tokens_to_ids("<Path>")
    for r in rollouts:
        assert r.finish_reason != "bad_plan" and r.path_lengths[0] and len(r.path_lengths[0]) == 3
        opened = [i for i, t in enumerate(r.completion_ids) if t == path and r.forced[i]]
        assert len(opened) >= 3
        assert all(r.forced[i + 1] == 0 for i in opened if i + 1 < len(r.forced))


def test_a_forced_split_of_the_blind_layout_loses_the_plan_from_its_prefix():
    assert unplanned("Check (A), (B), (C)\n") == ""
    assert unplanned("(A) 1+2=3 vs 4 ✗\n") == "(A) 1+2=3 vs 4 ✗\n"


@pytest.mark.parametrize("world", ["tinyworld", "wideworld"])
def test_the_arm_is_refused_in_one_line_where_no_plan_is_written(world, tmp_path, capsys):
    out = tmp_path / "controls"
    argv = ("study", "controls", "--profile", "smoke", "--world", world, "--arm", ARM)
    code, lines = run_cli(capsys, *argv, "--seeds", "0", "--out", out)
    assert code == 2 and len(lines) == 1 and "trace_style='noplan'" in lines[0]
    assert "(planworld)" in lines[0]
    assert not out.exists()


def test_a_smoke_run_of_the_arm_trains_without_plans_and_evaluates_three_unforced_paths(
    tmp_path, monkeypatch
):
    from pr1lib.training import grpo

    judged, evaluate = [], grpo.evaluate_stage

    def seen(model, tokenizer, judge):  # the held-out evaluations' configs, then the real one
        judged.append((judge.benchmark, judge.num_paths, judge.header_style))
        return evaluate(model, tokenizer, judge)

    monkeypatch.setattr(grpo, "evaluate_stage", seen)
    result = controls.run_arm("smoke", "planworld", ARM, [0], out=tmp_path)
    assert judged and {j[1:] for j in judged} == {(3, "none")}  # before and after each stage
    assert {j[0] for j in judged} >= {"planworld-hard"}
    assert result["arm"] == ARM and result["start"].endswith(f"{ARM}/sft")
    rows = [json.loads(x) for x in (tmp_path / ARM / "sft" / "train_rows.jsonl").open()]
    assert rows and not any(_plan_lines(r["completion"]) for r in rows)
    cards = sorted((tmp_path / ARM / "seed0").glob("grpo-*/run_card.json"))
    assert len(cards) == 2  # Stage 2, then 3
    for card in cards:
        config = json.loads(card.read_text())["config"]
        assert (config["num_paths"], config["header_style"]) == (3, "none")


def test_a_forced_block_after_a_plan_in_the_prompt_follows_that_plan():
    """``study split`` gives the teacher's plan in the prompt and forces ``<Parallel>`` first: the
    engine reads the plan there (before, every such block ended as a bad plan of no paths, and a
    block of no paths counted as a split)."""
    tok = toy_tokenizer()
    model = toy_model(len(tok), seed=3)
    model.lm_head = _Script(model.lm_head, [tok.convert_tokens_to_ids("<Parallel>")])
    cfg = RolloutConfig(
        num_paths=10, path_headers=True, header_style="plan", max_completion_length=80
    )
    gen = torch.Generator().manual_seed(1)
    for r in generate(model, tok, ["Q: a\nCheck (B), (E), (F)\n"] * 2, cfg, generator=gen):
        assert r.finish_reason != "bad_plan" and len(r.path_lengths[0]) == 3
        assert [p.text[:3] for p in parse(r.text).blocks[0].paths] == ["(B)", "(E)", "(F)"]
    q = pw.generate(1, "w3", "test", seed=3)[0]["question"]
    assert pw.block_shares(q, "Check (A), (B), (C)\n<Parallel>") == [False]

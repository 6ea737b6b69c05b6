"""pretrain-tiny: batches, the loss that falls, exact resume, and the shipped model's accuracy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pr1lib.cli.main import main
from pr1lib.config import PretrainConfig
from pr1lib.decoding.models import TINY_MODEL_DIR, build_random_tiny, load_tiny_tokenizer
from pr1lib.store.paths import REPO_ROOT
from pr1lib.training import pretrain
from pr1lib.training.pretrain import (
    accumulate_loss,
    encode_batch,
    evaluate_accuracy,
    generate_solutions,
    score,
    step_records,
    training_pair,
)
from pr1lib.worlds.tasks import generate

SHIPPED = REPO_ROOT / TINY_MODEL_DIR


@pytest.fixture(scope="module")
def tok():
    return load_tiny_tokenizer()


def test_labels_cover_exactly_the_solution_and_eos(tok):
    records = generate(3, "hard", "train", seed=2)
    batch = encode_batch(tok, records)
    for row, record in enumerate(records):
        labels = batch["labels"][row]
        kept = labels[labels != -100].tolist()
        assert kept[-1] == tok.eos_token_id
        assert tok.decode(kept[:-1]) == training_pair(record)[1]
        assert (
            batch["attention_mask"][row].sum()
            == len(tok(''.join(training_pair(record)))["input_ids"]) + 1
        )


def test_step_batches_are_a_function_of_seed_and_step():
    cfg = PretrainConfig(batch_size=10, hard_fraction=0.3)
    assert step_records(cfg, 5) == step_records(cfg, 5)
    assert step_records(cfg, 5) != step_records(cfg, 6)
    assert step_records(cfg, 5) != step_records(cfg.replace(seed=1), 5)
    hard = [r for r in step_records(cfg, 5) if r["answer"].count("<<") >= 3]
    assert len(hard) == 3


def test_bucketed_loss_has_the_gradient_of_the_whole_batch(tok):
    model, _ = build_random_tiny(seed=0, tokenizer=tok)
    records = generate(6, "easy", "train") + generate(2, "hard", "train")
    grads = []
    for buckets in (1, 3):
        model.zero_grad()
        loss = accumulate_loss(model, tok, records, buckets)
        grads.append((loss, model.lm_head.weight.grad.clone()))
    assert grads[0][0] == pytest.approx(grads[1][0], rel=1e-5)
    assert torch.allclose(grads[0][1], grads[1][1], atol=1e-6)


def test_score_reads_the_final_answer_line():
    records = [{"answer": "#### 12"}, {"answer": "#### 12"}, {"answer": "#### 12"}]
    assert score(["x\nFinal Answer: 12", "Final Answer: 13", "12"], records) == [True, False, False]


def test_left_padded_batch_generation_matches_one_at_a_time(tok):
    model, _ = build_random_tiny(seed=0, tokenizer=tok)
    questions = [r["question"] for r in generate(3, "hard", "test")] + ["Tom has 2 pens. How many?"]
    batched = generate_solutions(model, tok, questions, max_new_tokens=12)
    alone = [generate_solutions(model, tok, [q], max_new_tokens=12)[0] for q in questions]
    assert batched == alone
    assert tok.padding_side == "right"  # restored


def test_smoke_pretrain_command_lowers_the_loss(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["pretrain-tiny", "--profile", "smoke", "--out", str(out), "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rows = (out / "loss.csv").read_text().splitlines()[1:]
    losses = [float(row.split(",")[1]) for row in rows]
    assert losses[-1] < 0.7 * losses[0]
    assert summary["final_loss"] == pytest.approx(losses[-1])
    assert {"easy_greedy", "hard_greedy", "easy_t1", "train_time_s"} <= set(summary)
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()
    assert json.loads((out / "pretrain_config.json").read_text())["max_steps"] == 10


@pytest.mark.slow
def test_interrupted_run_resumes_to_the_same_weights(tmp_path, monkeypatch):
    cfg = PretrainConfig.for_profile(
        "smoke", max_steps=6, save_steps=3, batch_size=4, num_threads=1
    )
    pretrain.pretrain(cfg, tmp_path / "straight", progress=False, evaluate=False)
    real = pretrain.step_records

    def crash_at_step_4(c, step):
        if step == 4:
            raise KeyboardInterrupt
        return real(c, step)

    monkeypatch.setattr(pretrain, "step_records", crash_at_step_4)
    with pytest.raises(KeyboardInterrupt):
        pretrain.pretrain(cfg, tmp_path / "resumed", progress=False, evaluate=False)
    assert (tmp_path / "resumed" / "checkpoint" / "state.pt").exists()
    monkeypatch.setattr(pretrain, "step_records", real)
    pretrain.pretrain(cfg, tmp_path / "resumed", progress=False, evaluate=False)
    from safetensors.torch import load_file

    a, b = (load_file(tmp_path / d / "model.safetensors") for d in ("straight", "resumed"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    # the checkpoint at step 3 fell inside a logging window (rows every 2 steps): the resumed run's
    # loss curve is the uninterrupted one, row by row (elapsed seconds aside)
    assert _curve(tmp_path / "resumed") == _curve(tmp_path / "straight")


def _curve(run: Path) -> list[tuple[str, str, str]]:
    rows = [line.split(",") for line in (run / "loss.csv").read_text().splitlines()]
    assert rows[0] == ["step", "loss", "lr", "elapsed_s"] and len(rows) > 3
    return [tuple(row[:3]) for row in rows]


class _Planted:
    """A pickle that runs code when loaded: writes a marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.write_text, (Path(self.marker), "ran"))


def test_a_planted_pickle_in_the_checkpoint_is_refused_and_never_runs(tmp_path):
    folder, marker = tmp_path / "checkpoint", tmp_path / "pwned.txt"
    folder.mkdir()
    torch.save({"step": 3, "payload": _Planted(marker)}, folder / "state.pt")
    with pytest.raises(ValueError, match="was not loaded .a pickle can run code.; delete it"):
        pretrain._load_checkpoint(folder, PretrainConfig.for_profile("smoke"))
    assert not marker.exists()


def test_a_plain_checkpoint_loads_with_weights_only(tmp_path):
    cfg = PretrainConfig.for_profile("smoke")
    state = {
        "step": 3,
        "rows": [{"step": 1, "loss": 2.5}],
        "elapsed_s": 1.0,
        "config": cfg.to_dict(),
        "model": {"w": torch.ones(2)},
        "optimizer": {"state": {}, "param_groups": [{"lr": 1e-3}]},
    }
    pretrain._save_checkpoint(tmp_path, state)
    loaded = pretrain._load_checkpoint(tmp_path, cfg)
    assert loaded["step"] == 3 and torch.equal(loaded["model"]["w"], torch.ones(2))


@pytest.mark.slow
@pytest.mark.skipif(not (SHIPPED / "model.safetensors").exists(), reason="data/tiny-base not built")
@pytest.mark.parametrize("tier", ["easy", "hard"])
def test_shipped_model_keeps_its_measured_greedy_accuracy(tier):
    """The card's held-out greedy accuracy, re-measured on the same problems: a floor 3 binomial
    standard deviations below it (a 10-point drop fails on both tiers)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    card = json.loads((SHIPPED / "card.json").read_text())
    measured, cfg = card["accuracy"][f"{tier}_greedy"], card["config"]
    n = cfg["eval_n"]
    floor = measured - 3 * (measured * (1 - measured) / n) ** 0.5
    assert measured - 0.10 < floor  # the floor is tight enough to catch a 10-point loss
    model = AutoModelForCausalLM.from_pretrained(SHIPPED).eval()
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED)
    records = generate(n, tier, "test", seed=cfg["seed"])
    accuracy = evaluate_accuracy(model, tokenizer, records, max_new_tokens=cfg["max_new_tokens"])
    assert accuracy >= floor, f"{tier}: {accuracy:.3f} < floor {floor:.3f} (card: {measured})"

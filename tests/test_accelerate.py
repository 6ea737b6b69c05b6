"""Multi-process training through accelerate: the config files parse, and a 2-process CPU (gloo) run
of ``sft`` and of ``grpo`` in the smoke profile finishes with both ranks holding the same weights,
each rank having trained on its own shard of every batch. For SFT the 2-process weights also equal
a 1-process run whose batch is the union of the two shards: data parallel = one big batch.

The runs go through ``tests/_accelerate_fingerprint.py``, which is ``python -m pr1lib ARGS`` plus a
hash of the trainable weights that every rank writes when its ``Trainer.train`` returns, the ids
of the samples it trained on at each step, and its trainable weights.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from pr1lib.store.paths import REPO_ROOT

CONFIGS = REPO_ROOT / "accelerate"
HARNESS = REPO_ROOT / "tests" / "_accelerate_fingerprint.py"
TINY_BASE = REPO_ROOT / "data" / "tiny-base"
# |2-process - 1-process| weights after 4 SFT steps: measured 1.6e-6 (summation order); 4 steps
# move the LoRA B weights by ~4e-3, and a 1-process run on one shard's 4 rows lands 7e-3 away
SAME_WEIGHTS_ATOL = 1e-4


def test_every_config_parses_with_accelerates_own_loader():
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.utils import DistributedType

    expected = {
        "1gpu": (DistributedType.NO, 1, None),
        "multi_gpu": (DistributedType.MULTI_GPU, 8, None),
        "zero2": (DistributedType.DEEPSPEED, 8, 2),
        "zero3": (DistributedType.DEEPSPEED, 8, 3),
        "cpu_2proc": (DistributedType.MULTI_GPU, 2, None),
    }
    assert {p.stem for p in CONFIGS.glob("*.yaml")} == set(expected)
    for name, (kind, procs, zero) in expected.items():
        cfg = load_config_from_file(str(CONFIGS / f"{name}.yaml"))
        assert (cfg.distributed_type, cfg.num_processes) == (kind, procs), name
        assert (cfg.deepspeed_config or {}).get("zero_stage") == zero, name
    assert load_config_from_file(str(CONFIGS / "cpu_2proc.yaml")).use_cpu is True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_two_ranks(tmp: Path, *args: str, processes: int = 2) -> list[dict]:
    """``accelerate launch`` (2 CPU processes) of ``pr1lib ARGS``; returns both ranks' fingerprints.
    ``processes=1``: plain ``python`` instead (the one-process reference); returns its one."""
    prints = tmp / "fingerprints"
    env = {
        **os.environ,
        "PR1_FINGERPRINT_DIR": str(prints),
        "PR1_RUNS_DIR": str(tmp / "runs"),
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "PYTHONWARNINGS": "ignore",
    }
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(CONFIGS / "cpu_2proc.yaml"),
        "--main_process_port",
        str(_free_port()),
        str(HARNESS),
        *args,
    ]
    if processes == 1:
        cmd = [sys.executable, str(HARNESS), *args]
    done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    return sorted(
        (json.loads(p.read_text()) for p in prints.glob("rank*-0.json")), key=lambda r: r["rank"]
    )


def _assert_in_step(ranks: list[dict], steps: int) -> None:
    assert [r["rank"] for r in ranks] == [0, 1]
    assert {(r["world_size"], r["backend"], r["global_step"]) for r in ranks} == {
        (2, "gloo", steps)
    }
    assert ranks[0]["before"] == ranks[1]["before"]  # same start
    assert ranks[0]["after"] == ranks[1]["after"]  # same end: gradients were averaged
    assert ranks[0]["values"] == ranks[1]["values"] > 0


@pytest.fixture(scope="module")
def sft_two_ranks(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("accel_sft")
    ranks = launch_two_ranks(tmp, "sft", "--profile", "smoke", "--out", str(tmp / "sft"))
    return tmp, ranks


@pytest.mark.slow
def test_sft_two_processes_agree_on_the_final_weights(sft_two_ranks):
    tmp, ranks = sft_two_ranks
    _assert_in_step(ranks, steps=4)
    assert ranks[0]["after"] != ranks[0]["before"]  # SFT really moved the adapters
    card = json.loads((tmp / "sft" / "run_card.json").read_text())
    assert card["steps"] == 4 and (tmp / "sft" / "merged" / "config.json").exists()


@pytest.mark.slow
def test_sft_two_processes_shard_the_batch_and_equal_one_process_on_the_union(
    sft_two_ranks, tmp_path
):
    """Each rank trains on 4 rows per step, the two shards are disjoint and together are the batch
    of 8 a 1-process run with ``per_device_train_batch_size=8`` trains on; averaging the two ranks'
    gradients gives that run's weights (the smoke SFT loss is a per-sample mean)."""
    tmp, ranks = sft_two_ranks
    (one,) = launch_two_ranks(
        tmp_path,
        "sft",
        "--profile",
        "smoke",
        "--out",
        str(tmp_path / "sft"),
        "--set",
        "per_device_train_batch_size=8",
        processes=1,
    )
    assert (one["world_size"], one["global_step"], one["before"]) == (1, 4, ranks[0]["before"])
    cards = [json.loads((t / "sft" / "run_card.json").read_text()) for t in (tmp, tmp_path)]
    assert cards[0]["data_hash"] == cards[1]["data_hash"]  # the same 24 rows in the same order
    shards = list(zip(ranks[0]["samples"], ranks[1]["samples"], one["samples"]))
    assert len(shards) == 4
    for step, (rank0, rank1, whole) in enumerate(shards, 1):
        assert len(rank0) == len(rank1) == 4, step  # the per-device batch
        assert not set(rank0) & set(rank1), step  # disjoint shards: no row trained twice
        assert sorted(rank0 + rank1) == sorted(whole), step  # their union: the global batch
    two = torch.load(ranks[0]["weights"], weights_only=True)
    ref = torch.load(one["weights"], weights_only=True)
    assert two.keys() == ref.keys()
    gap = max((two[n] - ref[n]).abs().max().item() for n in two)
    assert gap <= SAME_WEIGHTS_ATOL  # the averaged gradient is the big batch's gradient
    moved = max(two[n].abs().max().item() for n in two if "lora_B" in n)  # B starts at 0
    assert moved > 10 * SAME_WEIGHTS_ATOL  # ... and the tolerance is far below the update


@pytest.mark.slow
def test_grpo_two_processes_shard_the_prompts_and_agree_on_the_weights(tmp_path):
    # A random smoke model never answers right, so every reward is -1 and the advantages are 0:
    # with the pretrained tiny model (when present) and the accuracy reward the update is real.
    pretrained = (TINY_BASE / "config.json").exists()
    init = ["--init", str(TINY_BASE), "--reward", "accuracy"] if pretrained else []
    ranks = launch_two_ranks(
        tmp_path,
        "grpo",
        "--profile",
        "smoke",
        "--stage",
        "2",
        "--steps",
        "2",
        "--set",
        "weight_decay=0.0",
        "--out",
        str(tmp_path / "grpo"),
        *init,
    )
    _assert_in_step(ranks, steps=2)
    # the prompts each rank trained on: 2 whole groups (4 generations each) per rank and step,
    # disjoint between ranks, and no prompt used twice in the run (2 steps x 4 of 64 prompts)
    steps = list(zip(ranks[0]["samples"], ranks[1]["samples"]))
    assert len(steps) == 2
    for rank0, rank1 in steps:
        assert sorted(Counter(rank0).values()) == sorted(Counter(rank1).values()) == [4, 4]
        assert not set(rank0) & set(rank1)
    prompts = [p for rank0, rank1 in steps for p in {*rank0, *rank1}]
    assert len(prompts) == len(set(prompts)) == 8
    if pretrained:
        assert ranks[0]["after"] != ranks[0]["before"]
    card = json.loads((tmp_path / "grpo" / "run_card.json").read_text())
    assert card["steps"] == 2

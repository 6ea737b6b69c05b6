"""pr1lib.data.sources: one record shape from local files, the hub code path, and TinyGSM.

Run: .venv/bin/python -m pytest tests/test_data.py -q -p no:cacheprovider
"""

from __future__ import annotations

import json

import pytest
from conftest import needs_data

from pr1lib.data import sources as data
from pr1lib.format.prompts import split_gsm8k_answer
from pr1lib.store.paths import shared_data_dir

KEYS = {"id", "question", "answer_text", "answer", "source"}
SHARED = shared_data_dir()
needs_shared = needs_data("gsm8k/train.jsonl")


@needs_shared
def test_gsm8k_train_and_test_from_the_shared_folder():
    train, test = data.load_gsm8k("train"), data.load_gsm8k("test")
    assert (len(train), len(test)) == (7473, 1319)
    assert all(set(r) == KEYS for r in train[:50])
    assert len({r["id"] for r in train}) == len(train)
    first = train[0]
    assert first["answer"] == "72" and "<<48/2=24>>" in first["answer_text"]
    assert all(split_gsm8k_answer(r["answer_text"])[1] == r["answer"] for r in test)


@needs_shared
def test_dapo_from_the_shared_folder_has_answers_but_no_solutions():
    dapo = data.load_dapo()
    assert len(dapo) == 17917
    assert all(r["answer_text"] == "" and r["answer"] for r in dapo)
    assert dapo[0]["id"].startswith("dapo-") and len({r["id"] for r in dapo}) == len(dapo)


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


ROWS = [
    {"question": f"What is {i}+1?", "answer": f"{i}+1=<<{i}+1={i + 1}>>{i + 1}\n#### {i + 1}"}
    for i in range(5)
]


def test_explicit_folder_or_file_and_the_env_variable(tmp_path, monkeypatch):
    _write(tmp_path / "mine" / "gsm8k" / "train.jsonl", ROWS)
    _write(tmp_path / "flat" / "train.jsonl", ROWS[:2])
    assert len(data.load_gsm8k(path=tmp_path / "mine")) == 5
    assert len(data.load_gsm8k(path=tmp_path / "flat")) == 2
    assert len(data.load_gsm8k(path=tmp_path / "flat" / "train.jsonl", limit=1)) == 1
    monkeypatch.setenv("PR1_DATA_DIR", str(tmp_path / "mine"))
    recs = data.load_source("gsm8k", limit=3)
    assert [r["answer"] for r in recs] == ["1", "2", "3"] and recs[2]["id"] == "gsm8k-train-00002"


def test_missing_source_offline_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PR1_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(data.DataNotFoundError) as err:
        data.load_gsm8k("test")
    message = str(err.value)
    assert "PR1_DATA_DIR" in message and "load_dataset('openai/gsm8k', 'main'" in message
    assert "gsm8k/test.jsonl" in message and "OFFLINE" in message


def test_hub_path_uses_load_dataset_and_wraps_its_failures(tmp_path, monkeypatch):
    import datasets

    monkeypatch.setenv("PR1_DATA_DIR", str(tmp_path / "empty"))
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(key, raising=False)
    _write(tmp_path / "hub.jsonl", ROWS)
    calls, real_load = [], datasets.load_dataset

    def fake_hub(name, config=None, split=None):  # same call, served from a local file
        calls.append((name, config, split))
        return real_load(
            "json",
            data_files=str(tmp_path / "hub.jsonl"),
            split=split,
            cache_dir=str(tmp_path / "c"),
        )

    monkeypatch.setattr(datasets, "load_dataset", fake_hub)
    assert len(data.load_gsm8k("train")) == 5 and calls[-1] == ("openai/gsm8k", "main", "train")
    assert len(data.load_gsm8k("train", limit=2)) == 2 and calls[-1] == (
        "openai/gsm8k",
        "main",
        "train[:2]",
    )

    def no_network(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", no_network)
    with pytest.raises(data.DataNotFoundError, match="Couldn't reach") as err:
        data.load_dapo()
    assert isinstance(err.value.__cause__, ConnectionError) and "dapo/dapo_math_17k.jsonl" in str(
        err.value
    )


def test_dapo_from_the_hub_keeps_one_copy_of_each_prompt(tmp_path, monkeypatch):
    import datasets

    monkeypatch.setenv("PR1_DATA_DIR", str(tmp_path / "empty"))
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(key, raising=False)

    def hub_row(i):  # the hub's layout; its copy repeats every prompt (~100 times)
        prompt = f"Solve the following math problem.\n\nWhat is {i}+{i}?\n\nRemember."
        return {
            "prompt": [{"role": "user", "content": prompt}],
            "data_source": "math_dapo",
            "reward_model": {"ground_truth": str(2 * i)},
            "extra_info": {"index": f"u-{i}"},
        }

    _write(tmp_path / "hub.jsonl", [hub_row(i) for i in (0, 1, 2)] * 3 + [hub_row(3)] * 2)
    real_load = datasets.load_dataset

    def fake_hub(name, config=None, split=None):
        assert split == "train"  # the whole split: the first N rows could all be copies
        return real_load(
            "json",
            data_files=str(tmp_path / "hub.jsonl"),
            split=split,
            cache_dir=str(tmp_path / "c"),
        )

    monkeypatch.setattr(datasets, "load_dataset", fake_hub)
    full, first = data.load_dapo(), data.load_dapo(limit=2)
    assert [r["id"] for r in full] == ["dapo-u-0", "dapo-u-1", "dapo-u-2", "dapo-u-3"]
    assert [r["answer"] for r in first] == ["0", "2"]  # 2 distinct, not the first 2 rows


def test_dapo_hub_layout_is_unwrapped_like_the_paper():
    prompt = (
        "Solve the following math problem step by step.\n\nFind $x$ if $x+1=3$.\n\n"
        'Remember to put your answer on its own line after "Answer:".'
    )
    row = {
        "prompt": [{"role": "user", "content": prompt}],
        "reward_model": {"ground_truth": "2"},
        "extra_info": {"index": "u-1"},
    }
    assert data.dapo_record(row, 0) == {
        "id": "dapo-u-1",
        "question": "Find $x$ if $x+1=3$.",
        "answer_text": "",
        "answer": "2",
        "source": "dapo",
    }


def test_tinygsm_tiers_are_gsm8k_shaped():
    for name in ("tinygsm-easy", "tinygsm-hard"):
        recs = data.load_source(name, limit=20)
        assert len(recs) == 20 and all(set(r) == KEYS and r["source"] == name for r in recs)
        assert all(
            "<<" in r["answer_text"] and split_gsm8k_answer(r["answer_text"])[1] == r["answer"]
            for r in recs
        )
    assert data.load_source("tinygsm-easy", limit=5) == data.load_source("tinygsm-easy", limit=5)


def test_joined_sources_share_the_limit_part_by_part():
    # GRPO's --set data=tinygsm-easy+tinygsm-hard reads its problems this way
    mixed = data.load_source("tinygsm-easy+tinygsm-hard", limit=9)
    assert data.source_counts(mixed) == {"tinygsm-easy": 5, "tinygsm-hard": 4}
    assert mixed[5:] == data.load_source("tinygsm-hard", limit=4)
    assert data.source_counts(data.load_source("tinygsm-easy+tinygsm-hard", limit=1)) == {
        "tinygsm-easy": 1
    }  # a part whose share is 0 adds nothing
    whole = data.load_source("tinygsm-easy+tinygsm-hard")  # no limit: each part at its default
    assert len(whole) == 2 * len(data.load_source("tinygsm-hard"))
    with pytest.raises(ValueError, match="joined by"):
        data.load_source("tinygsm-easy+mmlu", limit=4)


def test_unknown_source_and_split_are_rejected():
    with pytest.raises(ValueError, match="unknown source"):
        data.load_source("mmlu")
    with pytest.raises(ValueError, match="no 'test' split"):
        data.load_rows("dapo", "test")

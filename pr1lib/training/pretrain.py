"""Pretrain the tiny base model on linear TinyGSM solutions, and measure its accuracy.

``python -m pr1lib pretrain-tiny --out DIR`` trains a byte-level BPE tokenizer on TinyGSM text,
builds a small Qwen3 from ``PretrainConfig`` and trains it from scratch with AdamW on fresh
problems every step (text: ``prompt_text(question, "tiny") + linear_solution(answer) + eos``, loss
on the solution only). The batch of step ``t`` is a pure function of ``(seed, t)`` and there is no
dropout, so a run is deterministic given the seed and resumes exactly from its last checkpoint.
At the end it saves the model (safetensors), tokenizer, ``loss.csv``, ``card.json`` and a model
card ``README.md``. Simplification: the paper starts from Qwen3-4B-Base; this model only knows
TinyGSM arithmetic stories, which is enough to show SFT and RL changing its behaviour on a CPU.
"""

from __future__ import annotations

import csv
import json
import math
import pickle
import platform
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from pr1lib import worlds
from pr1lib.config import PretrainConfig
from pr1lib.config.runtime import set_seed
from pr1lib.decoding.models import (
    build_random_tiny,
    tiny_tokenizer_corpus,
    train_tiny_tokenizer,
)
from pr1lib.evaluation.metrics import completion_metrics
from pr1lib.format.prompts import linear_solution, prompt_text
from pr1lib.rewards.functions import terms
from pr1lib.store.disk import DiskFull, check_room, is_disk_full


def training_pair(record: dict) -> tuple[str, str]:
    """(prompt, completion) of one GSM8K-shaped record: the tiny prompt and its linear solution.

    >>> training_pair({"question": "Tom has 2 pens.", "answer": "2+1 = <<2+1=3>>3\\n#### 3"})
    ('Problem: Tom has 2 pens.\\nSolution:\\n', '2+1 = <<2+1=3>>3\\nFinal Answer: 3')
    """
    return prompt_text(record["question"], "tiny"), linear_solution(record["answer"])


def encode_batch(tokenizer, records: list[dict]) -> dict:
    """Right-padded ``input_ids``, ``attention_mask`` and ``labels`` (-100 on prompt and padding).

    >>> from pr1lib.decoding.models import load_tiny_tokenizer
    >>> from pr1lib.worlds.tasks import generate
    >>> batch = encode_batch(load_tiny_tokenizer(), generate(2, "easy"))
    >>> same = batch["input_ids"].shape == batch["labels"].shape
    >>> same, int((batch["labels"][:, 0] == -100).all())
    (True, 1)
    """
    rows = []
    for record in records:
        prompt, completion = training_pair(record)
        p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        c_ids = tokenizer(completion, add_special_tokens=False)["input_ids"] + [
            tokenizer.eos_token_id
        ]
        rows.append((p_ids + c_ids, [-100] * len(p_ids) + c_ids))
    width = max(len(ids) for ids, _ in rows)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in rows])  # (B, L)
    labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in rows])  # (B, L)
    mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in rows])  # (B, L)
    return {"input_ids": input_ids, "attention_mask": mask, "labels": labels}


def accumulate_loss(model, tokenizer, records: list[dict], buckets: int = 2) -> float:
    """Backward the mean solution-token loss of ``records``, in length-sorted buckets (less
    padding).

    Each bucket's mean loss is weighted by its share of the labelled tokens, so the gradient is
    the one of the whole batch. Returns the batch loss.
    """
    records = sorted(records, key=lambda r: len(r["question"]) + len(r["answer"]))
    size = math.ceil(len(records) / buckets)
    batches = [encode_batch(tokenizer, records[i : i + size]) for i in range(0, len(records), size)]
    counts = [int((b["labels"][:, 1:] != -100).sum()) for b in batches]  # labelled next tokens
    total = 0.0
    for batch, count in zip(batches, counts):
        loss = model(**batch).loss * (count / sum(counts))  # scalar
        loss.backward()
        total += loss.item()
    return total


def step_records(cfg: PretrainConfig, step: int) -> list[dict]:
    """The training problems of ``step``: a pure function of ``(cfg.seed, step)``.

    >>> cfg = PretrainConfig(batch_size=4, hard_fraction=0.25)
    >>> step_records(cfg, 3) == step_records(cfg, 3), len(step_records(cfg, 3))
    (True, 4)
    """
    n_hard = round(cfg.batch_size * cfg.hard_fraction)
    seed = cfg.seed * 1_000_003 + step
    make = worlds.get(cfg.world).generate
    return make(cfg.batch_size - n_hard, "easy", "train", seed) + make(
        n_hard, "hard", "train", seed
    )


def lr_at(cfg: PretrainConfig, step: int) -> float:
    """Learning rate of ``step`` (0-based): linear warm-up, then cosine decay to ``min_lr_ratio``.

    >>> cfg = PretrainConfig(learning_rate=1.0, warmup_steps=10, max_steps=110, min_lr_ratio=0.1)
    >>> lr_at(cfg, 4), lr_at(cfg, 10), round(lr_at(cfg, 110), 3)
    (0.5, 1.0, 0.1)
    """
    if step < cfg.warmup_steps:
        return cfg.learning_rate * (step + 1) / cfg.warmup_steps
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps))
    cosine = 0.5 * (1 + math.cos(math.pi * progress))
    return cfg.learning_rate * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cosine)


def build_tokenizer_and_model(cfg: PretrainConfig):
    """A freshly trained tiny tokenizer and a randomly initialised tiny Qwen3 (seeded)."""
    corpus = tiny_tokenizer_corpus(cfg.seed, world=cfg.world)
    tokenizer = train_tiny_tokenizer(corpus, cfg.vocab_size)
    model, tokenizer = build_random_tiny(cfg.seed, tokenizer=tokenizer, cfg=cfg)
    return tokenizer, model


def tensor_bytes(obj: Any) -> int:
    """Bytes of the tensors in ``obj`` (nested dicts, lists and tuples): what saving it needs.

    >>> tensor_bytes({"w": torch.zeros(4, 2), "opt": [torch.zeros(3, dtype=torch.float16)]})
    38
    """
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def _save_checkpoint(folder: Path, state: dict) -> None:
    """``folder/state.pt``, written whole or not at all: a disk without room for it is refused
    first (``DiskFull``), and a write that still fails leaves the last checkpoint in place."""
    folder.mkdir(parents=True, exist_ok=True)
    needed = tensor_bytes(state) + (1 << 20)  # the tensors and the zip's records around them
    old = (folder / "state.pt").stat().st_size if (folder / "state.pt").exists() else 0
    check_room(folder, needed - old if old else needed)  # the old one goes once the new is whole
    tmp = folder / "state.pt.tmp"
    try:
        torch.save(state, tmp)
    except (RuntimeError, OSError) as err:
        tmp.unlink(missing_ok=True)
        if is_disk_full(err):
            raise DiskFull(folder, needed) from None
        raise
    tmp.replace(folder / "state.pt")  # atomic: an interrupt never leaves half a checkpoint


def _load_checkpoint(folder: Path, cfg: PretrainConfig) -> dict | None:
    path = folder / "state.pt"
    if not path.exists():
        return None
    try:  # weights_only: tensors and plain containers only, so a planted pickle cannot run code
        state = torch.load(path, weights_only=True)
    except pickle.UnpicklingError as err:
        raise ValueError(
            f"{path} holds more than tensors and plain values, so it was not loaded (a pickle "
            "can run code); delete it or use another --out"
        ) from err
    except (RuntimeError, EOFError, OSError, ValueError) as err:  # a file cut short or damaged
        raise ValueError(
            f"{path} is damaged or not a pretrain-tiny checkpoint (torch could not read it: "
            f"{type(err).__name__}): move it away to train from step 0, or use another --out"
        ) from err
    keys = ("config", "step", "model", "optimizer", "rows", "elapsed_s")
    if not isinstance(state, dict) or any(k not in state for k in keys):
        raise ValueError(f"{path} is not a pretrain-tiny checkpoint (it lacks {', '.join(keys)})")
    if state["config"] != cfg.to_dict():
        raise ValueError(f"{path} was made with another config; delete it or use another --out")
    return state


def train_loop(cfg: PretrainConfig, model, tokenizer, out: Path, progress: bool = True) -> dict:
    """Stage by stage: resume, then per step draw problems, forward, backward, clip, step, log,
    save."""
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    state = _load_checkpoint(out / "checkpoint", cfg) or {"step": 0, "rows": [], "elapsed_s": 0.0}
    if state["step"]:  # Stage 0: resume model, optimizer, the loss curve and its open window
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
    model.train()
    start, window = time.perf_counter() - state["elapsed_s"], list(state.get("window", []))
    bar = tqdm(
        range(state["step"], cfg.max_steps),
        initial=state["step"],
        total=cfg.max_steps,
        disable=not progress,
        desc="pretrain-tiny",
    )
    for step in bar:
        for group in opt.param_groups:  # Stage 1: learning rate of this step
            group["lr"] = lr_at(cfg, step)
        opt.zero_grad(set_to_none=True)
        records = step_records(cfg, step)  # Stage 2: fresh problems
        # Stage 3: loss, backward
        loss = accumulate_loss(model, tokenizer, records, cfg.length_buckets)
        # Stage 4: clip, update
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        opt.step()
        window.append(loss)
        if (step + 1) % cfg.logging_steps == 0 or step + 1 == cfg.max_steps:  # Stage 5: log
            elapsed = time.perf_counter() - start
            state["rows"].append(
                {
                    "step": step + 1,
                    "loss": sum(window) / len(window),
                    "lr": lr_at(cfg, step),
                    "elapsed_s": round(elapsed, 2),
                }
            )
            bar.set_postfix(loss=f"{state['rows'][-1]['loss']:.3f}")
            window = []
        if (step + 1) % cfg.save_steps == 0 and step + 1 < cfg.max_steps:  # Stage 6: checkpoint
            state.update(
                step=step + 1,
                elapsed_s=time.perf_counter() - start,
                config=cfg.to_dict(),
                model=model.state_dict(),
                optimizer=opt.state_dict(),
                window=list(window),  # the losses since the last row: the next row averages them
            )
            _save_checkpoint(out / "checkpoint", state)
    model.eval()
    return {"rows": state["rows"], "train_time_s": round(time.perf_counter() - start, 1)}


def generate_solutions(
    model,
    tokenizer,
    questions: list[str],
    temperature: float = 0.0,
    max_new_tokens: int = 256,
    batch_size: int = 64,
    seed: int = 0,
) -> list[str]:
    """The model's solutions (decoded completions) to ``questions`` with the tiny prompt.

    Greedy when ``temperature == 0``; otherwise plain sampling (no top-k / top-p) at that
    temperature, seeded. Prompts are left-padded so a batch generates together.
    """
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    sampling = (
        {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        if temperature > 0
        else {"do_sample": False}
    )
    outputs: list[str] = []
    torch.manual_seed(seed)
    try:
        for i in range(0, len(questions), batch_size):
            prompts = [prompt_text(q, "tiny") for q in questions[i : i + batch_size]]
            enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
            enc = enc.to(model.device)
            with torch.no_grad():
                ids = model.generate(
                    **enc,
                    max_new_tokens=max_new_tokens,
                    **sampling,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                )  # (b, P + T)
            outputs += tokenizer.batch_decode(
                ids[:, enc["input_ids"].shape[1] :], skip_special_tokens=True
            )
    finally:
        tokenizer.padding_side = side
    return outputs


def score(completions: list[str], records: list[dict]) -> list[bool]:
    """Whether each completion's ``Final Answer:`` equals its record's ``####`` value.

    >>> score(["3+4 = 7\\nFinal Answer: 7", "oops"], [{"answer": "#### 7"}, {"answer": "#### 1"}])
    [True, False]
    """
    return [terms(c, r["answer"]).correct for c, r in zip(completions, records)]


def evaluate_accuracy(
    model,
    tokenizer,
    records: list[dict],
    temperature: float = 0.0,
    max_new_tokens: int = 256,
    seed: int = 0,
) -> float:
    """Fraction of ``records`` the model solves (greedy by default; sampled at ``temperature``)."""
    completions = generate_solutions(
        model, tokenizer, [r["question"] for r in records], temperature, max_new_tokens, seed=seed
    )
    return completion_metrics(completions, [r["answer"] for r in records])["accuracy"]


def measure(model, tokenizer, cfg: PretrainConfig) -> dict[str, float]:
    """Accuracy on ``cfg.eval_n`` held-out test problems per tier: greedy and sampled at T=1.0."""
    result = {}
    for tier in ("easy", "hard"):
        records = worlds.get(cfg.world).generate(cfg.eval_n, tier, "test", seed=cfg.seed)
        for name, temp in (("greedy", 0.0), ("t1", 1.0)):
            acc = evaluate_accuracy(model, tokenizer, records, temp, cfg.max_new_tokens, cfg.seed)
            result[f"{tier}_{name}"] = round(acc, 4)
    return result


def write_loss_csv(rows: list[dict], path: Path) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["step", "loss", "lr", "elapsed_s"])
        writer.writeheader()
        writer.writerows(rows)


def write_card(out: Path, card: dict[str, Any]) -> None:
    """``card.json`` and a human-readable model card ``README.md`` in ``out``."""
    (out / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    world = worlds.get(card["config"].get("world", PretrainConfig.world))
    folder = world.checkpoints.get("base", str(out))
    lines = [
        f"# {Path(folder).name}: the embedded {world.title} model",
        "",
        *_card_body(card, world),
        "## Reproduce",
        "",
        "```",
        card["command"],
        "```",
        "",
        f"Load offline: `AutoModelForCausalLM.from_pretrained(\"{folder}\")` "
        f"(or `pr1lib.decoding.models.load_policy(config=ModelConfig(name=\"{folder}\"))`).",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))


def _card_body(card: dict[str, Any], world: Any) -> list[str]:
    """The model card's architecture, data, training and accuracy sections."""
    acc, cfg = card["accuracy"], card["config"]
    labels = [f" ({world.tier_labels[t]})" if t in world.tier_labels else "" for t in world.tiers]
    return [
        f"A {card['parameters'] / 1e6:.2f}M-parameter Qwen3-architecture causal LM "
        f"(hidden {cfg['hidden_size']}, {cfg['num_layers']} layers, {cfg['num_heads']} heads, "
        f"MLP {cfg['intermediate_size']}, tied embeddings, {cfg['max_position_embeddings']} "
        f"positions) with a {card['vocab_size']}-token byte-level BPE tokenizer (digits split "
        "one by one; eos = pad = `<|endoftext|>`; no parallel tags: notebook 01 adds them).",
        "",
        "## Data",
        "",
        f"Fresh {world.title} train problems every step (`{world.generate.__module__}`), "
        f"{1 - cfg['hard_fraction']:.0%} easy / {cfg['hard_fraction']:.0%} hard, as "
        '`prompt_text(q, "tiny") + linear_solution(a) + eos` (no tags); loss on the solution '
        "tokens only.",
        "",
        "## Training",
        "",
        f"{card['steps']} steps x {cfg['batch_size']} problems, AdamW lr {cfg['learning_rate']} "
        f"(warm-up {cfg['warmup_steps']}, cosine to {cfg['min_lr_ratio']}x), seed {cfg['seed']}, "
        f"{cfg['num_threads']} CPU thread(s): {card['train_time_s'] / 60:.1f} min "
        f"({card['s_per_step']:.2f} s/step) on {card['machine']}. Final loss "
        f"{card['final_loss']:.4f} (`loss.csv`).",
        "",
        "## Accuracy",
        "",
        f"Held-out test split, {cfg['eval_n']} problems per tier (`Final Answer:` vs `####`):",
        "",
        "| tier | greedy | sampled T=1.0 |",
        "|---|---|---|",
        *[
            f"| {t}{label} | {acc[f'{t}_greedy']:.1%} | {acc[f'{t}_t1']:.1%} |"
            for t, label in zip(world.tiers, labels)
        ],
        "",
        *([f"Notes: {card['notes']}", ""] if card.get("notes") else []),
    ]


def reproduce_command(cfg: PretrainConfig, out: str | Path) -> str:
    """The ``pretrain-tiny`` command line that rebuilds ``cfg`` (``--set`` for non-default fields).

    >>> reproduce_command(PretrainConfig(max_steps=5), "runs/x")
    'python -m pr1lib pretrain-tiny --out runs/x --seed 0 --set max_steps=5'
    """
    defaults = PretrainConfig().to_dict()
    sets = [
        f" --set {k}={v}"
        for k, v in cfg.to_dict().items()
        if k not in ("seed", "profile") and v != defaults[k]
    ]
    return f"python -m pr1lib pretrain-tiny --out {out} --seed {cfg.seed}" + "".join(sets)


def check_fits(cfg: PretrainConfig, tokenizer: Any, corpus: list[str]) -> None:
    """Refuse, before anything is written, a config the trained tokenizer or the texts do not
    fit: fewer tokens than ``vocab_size`` (the text has no more merges to learn), or a text longer
    than ``max_position_embeddings`` (the recorded config must be the model's)."""
    if len(tokenizer) != cfg.vocab_size:
        raise ValueError(
            f"vocab_size={cfg.vocab_size}: the tokenizer trained on {cfg.world}'s text stops at "
            f"{len(tokenizer)} tokens (no more merges to learn); set vocab_size={len(tokenizer)}"
            " or less"
        )
    longest = max(len(ids) for ids in tokenizer(corpus)["input_ids"]) + 1  # + eos
    if cfg.max_position_embeddings < longest:
        raise ValueError(
            f"max_position_embeddings={cfg.max_position_embeddings} is shorter than {cfg.world}'s"
            f" longest training text ({longest} tokens with eos): set at least {longest}"
        )


def save_model(model: Any, tokenizer: Any, cfg: PretrainConfig, rows: list[dict], out: Path):
    """The weights, tokenizer, config and ``loss.csv`` in ``out``: room checked first
    (``DiskFull``), the weights last (``model.safetensors`` marks a finished run), and a save that
    fails takes its half-written weights away again, so a rerun resumes from the checkpoint."""
    check_room(out, tensor_bytes(model.state_dict()) + (2 << 20))
    try:
        tokenizer.save_pretrained(out)
        cfg.save(out / "pretrain_config.json")
        write_loss_csv(rows, out / "loss.csv")
        model.save_pretrained(out)
    except Exception as err:
        (out / "model.safetensors").unlink(missing_ok=True)
        if is_disk_full(err):
            raise DiskFull(out, tensor_bytes(model.state_dict())) from None
        raise


def pretrain(
    cfg: PretrainConfig, out: str | Path, progress: bool = True, evaluate: bool = True
) -> dict:
    """Train (or resume) the tiny model into ``out``; returns its card (config, time, accuracy).
    What the config asks is checked against the trained tokenizer before anything is written."""
    out = Path(out)
    torch.set_num_threads(cfg.num_threads)
    set_seed(cfg.seed)
    corpus = tiny_tokenizer_corpus(cfg.seed, world=cfg.world)
    tokenizer = train_tiny_tokenizer(corpus, cfg.vocab_size)
    check_fits(cfg, tokenizer, corpus)
    model, tokenizer = build_random_tiny(cfg.seed, tokenizer=tokenizer, cfg=cfg)
    out.mkdir(parents=True, exist_ok=True)
    trained = train_loop(cfg, model, tokenizer, out, progress)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    card = {
        "config": cfg.to_dict(),
        "steps": cfg.max_steps,
        "train_time_s": trained["train_time_s"],
        "s_per_step": trained["train_time_s"] / max(1, cfg.max_steps),
        "final_loss": trained["rows"][-1]["loss"],
        "parameters": model.num_parameters(),
        "vocab_size": len(tokenizer),
        "machine": f"{platform.machine()} CPU",
        "command": reproduce_command(cfg, out),
        "accuracy": measure(model, tokenizer, cfg) if evaluate else {},
    }
    save_model(model, tokenizer, cfg, trained["rows"], out)
    if evaluate:
        write_card(out, card)
    shutil.rmtree(out / "checkpoint", ignore_errors=True)
    return card

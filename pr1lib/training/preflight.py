"""What the pre-flight doctor (``pr1lib.training.doctor``) reads besides the reward: gold
completions of a stage's problems and one dry-run group of sampled completions per prompt.

``pr1lib.training.grpo.doctor_checks`` puts them together with the session's tokenizer, prompt and
batch.
"""

from __future__ import annotations

from typing import Any

from pr1lib.config import GRPOStageConfig
from pr1lib.data.sources import load_source
from pr1lib.decoding.rollout import generate
from pr1lib.training.completions import rollout_config
from pr1lib.worlds.teachers import RuleTeacher


def gold_completions(cfg: GRPOStageConfig, n: int = 8) -> tuple[list[str], list[str]]:
    """Parallel gold completions of the stage's first ``n`` problems (the rule teacher) and their
    answers; empty for sources without worked solutions (DAPO)."""
    records = load_source(cfg.source, "train", n, seed=cfg.seed)
    teacher = RuleTeacher(seed=cfg.seed)
    pairs = [(teacher.trace(r)["text"], str(r["answer"])) for r in records]
    pairs = [(text, answer) for text, answer in pairs if "<Parallel>" in text]
    return [t for t, _ in pairs], [a for _, a in pairs]


def dry_run_groups(session: Any, n: int = 2) -> dict[str, list]:
    """``num_generations`` sampled completions for each of the first ``n`` training prompts."""
    cfg = session.cfg
    if cfg.rollout_mode == "trl":
        return {"groups": None, "answers": None}
    rows = session.dataset.select(range(min(n, len(session.dataset))))
    prompts = [p for p in rows["prompt"] for _ in range(cfg.num_generations)]
    model = session.model
    was_training = model.training
    model.eval()
    try:
        rollouts = generate(model, session.tokenizer, prompts, rollout_config(cfg))
    finally:
        model.train(was_training)
    texts = [r.text for r in rollouts]
    groups = [texts[i : i + cfg.num_generations] for i in range(0, len(texts), cfg.num_generations)]
    return {"groups": groups, "answers": list(rows["answer"])}

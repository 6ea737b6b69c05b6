"""The checkpoints of Table 2 and the headline: ``find_checkpoints`` looks for each stage's run
folder (the notebooks' and the command line's), ``evaluate_checkpoints`` scores those that exist
with ``pr1lib.evaluation.evaluate.run_eval`` (cached, resumable), and ``headline_table`` /
``write_headline`` give the short table ``make tour`` prints and puts at the top of its report.

>>> import tempfile; read_headline(tempfile.mkdtemp()) is None
True
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pr1lib.config import PROMPTS, VARIANT_ROLLOUT, EvalConfig, ModelConfig
from pr1lib.config.checks import local_folder
from pr1lib.config.recipe import STAGE_RUNS
from pr1lib.config.runtime import profile_threads, set_threads
from pr1lib.data.evalsets import load_benchmark
from pr1lib.decoding.models import checkpoint_folder
from pr1lib.evaluation.evaluate import ResultsFile, load_for_eval, results_path, run_eval
from pr1lib.evaluation.paper import PAPER_MODEL, side_by_side, stage_names, to_markdown
from pr1lib.store.jsonl import read_json
from pr1lib.store.modelfiles import model_hash, model_label
from pr1lib.store.paths import runs_dir


def find_checkpoints(
    profile: str,
    seed: int = 0,
    root: str | Path | None = None,
    defaults: dict[str, str] | None = None,
):
    """``(found, missing)``: ``found`` maps ``base`` to the profile's model and each stage of
    ``STAGE_RUNS`` with a ``merged/`` model to its run folder; ``missing`` maps the others to the
    folders that were searched. ``defaults`` (a world's shipped models: ``base``, ``sft-seen``,
    ...) stand in for the profile's model and for a stage no run folder holds.

    >>> import tempfile
    >>> found, missing = find_checkpoints("tiny", root=tempfile.mkdtemp())
    >>> found, sorted(missing)[:2]
    ({'base': 'data/tiny-base'}, ['grpo-gsm8k', 'rl-seen'])
    """
    root = Path(root) if root else runs_dir()
    defaults = defaults or {}
    found, missing = {"base": defaults.get("base") or ModelConfig.for_profile(profile).name}, {}
    for key, (_, patterns) in STAGE_RUNS.items():
        if key == "base":
            continue
        folders = [root / p.format(p=profile, s=seed) for p in patterns]
        hit = next((f for f in folders if (f / "merged").is_dir()), None)
        if hit is not None or key in defaults:
            found[key] = str(hit) if hit is not None else defaults[key]
        else:
            missing[key] = [str(f) for f in folders]
    return found, missing


def loaded_label(found: dict[str, Any], fallback: str) -> str:
    """How tables name the models ``found`` maps to (``find_checkpoints``; a run folder's
    ``merged/``): a local model folder by its own files (``modelfiles.model_label``), so a trained
    checkpoint is never called random; a name with no folder (a hub id, smoke's random model) by
    ``fallback``, the profile's ``NotebookConfig.model_label``. Several: joined by " / ".

    >>> loaded_label({"base": "data/tinyworld-base", "sft-seen": "data/tinyworld-sft"}, "smoke")
    'Qwen3 (0.92M params)'
    >>> loaded_label({"base": "random-tiny-qwen3"}, "smoke (random weights)")
    'smoke (random weights)'
    """
    labels = []
    for where in found.values():
        folder = local_folder(checkpoint_folder(where))
        whole = folder is not None and (folder / "config.json").is_file()
        labels.append(model_label(folder) if whole else fallback)
    return " / ".join(dict.fromkeys(labels)) or fallback


def results_tag(key: str, source: str) -> str:
    """The results files' tag of a stage's checkpoint: its key plus the hash of the model's content
    (``pr1lib.store.modelfiles.model_hash``), so a retrained or replaced checkpoint gets new files
    and the old ones stay as they were.

    >>> results_tag("base", "Qwen/Qwen3-4B-Base")
    'base'
    """
    folder = local_folder(checkpoint_folder(source))
    if folder is None or not (folder / "config.json").is_file():
        return key
    return f"{key}-{model_hash(folder)}"


def _cached(cfg: EvalConfig, path: Path) -> bool:
    """True when ``path`` holds a row for every problem of ``cfg`` (the model's content is in
    the file's name: ``results_tag``)."""
    rows = ResultsFile(path).rows if path.exists() else {}
    return all(str(r["id"]) in rows for r in load_benchmark(cfg.benchmark, cfg.n, seed=cfg.seed))


def evaluate_checkpoints(
    found: dict[str, str],
    profile: str,
    benchmarks: tuple[str, ...] = (),
    out: str | Path | None = None,
    progress: bool = False,
    modes: dict[str, str | None] | None = None,
    **eval_overrides: Any,
):
    """``{stage: {benchmark: summary}}`` for every checkpoint of ``found`` (``run_eval`` with the
    profile's ``EvalConfig`` + ``eval_overrides``), each rolled out and prompted as its variant
    was trained (``STAGE_RUNS``: the paper's protocol; ``modes``: variant -> rollout mode where a
    world trains it otherwise, ``worlds.World.rollout``). Results files go to ``OUT`` (one per
    stage x benchmark x mode); a complete one for the same weights is read back without loading
    the model."""
    set_threads(profile_threads(profile))
    out = Path(out) if out else runs_dir() / f"07_evaluation-{profile}" / "eval"
    results: dict[str, dict[str, dict]] = {}
    for key, source in found.items():
        variant = STAGE_RUNS.get(key, ("seen", ()))[0]
        base = EvalConfig.for_profile(
            profile,
            **{
                "prompt_style": PROMPTS[profile][variant],
                "mode": (modes or {}).get(variant) or VARIANT_ROLLOUT[variant],
                **eval_overrides,
            },
        )
        loaded = None
        for bench in benchmarks or (base.benchmark,):
            cfg, tag = base.replace(benchmark=bench), results_tag(key, source)
            if not _cached(cfg, results_path(out, tag, bench, cfg.mode)):
                loaded = loaded or load_for_eval(source, profile, say=lambda *_: None)
            model, tokenizer = loaded or (None, None)
            summary = run_eval(
                model, tokenizer, config=cfg, out_dir=out, tag=tag, progress=progress
            )
            results.setdefault(key, {})[bench] = summary
    return results


# ----------------------------------------------------------------------------- the headline table
HEADLINE_ENV = "PR1_TOUR_DIR"  # set by ``make tour``: notebook 07 writes headline.json there too
HEADLINE_FILE = "headline.json"  # others (``headline-<what>.json``, notebook 06) go below it


def headline_table(ours: dict[str, dict[str, dict]], model: str, world: str | None = None):
    """Table 2's rows, short: the paper's parallel % and Avg, then ours (parallel %, and mean@k /
    pass@k per benchmark), only for the stages we evaluated; every column says whose it is, and in
    a ``world`` the plain GRPO row says it is plain GRPO there (``paper.stage_names``).

    >>> m = dict(accuracy=.25, pass_at_k=.5, parallel_ratio=0., n=4, k=2, checker="strict")
    >>> t = headline_table({"base": {"tinygsm-hard": m}}, "tiny")
    >>> t.shape, float(t.iloc[0, 1]), float(t.iloc[0, 3])
    ((1, 5), 6.6, 25.0)
    """
    frame = side_by_side(ours, model, world=world)
    names = stage_names(world)
    frame = frame.loc[[names.get(key, key) for key in ours]]
    paper_cols = [f"paper: {PAPER_MODEL} | parallel %", f"paper: {PAPER_MODEL} | Avg"]
    keep = paper_cols + [c for c in frame.columns if c.startswith("ours:") and "Avg of" not in c]
    return frame[keep]


def write_headline(
    frame, title: str, folder: str | Path | None = None, name: str = HEADLINE_FILE
) -> list[Path]:
    """Save the headline (``rows`` + ``markdown``) as ``runs_dir()/latest-<name>`` and, when
    ``make tour`` set ``PR1_TOUR_DIR`` (or ``folder`` is given), as ``<name>`` there."""
    payload = {
        "title": title,
        "markdown": to_markdown(frame),
        "rows": json.loads(frame.reset_index().to_json(orient="records")),
    }
    targets = [runs_dir() / f"latest-{name}"]
    folder = folder or os.environ.get(HEADLINE_ENV)
    if folder:
        targets.append(Path(folder) / name)
    for path in targets:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=2))
    return targets


def read_headline(folder: str | Path) -> dict | None:
    """The headline notebook 07 wrote into ``folder`` (``None`` when there is none).

    >>> import tempfile; read_headline(tempfile.mkdtemp()) is None
    True
    """
    path = Path(folder) / HEADLINE_FILE
    return read_json(path, "move it away (notebook 07 writes it again)") if path.exists() else None


def read_headlines(folder: str | Path) -> list[dict]:
    """Every headline in ``folder``: notebook 07's first, then the others by name."""
    others = sorted(Path(folder).glob("headline-*.json"))
    return [
        h for h in [read_headline(folder)] + [read_json(p, "move it away") for p in others] if h
    ]


# the contrasts a headline reads (treatment, control): RL over its cold start, and over plain GRPO
HEADLINE_CONTRASTS = (
    ("rl-seen", "sft-seen"),
    ("rl-seen", "grpo-gsm8k"),
    ("rl-unseen-s2", "sft-unseen"),
)


def headline_intervals(ours: dict[str, dict[str, dict]], benchmark: str):
    """One row per checkpoint scored on ``benchmark``: mean@k with its 95 % interval over problems
    (``metrics.mean_interval``), pass@k, the block rate, n and k."""
    import pandas as pd

    from pr1lib.evaluation.metrics import mean_interval

    rows = {}
    for key, per_bench in ours.items():
        s = per_bench.get(benchmark)
        if s is None:
            continue
        ci = mean_interval(s["per_problem"]["accuracy"])
        rows[key] = {
            "mean@k": round(s["accuracy"], 3),
            "95% interval": f"[{ci['low']:.3f}, {ci['high']:.3f}]",
            "pass@k": round(s["pass_at_k"], 3),
            "block rate": round(s["parallel_ratio"], 3),
            "n": s["n"],
            "k": s["k"],
        }
    return pd.DataFrame(rows).T


def headline_verdict(ours: dict[str, dict[str, dict]], benchmark: str) -> list[str]:
    """What the headline shows, computed: each ``HEADLINE_CONTRASTS`` pair found in ``ours``, its
    change in points on the same problems (``paired_change``) read by ``change_words``."""
    lines = [
        change_words(
            f"{a} vs {b} on {benchmark}", paired_change(ours[a][benchmark], ours[b][benchmark])
        )
        for a, b in HEADLINE_CONTRASTS
        if benchmark in ours.get(a, {}) and benchmark in ours.get(b, {})
    ]
    return lines or [f"no pair of {HEADLINE_CONTRASTS} was scored on {benchmark}"]


def paired_change(a: dict, b: dict, key: str = "accuracy", seed: int = 0) -> dict[str, float]:
    """``a`` minus ``b`` in points for one metric of two evaluations of the same problems (their
    ``per_problem`` lists, ``pr1lib.evaluation.metrics``), with the paired-bootstrap 95 % interval
    over problems (``metrics.paired_bootstrap``).

    >>> after = {"per_problem": {"accuracy": [1.0, 0.5, 1.0, 0.75]}}
    >>> before = {"per_problem": {"accuracy": [0.5, 0.5, 0.25, 0.5]}}
    >>> paired_change(after, before)["diff"]
    37.5
    """
    from pr1lib.evaluation.metrics import paired_bootstrap

    d = paired_bootstrap(a["per_problem"][key], b["per_problem"][key], seed=seed)
    return {k: round(100 * v, 1) for k, v in d.items()}


def change_words(label: str, change: dict[str, float], what: str = "accuracy") -> str:
    """One computed line: the change, its interval and whether it is beyond the noise.

    >>> change_words("SFT vs base", {"diff": -3.0, "low": -6.5, "high": 0.5})
    'SFT vs base: accuracy -3.0 points (95 % interval -6.5 to +0.5): within the noise'
    >>> change_words("RL vs SFT", {"diff": 12.0, "low": 8.0, "high": 16.0}).split(": ")[-1]
    'higher, beyond the noise'
    """
    low, high = change["low"], change["high"]
    verdict = (
        "higher, beyond the noise"
        if low > 0
        else "lower, beyond the noise"
        if high < 0
        else "within the noise"
    )
    return (
        f"{label}: {what} {change['diff']:+.1f} points (95 % interval {low:+.1f} to "
        f"{high:+.1f}): {verdict}"
    )


def change_table(named: dict[str, dict], against: str, keys=("accuracy", "parallel")) -> list:
    """For every evaluation in ``named`` but ``against``: its change from ``against`` per metric
    of ``per_problem`` (points, 95 % interval) and the computed line (``change_words``).

    >>> named = {"base": {"per_problem": {"accuracy": [0.0, 0.5], "parallel": [0.0, 0.0]}},
    ...          "SFT": {"per_problem": {"accuracy": [0.5, 0.5], "parallel": [1.0, 1.0]}}}
    >>> rows = change_table(named, "base"); rows[0]["model"], rows[0]["accuracy Δ"]
    ('SFT', 25.0)
    """
    rows = []
    for name, result in named.items():
        if name == against:
            continue
        row: dict[str, Any] = {"model": name, "against": against}
        for key in keys:
            change = paired_change(result, named[against], key)
            row[f"{key} Δ"] = change["diff"]
            row[f"{key} 95 % interval"] = f"{change['low']:+.1f} to {change['high']:+.1f}"
            row[f"{key}: what this shows"] = change_words(f"{name} vs {against}", change, key)
        rows.append(row)
    return rows


def steps_words(row: dict[str, Any], serial: dict[str, Any]) -> str:
    """How many sequential decode steps an arm takes against the serial arm, overall and, where
    answer modes are read, on search-mode answers.

    >>> steps_words({"arm": "unseen", "mean_sequential_steps": 60.0},
    ...             {"arm": "serial", "mean_sequential_steps": 100.0})
    'unseen decodes in 0.60x the sequential steps of serial (60 vs 100)'
    """
    a, b = row["mean_sequential_steps"], serial["mean_sequential_steps"]
    words = (
        f"{row['arm']} decodes in {a / b:.2f}x the sequential steps of {serial['arm']} "
        f"({a:.0f} vs {b:.0f})"
    )
    mine, theirs = (r.get("answer_modes", {}).get("search", {}) for r in (row, serial))
    x, y = mine.get("mean_sequential_steps"), theirs.get("mean_sequential_steps")
    if x and y:
        words += f"; on search-mode answers {x / y:.2f}x ({x:.0f} vs {y:.0f})"
    return words

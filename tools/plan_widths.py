"""How likely a PlanWorld model is to name one more deal in its plan: for plans of 1, 2, 3, ...
items already written on hard problems, the mean probability (T = 1) that the next token goes on
to another item rather than closing the plan (docs/planworld.md, "Regimes tried").

    python tools/plan_widths.py runs/plan-sft/merged [--n 20] [--items 4]

RL at T = 1 can only reward widths it samples: a probability near zero after the widest plan the
cold start holds is why a width beyond it is not found.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from pr1lib.format.plans import LETTERS, PLAN_WORD  # noqa: E402 - the repository's own pr1lib
from pr1lib.format.prompts import chat_prompt  # noqa: E402


def go_on_probabilities(model, tok, questions: list[str], most: int) -> list[float]:
    """Per plan length j = 1..most: the mean probability that ``Check (A), ..., (X`` (j items)
    goes on with ``),`` (another item) rather than ``)`` (the plan's end)."""
    import torch

    go_on = tok.encode("),", add_special_tokens=False)
    if len(go_on) != 1:
        raise SystemExit(
            f"this tokenizer writes '),' as {len(go_on)} tokens: not a PlanWorld model"
        )
    out = []
    for j in range(1, most + 1):
        plan = f"{PLAN_WORD} " + ", ".join(f"({x})" for x in LETTERS[:j])
        probs = []
        for question in questions:
            text = chat_prompt(question, tok, "tiny") + plan[:-1]  # up to the last item's letter
            ids = tok(text, return_tensors="pt", add_special_tokens=False).input_ids
            with torch.no_grad():
                logits = model(ids).logits[0, -1]  # (V,)
            probs.append(float(torch.softmax(logits.float(), -1)[go_on[0]]))
        out.append(sum(probs) / len(probs))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a PlanWorld model folder (a run's merged/)")
    parser.add_argument("--n", type=int, default=20, help="hard test problems (1 to 500)")
    parser.add_argument("--items", type=int, default=4, help="plan lengths 1..ITEMS (1 to 9)")
    args = parser.parse_args(argv)
    if not 1 <= args.n <= 500 or not 1 <= args.items <= 9:
        parser.error("--n must be 1 to 500 and --items 1 to 9")
    if not (Path(args.model) / "config.json").is_file():
        parser.error(f"{args.model} holds no model (config.json): give a run's merged/ folder")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pr1lib.worlds import planworld

    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model).eval()
    questions = [r["question"] for r in planworld.generate(args.n, "hard", "test")]
    for j, p in enumerate(go_on_probabilities(model, tok, questions, args.items), start=1):
        print(f"after {j} item(s): p(one more) = {p:.2e}")


if __name__ == "__main__":
    main()

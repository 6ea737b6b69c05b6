#!/bin/sh
# Regenerate the speed cards of issue 52 (the lead decides when): from a clean commit (bench --card
# refuses a +dirty one) on a quiet machine (no other job on the cores), one after the other.
#   sh tools/speed_cards.sh [VENV]      # VENV defaults to .venv
# Then the old engine against this one, side by side (not a card; JSON under runs/bench/):
#   git worktree add /tmp/speed-base d1c6a12
#   VENV/bin/python tools/speed_compare.py --old /tmp/speed-base --rounds 5
set -e
PY="${1:-.venv}/bin/python"
"$PY" -m pr1lib bench latency --repeats 5 --card wideworld-latency --overwrite-card
"$PY" -m pr1lib bench engine --repeats 3 --card bench-engine --overwrite-card
"$PY" -m pr1lib bench grpo --steps 3 --repeats 2 --card grpo-speed --overwrite-card

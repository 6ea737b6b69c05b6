# pr1 — one venv, a few commands. `make test` and `make tour` install what they need themselves.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# CPU wheel where no CUDA driver is present (pip takes it from PyPI or a local wheel cache).
TORCH_SPEC ?= torch==2.13.0
STAMP  := $(VENV)/.installed

.PHONY: help venv test tour lab sync outputs repo-url bench clean

help:
	@echo "make test   - create .venv if missing, install, lint (ruff), run every test (unit, property, notebooks in smoke)"
	@echo "make tour   - run the whole tutorial headless on the tiny profile and write runs/tour-*/report.html"
	@echo "make lab    - open JupyterLab on notebooks/"
	@echo "make sync   - regenerate the .ipynb twins from the jupytext .py sources (and vice versa)"
	@echo "make outputs - run the notebooks (tiny) and write their twins with outputs; ONLY=\"04 06\" for some"
	@echo "make repo-url URL=https://github.com/OWNER/NAME - point every badge and install cell at a fork"
	@echo "make bench  - speed/memory benchmarks, JSON into runs/bench/"

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[dev,notebooks]"
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check .
	PR1_PROFILE=smoke $(BIN)/python -m pytest

tour: $(STAMP)
	$(BIN)/python -m pr1lib tour --profile tiny

lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir=. --ServerApp.default_url=/lab/tree/notebooks  # repo root: docs/ links open

sync: $(STAMP)
	$(BIN)/jupytext --sync --set-kernel python3 notebooks/[0-9][0-9]_*.py

outputs: $(STAMP)
	$(BIN)/python -m pr1lib outputs --profile tiny $(if $(ONLY),--only $(ONLY))

repo-url: $(STAMP)
	@test -n "$(URL)" || { echo "usage: make repo-url URL=https://github.com/OWNER/NAME"; exit 2; }
	$(BIN)/python -m pr1lib repo-url $(URL)

bench: $(STAMP)
	$(BIN)/python -m pr1lib bench all --out runs/bench

clean:
	rm -rf runs/tour-* .pytest_cache

# pr1 — one venv, a few commands. `make test` and `make tour` install what they need themselves.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# torch is pinned here and installed first (pip takes a CPU wheel from a local wheel cache where
# there is one, else PyPI's build for the platform); everything else comes from the lock.
TORCH_VERSION ?= 2.13.0
TORCH_SPEC ?= torch==$(TORCH_VERSION)
LOCK   := requirements.lock
STAMP  := $(VENV)/.installed
# LOCKED=0 installs the newest versions pyproject.toml allows instead (make test-latest)
LOCKED ?= 1

.PHONY: help venv test test-latest lock tour lab sync outputs repo-url bench clean

help:
	@echo "make test   - create .venv if missing, install from the lock, lint and format-check (ruff), run every test"
	@echo "make test-latest - the same suite in .venv-latest on the newest versions pyproject.toml allows (drift report first)"
	@echo "make lock   - re-resolve requirements.lock (and the colab extra's pins) on purpose; then make test"
	@echo "make tour   - run the whole tutorial headless on the tiny profile and write runs/tour-*/report.html"
	@echo "make lab    - open JupyterLab on notebooks/"
	@echo "make sync   - regenerate the .ipynb twins from the jupytext .py sources (and vice versa)"
	@echo "make outputs - run the notebooks (tiny) and write their twins with outputs; ONLY=\"04 06\" for some"
	@echo "make repo-url URL=https://github.com/OWNER/NAME [BRANCH=b] - point every badge and install cell at a fork"
	@echo "make bench  - speed/memory benchmarks, JSON into runs/bench/"

venv: $(STAMP)

$(STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -c "import importlib.metadata as m, sys; sys.exit(m.version('torch').split('+')[0] != '$(TORCH_VERSION)')" 2>/dev/null \
		|| $(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
ifeq ($(LOCKED),1)
	$(BIN)/python -m pip install --quiet --require-hashes -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
else
	$(BIN)/python -m pip install --quiet --upgrade --upgrade-strategy eager -e ".[dev,notebooks]"
endif
	$(BIN)/python -m pip check
	mkdir -p $(VENV)/etc/jupyter/labconfig
	cp tools/jupyter/labconfig/default_setting_overrides.json $(VENV)/etc/jupyter/labconfig/
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	PR1_PROFILE=smoke $(BIN)/python -m pytest

# the newest allowed versions, in their own venv: an upstream release shows up here as a report,
# not as a broken `make test` (tests/README.md)
test-latest:
	rm -f $(VENV)-latest/.installed
	$(MAKE) --no-print-directory $(VENV)-latest/.installed VENV=$(VENV)-latest LOCKED=0
	$(VENV)-latest/bin/python tools/lock.py drift
	$(MAKE) --no-print-directory test VENV=$(VENV)-latest LOCKED=0

lock:
	$(PYTHON) tools/lock.py compile

tour: $(STAMP)
	$(BIN)/python -m pr1lib tour --profile tiny

# JupyterLab from this venv never autosaves: Run All leaves the committed twins as they are until
# you save (git checkout notebooks/ brings back the committed outputs)
LABCONFIG := $(VENV)/etc/jupyter/labconfig/default_setting_overrides.json
$(LABCONFIG): tools/jupyter/labconfig/default_setting_overrides.json $(STAMP)
	mkdir -p $(dir $@) && cp $< $@

lab: $(STAMP) $(LABCONFIG)
	$(BIN)/jupyter lab --ServerApp.root_dir=. --ServerApp.default_url=/lab/tree/notebooks  # repo root: docs/ links open

sync: $(STAMP)
	$(BIN)/jupytext --sync --set-kernel python3 notebooks/[0-9][0-9]_*.py

outputs: $(STAMP)
	$(BIN)/python -m pr1lib outputs --profile tiny $(if $(ONLY),--only $(ONLY))

# URL and BRANCH reach the shell as environment variables, quoted: a URL holding & ; | or spaces
# is one argument (and its error the target's), never a second shell command
repo-url: $(STAMP)
	@test -n "$$URL" || { echo "usage: make repo-url URL=https://github.com/OWNER/NAME"; exit 2; }
	$(BIN)/python -m pr1lib repo-url "$$URL" $(if $(BRANCH),--branch "$$BRANCH")

bench: $(STAMP)
	$(BIN)/python -m pr1lib bench all --out runs/bench

clean:
	rm -rf runs/tour-* .pytest_cache

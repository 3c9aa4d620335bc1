# The two commands the README promises on a fresh machine:
#   make demo   install into .venv, then run the main job
#   make test   install into .venv, then run the whole test suite
# Both go through `make install`, which does nothing when .venv is up to date.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.dlbench-installed
# torch 2.13.0 is pinned exactly because that version is the CPU build on hand;
# installed first, so `dlbench[cpu]`'s torch>=2.13.0 is already satisfied and
# pip never pulls a multi-GB CUDA build.
TORCH  := torch==2.13.0

DEMO_ARGS ?= --batch-size 16 --warmup-steps 2 --steps 6

.PHONY: install demo test clean

install: $(STAMP)

$(STAMP): setup.py pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -e '.[cpu,test]'
	@touch $(STAMP)

demo: install
	$(VENV)/bin/dlbench env
	$(VENV)/bin/dlbench train resnet50 $(DEMO_ARGS) --out runs/demo --json runs/demo/train.json

test: install
	$(PY) tests/suites.py $(PYTEST_ARGS)

clean:
	rm -rf runs results .pytest_cache

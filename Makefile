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

DEMO      ?= runs/demo
TRAIN_ARGS ?= --batch-size 16 --warmup-steps 2 --steps 6
BENCH_ARGS ?= --batch-sizes 1,8,32 --warmup 2 --max-warmup 10 --min-iterations 5 \
              --min-duration 2 --timeout 900
R50       := $(DEMO)/resnet50

.PHONY: install demo test clean

install: $(STAMP)

$(STAMP): setup.py pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -e '.[cpu,test]'
	@touch $(STAMP)

# Train ResNet-50 in the three frameworks, export each checkpoint to verified
# ONNX, then benchmark the ONNX model and the native checkpoints on every
# backend this machine has.  Each step prints its table.
demo: install
	$(VENV)/bin/dlbench env
	$(VENV)/bin/dlbench train resnet50 $(TRAIN_ARGS) --out $(DEMO) --json $(DEMO)/train.json
	$(VENV)/bin/dlbench export $(R50)/pytorch $(R50)/tensorflow $(R50)/mindspore \
	    --json $(DEMO)/export.json
	$(VENV)/bin/dlbench bench $(R50)/pytorch/model.onnx $(R50)/pytorch $(R50)/tensorflow \
	    $(R50)/mindspore --backend all $(BENCH_ARGS) --json $(DEMO)/bench.json

test: install
	$(PY) tests/suites.py $(PYTEST_ARGS)

clean:
	rm -rf runs results .pytest_cache

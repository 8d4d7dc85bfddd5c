# The README's commands. Everything runs from .venv, which these targets build.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_TARGET ?= fixtures/workloads/matmul_add.py::matmul_add
DEMO_TRACE ?= fixtures/matmul_add_8192/trace.json.gz

.PHONY: venv demo test lint typecheck pytest bench clean vsix vscode-e2e

venv: $(VENV)/.ready

# torch 2.13.0 (+ numpy) only where the venv has no torch: kernelscope itself never pulls it in.
# accelerate (the tests' `accelerate launch` programs) after it, so pip keeps that torch.
$(VENV)/.ready: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -c 'import torch' 2>/dev/null || $(PY) -m pip install -q torch==2.13.0 numpy
	$(PY) -c 'import accelerate' 2>/dev/null || $(PY) -m pip install -q accelerate==1.16.0
	touch $@

demo: venv
	$(VENV)/bin/kernelscope profile $(DEMO_TARGET)
	@echo
	$(VENV)/bin/kernelscope analyze $(DEMO_TRACE)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

typecheck: venv
	$(VENV)/bin/pyright

pytest: venv
	$(PY) -m pytest -q

test: lint typecheck pytest

bench: venv
	$(PY) bench/warm_overhead.py
	$(PY) bench/loop_latency.py --jobs 4

clean:
	rm -rf $(VENV) .kernelscope .pytest_cache .ruff_cache

# The VS Code extension: npm ci (the npm registry or its local cache), typecheck, esbuild bundle,
# vsce package -> editor-client/vscode/kernelscope-<version>.vsix
VSCODE_DIR := editor-client/vscode
VSIX_VERSION = $(shell node -p "require('./$(VSCODE_DIR)/package.json').version")

vsix:
	cd $(VSCODE_DIR) && npm ci --no-audit --no-fund --prefer-offline
	cd $(VSCODE_DIR) && npx vsce package --no-dependencies --skip-license --allow-missing-repository \
		--no-rewrite-relative-links -o kernelscope-$(VSIX_VERSION).vsix

# The extension in real VS Code (code-server + chromium), as tests/e2e/vscode/test_vscode.py runs it.
vscode-e2e: vsix venv
	bash $(VSCODE_DIR)/e2e/ci-e2e.sh $(VSCODE_DIR)/kernelscope-$(VSIX_VERSION).vsix $(PY)

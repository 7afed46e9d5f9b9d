# Wonda: `make run` starts everything on a fresh machine; `make test` runs the whole suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test install browser check bench stop docs docs-build

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first and pinned: pip takes the CPU wheel on local disk instead of a CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Chromium for the end-to-end tests (Debian's package; Playwright drives it, no download).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Debian's chromium for the browser tests..."; \
	  apt-get update -q && apt-get install -y -q chromium; }

run: install
	$(BIN)/python manage.py bootstrap
	$(BIN)/python manage.py serve

test: install browser
	$(BIN)/python -m pytest $(PYTEST_ARGS)

check: install
	$(BIN)/python manage.py check
	$(BIN)/python manage.py makemigrations --check --dry-run

bench: install
	$(BIN)/python manage.py bench_memory

# The embedded PostgreSQL and Redis keep running after `make run` (so the next start is fast).
stop:
	$(BIN)/python manage.py stop_embedded

# The documentation site (MkDocs, Material theme): docs/ and mkdocs.yml; it builds into var/site.
docs: install
	$(BIN)/mkdocs serve -a 127.0.0.1:8001

docs-build: install
	$(BIN)/mkdocs build --strict

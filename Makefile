# deltakeeper — the two commands a newcomer needs are `make run` and `make test`.
PY := .venv/bin/python
PYTEST := $(PY) -m pytest
DEMO := demo-lake/events

.PHONY: setup run test test-fast test-unit test-conformance test-integration lint bench clean

setup:
	@scripts/bootstrap.sh

run: setup
	@$(PY) scripts/demo_table.py $(DEMO)
	@.venv/bin/deltakeeper inspect $(DEMO)

test: setup
	$(PYTEST) tests -q -p no:cacheprovider

test-fast: setup
	$(PYTEST) tests/unit tests/conformance -q -p no:cacheprovider

test-unit: setup
	$(PYTEST) tests/unit -q -p no:cacheprovider

lint: setup
	.venv/bin/ruff check operator
	.venv/bin/ruff format --check operator
	.venv/bin/mypy

bench: setup
	$(PY) -m benchmarks.snapshot_load

clean:
	rm -rf .venv demo-lake .pytest_cache .mypy_cache .ruff_cache

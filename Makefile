# deltakeeper — the two commands a newcomer needs are `make run` and `make test`.
PY := .venv/bin/python
PYTEST := $(PY) -m pytest
DEMO := demo-lake/events

.PHONY: setup run test test-deps test-fast test-unit lint bench bench-maintenance clean

setup:
	@scripts/bootstrap.sh

run: setup
	@$(PY) scripts/demo_table.py $(DEMO)
	@.venv/bin/deltakeeper inspect $(DEMO)

# Everything the suite starts (MinIO, Azurite, fake-gcs-server, Spark with Delta jars) is
# installed by these scripts and cached under ${XDG_CACHE_HOME:-~/.cache}/deltakeeper.
test-deps: setup
	@scripts/stores/install.sh >/dev/null
	@scripts/spark/install.sh >/dev/null

test: test-deps
	$(PYTEST) tests -q -p no:cacheprovider -rfE

test-fast: setup
	$(PYTEST) tests/unit tests/conformance -q -p no:cacheprovider -m "not spark"

test-unit: setup
	$(PYTEST) tests/unit -q -p no:cacheprovider

lint: setup
	.venv/bin/ruff check operator
	.venv/bin/ruff format --check operator
	.venv/bin/mypy

bench: setup
	$(PY) -m benchmarks.snapshot_load

# Issue 3: checkpoint (vs delta-rs and Delta Spark) and log cleanup on MinIO; takes ~1 hour.
bench-maintenance: test-deps
	$(PY) -m benchmarks.checkpoint --spark-repeats 1
	$(PY) -m benchmarks.cleanup

clean:
	rm -rf .venv demo-lake .pytest_cache .mypy_cache .ruff_cache

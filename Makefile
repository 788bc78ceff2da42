# deltakeeper — the two commands a newcomer needs are `make run` and `make test`.
PY := .venv/bin/python
PYTEST := $(PY) -m pytest

.PHONY: setup run test test-deps test-fast test-unit lint images bench bench-maintenance bench-operator bench-compaction bench-discovery clean

setup:
	@scripts/bootstrap.sh

# The demo: delta-rs keeps appending to ./demo-lake/events while `deltakeeper run` (standalone
# mode) checkpoints, cleans and vacuums it; metrics on :9108. Ctrl-C stops it.
run: setup
	@$(PY) scripts/demo.py

# Everything the suite starts (MinIO, Azurite, fake-gcs-server, Spark with Delta jars, etcd and
# kube-apiserver) or runs (helm, kubeconform, Prometheus and promtool) is installed by these scripts, cached under
# ${XDG_CACHE_HOME:-~/.cache}/deltakeeper.
test-deps: setup
	@scripts/test_deps.sh

# TEST_WORKERS=N runs the suite on N pytest-xdist workers (tests/conftest.py says which tests
# share a worker); 0, the default until a parallel run is measured green, runs it in this
# process, in order, as before.
TEST_WORKERS ?= 0
test: test-deps
	$(PYTEST) tests -q -p no:cacheprovider -rfE --durations=25 \
		-n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

test-fast: setup
	$(PYTEST) tests/unit tests/conformance -q -p no:cacheprovider -m "not spark"

test-unit: setup
	$(PYTEST) tests/unit -q -p no:cacheprovider

lint: setup
	.venv/bin/ruff check operator tests benchmarks scripts
	$(PY) scripts/gen_crds.py --check
	.venv/bin/ruff format --check operator tests benchmarks scripts
	.venv/bin/mypy
	.venv/bin/hadolint Dockerfile Dockerfile.spark
	scripts/native.sh lint

# The operator and compaction images, built with buildah on local Debian bases (scripts/image/).
images: test-deps
	@scripts/image/build.sh operator
	@scripts/image/build.sh spark

bench: setup
	$(PY) -m benchmarks.snapshot_load

# Issue 3: checkpoint (vs delta-rs and Delta Spark) and log cleanup on MinIO; takes ~1 hour.
bench-maintenance: test-deps
	$(PY) -m benchmarks.checkpoint --spark-repeats 1
	$(PY) -m benchmarks.cleanup

# Issue 4: the operator against 1,000 DeltaTables on a real API server; about 10 minutes.
bench-operator: test-deps
	$(PY) -m benchmarks.operator --tables 1000

# Spark compaction against a hand-run OPTIMIZE and delta-rs, then the planner on 1,000,000 files.
bench-compaction: test-deps
	$(PY) -m benchmarks.compaction

# Issue 15: discover() against a full recursive listing on MinIO (10,000 small tables, then 10
# big ones); most of its ~30 minutes is uploading 90,000 objects.
bench-discovery: test-deps
	$(PY) -m benchmarks.discovery

clean:
	rm -rf .venv demo-lake .pytest_cache .mypy_cache .ruff_cache

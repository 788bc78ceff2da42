# deltakeeper — the two commands a newcomer needs are `make run` and `make test`.
PY := .venv/bin/python
PYTEST := $(PY) -m pytest

.PHONY: setup run test test-deps test-fast test-unit test-conformance test-integration test-e2e test-chart test-image test-monitoring lint lock images bench bench-maintenance bench-operator bench-compaction bench-discovery bench-vacuum clean

setup:
	@scripts/bootstrap.sh

# The demo: delta-rs keeps appending to ./demo-lake/events while `deltakeeper run` (standalone
# mode) checkpoints, cleans, vacuums and (with Java 17) compacts it; metrics on :9108. Ctrl-C
# stops it.
run: setup
	@$(PY) scripts/demo.py

# Everything the suite starts (MinIO, Azurite, fake-gcs-server, Spark with the Delta and s3a
# jars, etcd, kube-apiserver and kube-controller-manager) or runs (helm, kubeconform, Prometheus
# and promtool, buildah and mmdebstrap) is installed by scripts/test_deps.sh, cached under
# ${XDG_CACHE_HOME:-~/.cache}/deltakeeper (docs/testing.md).
test-deps: setup
	@scripts/test_deps.sh

# The suite runs on TEST_WORKERS pytest-xdist workers (tests/conftest.py says which tests share
# a worker): three on two cores, since most tests wait on a service or a subprocess. 0 runs it
# in this process, in order.
# It prints its wall time against TEST_BUDGET minutes (issue 50: CI on a warm cache within 20
# minutes) and the 25 slowest tests, and names the tests over 60 s without a "Slow:" line in
# their docstring (tests/support/timing.py).
TEST_WORKERS ?= 3
TEST_BUDGET ?= 20
test: test-deps
	$(PYTEST) tests -q -p no:cacheprovider -rfE --durations=25 --time-budget $(TEST_BUDGET) \
		-n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

# The loop to run while working (README): CPU-bound tests, so one worker a core.
FAST_WORKERS ?= 2
test-fast: setup
	$(PYTEST) tests/unit tests/conformance -q -p no:cacheprovider -m "not spark" -n $(FAST_WORKERS)

# One layer of the suite at a time. `make test-unit LAYER=runtime` runs the unit tests of one
# package (tests/unit/<layer>/ mirrors operator/deltakeeper/<layer>/).
test-unit: setup
	$(PYTEST) tests/unit/$(LAYER) -q -p no:cacheprovider

test-conformance: test-deps
	$(PYTEST) tests/conformance -q -p no:cacheprovider

test-integration test-e2e test-chart test-image test-monitoring: test-deps
	$(PYTEST) tests/$(@:test-%=%) -q -p no:cacheprovider -rfE

lint: setup
	.venv/bin/ruff check operator tests benchmarks scripts
	$(PY) scripts/gen_crds.py --check
	$(PY) scripts/gen_docs.py --check
	$(PY) scripts/lock.py --check
	.venv/bin/ruff format --check operator tests benchmarks scripts
	.venv/bin/mypy
	.venv/bin/hadolint Dockerfile Dockerfile.spark
	scripts/native.sh lint

# The operator image's pinned, hashed dependencies (requirements/operator.lock) after a change to
# pyproject.toml's; `$(PY) scripts/lock.py --upgrade` moves every pin to the newest release.
lock: setup
	$(PY) scripts/lock.py

# The operator and compaction images, built with buildah on local Debian bases (scripts/image/).
images: test-deps
	@scripts/image/build.sh operator
	@scripts/image/build.sh spark

# Loading the latest snapshot of a 1,000,000-file table, against delta-rs.
bench: setup
	$(PY) -m benchmarks.snapshot_load

# Checkpoint writing against delta-rs and Delta Spark, and the delete requests of a log cleanup
# on MinIO; about an hour.
bench-maintenance: test-deps
	$(PY) -m benchmarks.checkpoint --spark-repeats 1
	$(PY) -m benchmarks.checkpoint_minio
	$(PY) -m benchmarks.cleanup

# One operator against 1,000 DeltaTables on a real API server (CPU, memory, commit-to-status
# time), then the standalone daemon's CPU a poll on 1,000 MinIO tables; about 15 minutes.
bench-operator: test-deps
	$(PY) -m benchmarks.operator --tables 1000
	$(PY) -m benchmarks.daemon_poll

# Spark compaction against a hand-run OPTIMIZE and delta-rs, then the planner on 1,000,000 files.
bench-compaction: test-deps
	$(PY) -m benchmarks.compaction

# Finding the tables under a prefix level by level, against a full recursive listing on MinIO
# (10,000 small tables, then 10 big ones); most of its ~30 minutes is uploading 90,000 objects.
bench-discovery: test-deps
	$(PY) -m benchmarks.discovery

# Vacuum LITE, FULL and INVENTORY against delta-rs and Delta Spark: 100,000 files on MinIO, then
# 1,000,000 on the local disk; most of the time is uploading the objects and Spark's VACUUMs.
bench-vacuum: test-deps
	$(PY) -m benchmarks.vacuum
	$(PY) -m benchmarks.vacuum --store local --files 1000000

clean:
	rm -rf .venv demo-lake .pytest_cache .mypy_cache .ruff_cache

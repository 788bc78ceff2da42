"""maintenance/operations/: the registry, each operation whole, in the order a plan runs them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from deltakeeper.delta.vacuum.info import InfoStatus, LastVacuumInfo
from deltakeeper.delta.vacuum.modes import Mode
from deltakeeper.maintenance import record
from deltakeeper.maintenance.memory import Holding
from deltakeeper.maintenance.operations import Operation, registry
from deltakeeper.maintenance.operations.outcome import Outcome, Result
from deltakeeper.maintenance.operations.registry import (
    DELETES,
    REGISTRY,
    SPARK,
    WRITERS,
    estimate,
    in_order,
)
from deltakeeper.maintenance.operations.vacuum import VacuumRun
from deltakeeper.resources.conditions import Reason

CRD = Path(__file__).resolve().parents[3] / "crds" / "deltatable.yaml"


def test_a_plan_runs_the_operations_in_their_order() -> None:
    assert list(Operation) == [
        "checkpoint",
        "expire",
        "compaction",
        "cleanup",
        "vacuum",
        "stats",
        "logCompaction",
        "manifest",
    ]
    assert tuple(REGISTRY) == tuple(Operation)
    assert in_order(["manifest", Operation.CHECKPOINT, "vacuum", "checkpoint"]) == (
        Operation.CHECKPOINT,
        Operation.VACUUM,
        Operation.MANIFEST,
    )


def test_what_the_registry_derives_from_the_specs() -> None:
    assert DELETES == {Operation.CLEANUP: "log", Operation.VACUUM: "data"}
    assert WRITERS == (Operation.STATS, Operation.LOG_COMPACTION, Operation.MANIFEST)
    assert SPARK == (Operation.CHECKPOINT, Operation.VACUUM)


@pytest.mark.parametrize("op", list(Operation))
def test_every_operation_is_whole(op: Operation) -> None:
    """What each front-end reads of an operation: a forgotten part fails here, not on a poll."""
    spec = REGISTRY[op]
    assert spec.operation is op
    assert spec.summary and callable(spec.plan) and callable(spec.run)
    assert spec.done_reason.isalpha() and spec.done_reason[0].isupper(), "CamelCase, as Events"
    assert spec.done_reason not in set(Reason), "its own, not a condition's"
    held = Holding(1000, 10, 20)
    assert estimate(op, held) > estimate(op, Holding(0, 0, 0)) > 0
    done = Outcome(op, Result.DONE, "wrote it", seconds=1.5, version=3, job_id="j")
    assert isinstance(spec.done_message(done), str) and spec.done_message(done)
    if spec.dry_run_event is not None:
        assert spec.dry_run_event(Outcome(op, Result.DRY_RUN, ""))[0].isalpha()
    spark = (spec.spark or spec.then, spec.spark_done, spec.engine)
    assert all(s is None for s in spark) or all(spark), "a Spark job's step, end and setting"


def _outcomes(op: Operation) -> list[Outcome]:
    """Outcomes of `op` with every optional part it can have filled in."""
    plain = Outcome(op, Result.DONE, "done", written_files=2, deleted_files=1)
    spark = Outcome(op, Result.DONE, "on Spark", job_id="job-1")
    out = [plain, spark]
    if op is Operation.VACUUM:
        info = LastVacuumInfo(InfoStatus.RECORDED, 4)
        run = VacuumRun(Mode.FULL, "why", 3, 5, {"list": 2}, (1, 4), info, 9)
        out.append(Outcome(op, Result.DONE, "vacuumed", detail=run))
    return out


@pytest.mark.parametrize("op", list(Operation))
def test_each_lastmaintenance_entry_has_only_its_listed_fields(op: Operation) -> None:
    allowed = set(record.fields(op)) | {record.TIME_MS}
    for o in _outcomes(op):
        entry = record.entry(o, 7, 1_700_000_000_000, {"lastFull": "2026-01-01T00:00:00Z"})
        assert set(entry) <= allowed, f"{op}: {set(entry) - allowed} are not in record.fields"
        assert {str(f) for f in record.COMMON} <= set(entry)
        spark = o.job_id is not None and REGISTRY[op].spark_done is not None
        assert (entry.get("engine") == "spark") is spark


def test_the_generated_crd_covers_every_run_field_of_every_operation() -> None:
    """crds/ is generated (scripts/gen_crds.py); this reads the file users apply."""
    crd = yaml.safe_load(CRD.read_text())
    version = crd["spec"]["versions"][0]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    runs = status["lastMaintenance"]["properties"]
    assert set(runs) == {str(op) for op in Operation}
    for op in Operation:
        assert set(runs[op]["properties"]) == set(record.fields(op)), op


def test_each_operation_lives_in_the_module_of_its_name() -> None:
    assert registry.module_name(Operation.LOG_COMPACTION) == "log_compaction"
    assert registry.module_name(Operation.CHECKPOINT) == "checkpoint"
    for op, spec in REGISTRY.items():
        assert spec.run.__module__.endswith(f".operations.{registry.module_name(op)}")


def test_a_module_without_its_spec_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """An operation whose module lacks SPEC (or holds another's) fails at import, by name."""
    monkeypatch.setattr(registry, "module_name", lambda op: "manifest")
    with pytest.raises(TypeError, match=r"operations\.manifest must define SPEC.*checkpoint"):
        registry._load(Operation.CHECKPOINT)


def test_every_operation_event_is_documented() -> None:
    """docs/resources.md's events table names each operation's events (kubectl describe)."""
    docs = (CRD.parents[1] / "docs" / "resources.md").read_text()
    for op, spec in REGISTRY.items():
        assert f"`{spec.done_reason}`" in docs, op
        if spec.dry_run_event is not None:
            reason, _ = spec.dry_run_event(Outcome(op, Result.DRY_RUN, ""))
            assert f"`{reason}`" in docs, op

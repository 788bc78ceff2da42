"""runtime/conditions.py: which conditions hold after a poll, what a failed poll is called, the
events of conditions that change, and the events of maintenance done."""

from __future__ import annotations

import inspect

import pytest

from deltakeeper.delta import errors
from deltakeeper.delta.errors import (
    CorruptLogError,
    InvalidInputError,
    NotADeltaTableError,
    StorageUnreachableError,
    UnsupportedProtocolError,
)
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations.checkpoint import CheckpointRun
from deltakeeper.maintenance.operations.outcome import Outcome, Result
from deltakeeper.maintenance.policy import PolicyError
from deltakeeper.resources.conditions import (
    TABLE_CONDITIONS,
    ConditionStatus,
    ConditionType,
    EventType,
    Reason,
)
from deltakeeper.runtime import conditions
from deltakeeper.runtime.model import Condition, Problem, Target

T, F, U = ConditionStatus.TRUE, ConditionStatus.FALSE, ConditionStatus.UNKNOWN
TARGET = Target("ns", "t", "s3://bucket/t")


def states(found: list[Condition]) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in found}


def test_a_problem_stops_the_poll_before_any_request() -> None:
    problem = Problem(Reason.SECRET_NOT_FOUND, "no Secret")
    found = conditions.table_conditions(TARGET, None, problem, None, {})
    assert [c.type for c in found] == list(TABLE_CONDITIONS)
    assert states(found) == {
        "Ready": (F, "SecretNotFound"),
        "StorageReachable": (U, "NotChecked"),
        "ProtocolSupported": (U, "NotChecked"),
        "Degraded": (F, "AsExpected"),
    }


def test_each_failed_poll_says_what_the_store_did() -> None:
    def after(error: BaseException) -> dict[str, tuple[str, str]]:
        return states(conditions.table_conditions(TARGET, None, None, error, {}))

    unreachable = after(StorageUnreachableError("no answer; check the endpoint"))
    assert unreachable["StorageReachable"] == (F, "StorageUnreachable")
    assert unreachable["Ready"] == (F, "StorageUnreachable")
    # The store answered, but not with a table.
    assert after(NotADeltaTableError("x"))["StorageReachable"] == (T, "Reachable")
    # A spec problem found before any request: the store was not asked.
    assert after(InvalidInputError("x"))["StorageReachable"] == (U, "NotChecked")
    assert after(PolicyError("x"))["Ready"] == (F, "InvalidPolicy")
    refused = after(UnsupportedProtocolError("x"))
    assert refused["ProtocolSupported"] == (F, "UnsupportedProtocol")
    assert after(CorruptLogError("x"))["Ready"] == (F, "CorruptLog")
    assert after(RuntimeError("a bug"))["Ready"] == (F, "Error")


def test_a_message_gets_a_hint_unless_it_says_what_to_check_already() -> None:
    assert conditions.classify(CorruptLogError("bad line 3")) == (
        Reason.CORRUPT_LOG,
        "bad line 3; the log needs a repair; nothing is written meanwhile",
    )
    said = "no answer from the endpoint; check the network"
    assert conditions.classify(StorageUnreachableError(said))[1] == said


def test_suspend_keeps_ready_with_its_own_reason() -> None:
    suspended = conditions.table_conditions(
        Target("ns", "t", "u", suspend=True), None, None, None, {}
    )
    assert states(suspended)["Ready"] == (T, "Suspended")


def test_degraded_says_the_first_failed_or_refused_run_then_duplicates_then_warnings() -> None:
    runs = {"cleanup": {"result": "done"}, "vacuum": {"result": "refused", "message": "short"}}
    assert conditions.degraded(TARGET, runs).reason is Reason.MAINTENANCE_REFUSED
    failed = {"checkpoint": {"result": "failed", "message": "disk"}}
    both = Target("ns", "t", "u", duplicates=("ns/u",), warnings=("two policies",))
    assert conditions.degraded(both, failed).message == "checkpoint failed: disk"
    assert conditions.degraded(both, {}).reason is Reason.DUPLICATE_URI
    warned = Target("ns", "t", "u", warnings=("two policies",))
    assert conditions.degraded(warned, {}).reason is Reason.POLICY_WARNING


OWNED = {"result": "refused", "reason": "CatalogOwned", "message": "the catalog's"}


def test_a_run_the_catalog_owns_is_not_degraded_and_warns_once_not_every_poll() -> None:
    """A catalog-managed table's cleanup is refused on every run by design: Degraded stays
    False (reason CatalogOwned), no Warning per run; a real failure still shows."""
    runs = {"checkpoint": {"result": "done"}, "cleanup": OWNED, "vacuum": OWNED}
    found = conditions.degraded(TARGET, runs)
    assert (found.status, found.reason) == (F, Reason.CATALOG_OWNED)
    assert "cleanup, vacuum left to its catalog" in found.message
    failed = {**runs, "checkpoint": {"result": "failed", "message": "disk"}}
    assert conditions.degraded(TARGET, failed).reason is Reason.MAINTENANCE_FAILED
    refused = {**runs, "manifest": {"result": "refused", "message": "other"}}
    assert conditions.degraded(TARGET, refused).reason is Reason.MAINTENANCE_REFUSED
    owned = errors.CatalogOwnedError("t: the catalog's")
    outcome = Outcome(Operation.CLEANUP, Result.REFUSED, "the catalog's", error=owned)
    assert conditions.outcome_events([outcome]) == []
    transitions = conditions.Transitions()
    transitions.events([conditions.degraded(TARGET, {})])
    told = [transitions.events([conditions.degraded(TARGET, runs)]) for _ in range(3)]
    assert [[(e.type, e.reason) for e in t] for t in told] == [
        [(EventType.NORMAL, "CatalogOwned")],
        [],
        [],
    ]


def test_transitions_warn_when_a_condition_goes_bad_and_tell_when_it_heals() -> None:
    transitions = conditions.Transitions()
    ok = conditions.table_conditions(TARGET, None, None, None, {})
    assert transitions.events(ok) == []  # the first sight of healthy conditions says nothing
    bad = conditions.table_conditions(TARGET, None, None, StorageUnreachableError("x"), {})
    events = transitions.events(bad)
    # Ready and StorageReachable fail for one reason: one Warning.
    assert [(e.type, e.reason) for e in events] == [(EventType.WARNING, "StorageUnreachable")]
    assert transitions.events(bad) == []  # no change, no event
    healed = [(e.type, e.reason) for e in transitions.events(ok)]
    assert (EventType.NORMAL, "Watching") in healed and (EventType.NORMAL, "Reachable") in healed


def test_maintenance_events_say_what_was_done_and_what_went_wrong() -> None:
    outcomes = [
        Outcome(
            Operation.CHECKPOINT, Result.DONE, "", version=9, detail=CheckpointRun(repaired=[8])
        ),
        Outcome(Operation.CLEANUP, Result.DONE, "", deleted_files=3, deleted_bytes=2048),
        Outcome(Operation.VACUUM, Result.DRY_RUN, "", files=["a", "b"]),
        Outcome(Operation.COMPACTION, Result.STARTED, "started job j"),
        Outcome(Operation.VACUUM, Result.REFUSED, "retention too short"),
        Outcome(Operation.CLEANUP, Result.SKIPPED, "nothing due"),
    ]
    said = [(e.type, e.reason, e.message) for e in conditions.outcome_events(outcomes)]
    assert [(t, r) for t, r, _ in said] == [
        (EventType.WARNING, "CheckpointRepaired"),
        (EventType.NORMAL, "Checkpointed"),
        (EventType.NORMAL, "LogCleaned"),
        (EventType.NORMAL, "VacuumDryRun"),
        (EventType.NORMAL, "CompactionStarted"),
        (EventType.WARNING, "MaintenanceRefused"),
    ]
    assert "version 9" in said[1][2] and "3 expired log files (2.0 KiB)" in said[2][2]
    assert said[3][2] == "vacuum would delete 2 files"


def test_merged_events_do_not_say_twice_what_an_outcome_said() -> None:
    done = conditions.outcome_events([Outcome(Operation.VACUUM, Result.FAILED, "gone")])
    failed = Condition(ConditionType.DEGRADED, T, Reason.MAINTENANCE_FAILED, "vacuum failed")
    changed = conditions.Transitions().events([failed])
    assert len(conditions.merged(done, changed)) == 1


def test_table_found_says_what_became_of_a_table_not_found() -> None:
    found = conditions.table_found("ns/lake", "a/b", True)
    assert (found.type, found.status, found.reason) == ("TableFound", T, "Found")
    gone = conditions.table_found("ns/lake", "a/b", False, "kept")
    assert gone.status is F and gone.message.endswith("did not find a/b; kept")


ERROR_KINDS = [
    cls
    for _, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, errors.DeltaError)
]


@pytest.mark.parametrize("cls", ERROR_KINDS, ids=lambda c: c.__name__)
def test_each_library_error_fails_a_poll_with_the_reason_it_carries(
    cls: type[errors.DeltaError],
) -> None:
    damaged = cls is errors.DamagedCheckpointError
    error = cls("it went wrong", 3, ()) if damaged else cls("it went wrong")  # type: ignore[call-arg]
    reason, message = conditions.classify(error)
    assert reason == Reason(cls.reason)
    if reason is Reason.ERROR:  # no hint to give: the exception is named instead
        assert message == f"{cls.__name__}: it went wrong"
    else:
        assert message.startswith("it went wrong; ") and len(message) > len("it went wrong; ")


def test_errors_that_are_not_the_librarys_have_reasons_too() -> None:
    assert conditions.classify(PolicyError("x"))[0] is Reason.INVALID_POLICY
    assert conditions.classify(ConnectionResetError("x"))[0] is Reason.STORAGE_UNREACHABLE
    assert conditions.classify(KeyError("x")) == (Reason.ERROR, "KeyError: 'x'")

"""The operation registry: every maintenance operation, one module each (beside this one), in
the order a plan runs them. The planner, the executor, the memory budget, conditions, metrics,
history, the status and the CRD loop over REGISTRY; none of them names an operation's parts
itself.

To add an operation: a member of `Operation` (__init__.py), a module here with its SPEC, its line
in REGISTRY, its settings in maintenance/policy.py and resources/spec.py (and the CRD's spec
schema), its docs and tests (ARCHITECTURE.md: "Adding an operation")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from deltakeeper.maintenance.memory import Holding
from deltakeeper.maintenance.operations import (
    Cadence,
    Operation,
    checkpoint,
    cleanup,
    compaction,
    log_compaction,
    manifest,
    stats,
    vacuum,
)
from deltakeeper.maintenance.operations.spec import OperationSpec
from deltakeeper.maintenance.policy import Policy

REGISTRY: Mapping[Operation, OperationSpec] = {
    s.operation: s
    for s in (
        checkpoint.SPEC,
        compaction.SPEC,
        cleanup.SPEC,
        vacuum.SPEC,
        stats.SPEC,
        log_compaction.SPEC,
        manifest.SPEC,
    )
}
assert tuple(REGISTRY) == tuple(Operation), "every operation once, in Operation's order"

# Derived, for the readers that ask one question of every operation.
WRITERS = tuple(op for op, s in REGISTRY.items() if s.writes)  # count the files they write
DELETES = {op: s.deletes for op, s in REGISTRY.items() if s.deletes}  # what each deletes
SPARK = tuple(op for op, s in REGISTRY.items() if s.spark)  # Delta Spark can run them


def spec_of(operation: Operation | str) -> OperationSpec:
    return REGISTRY[Operation(operation)]


def asked(policy: Policy, cadence: Cadence) -> tuple[Operation, ...]:
    """The operations of `cadence` the policy asks for."""
    return tuple(op for op, s in REGISTRY.items() if s.cadence is cadence and s.asked(policy))


def estimate(operation: Operation | str, holding: Holding) -> int:
    """Bytes `operation` may take on a table holding this much (maintenance/memory.py)."""
    return spec_of(operation).memory(holding)


def in_order(operations: Iterable[Operation | str]) -> tuple[Operation, ...]:
    """`operations` in the order a plan runs them, each once."""
    wanted = set(map(Operation, operations))
    return tuple(op for op in REGISTRY if op in wanted)

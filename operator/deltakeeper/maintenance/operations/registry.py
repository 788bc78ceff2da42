"""The operation registry: every maintenance operation, one module each (beside this one), in
the order a plan runs them. The planner, the executor, the memory budget, conditions, metrics,
history, the status and the CRD loop over REGISTRY; none of them names an operation's parts
itself.

To add an operation: a member of `Operation` (__init__.py), a module of the same name here with
its SPEC, its settings in maintenance/policy.py, resources/spec.py and the CRD's spec schema,
its docs and tests (ARCHITECTURE.md: "Adding an operation")."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Mapping

from deltakeeper.maintenance.memory import Holding
from deltakeeper.maintenance.operations import Cadence, OnCatalogManaged, Operation
from deltakeeper.maintenance.operations.spec import OperationSpec
from deltakeeper.maintenance.policy import Policy, PolicyError


def module_name(operation: Operation) -> str:
    """The module of `operation` in this package: its name in snake case (logCompaction ->
    log_compaction)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", str(operation)).lower()


def _load(operation: Operation) -> OperationSpec:
    module = importlib.import_module(f"{__package__}.{module_name(operation)}")
    found = getattr(module, "SPEC", None)
    if not isinstance(found, OperationSpec) or found.operation is not operation:
        raise TypeError(f"{module.__name__} must define SPEC, the OperationSpec of {operation}")
    return found


# Each operation's module, found by its name: an Operation member and its module are the whole
# of an operation (besides its settings), with no list to keep in step here.
REGISTRY: Mapping[Operation, OperationSpec] = {op: _load(op) for op in Operation}

# Derived, for the readers that ask one question of every operation.
WRITERS = tuple(op for op, s in REGISTRY.items() if s.writes)  # count the files they write
DELETES = {op: s.deletes for op, s in REGISTRY.items() if s.deletes}  # what each deletes
SPARK = tuple(op for op, s in REGISTRY.items() if s.spark)  # Delta Spark can run them
# What a catalog-managed table's owner may allow (catalog.allowedOperations).
CATALOG_PERMITS = tuple(
    op for op, s in REGISTRY.items() if s.catalog is OnCatalogManaged.IF_PERMITTED
)


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


def catalog_allowed(key: str, value: object) -> frozenset[str]:
    """The operations a catalog-managed table's catalog permits: only those that need its
    permission (each operation's spec says); one that commits never runs, one that needs no
    permission is not named."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"{key}: expected a list of operation names, got {value!r}")
    for name in value:
        if name in CATALOG_PERMITS:
            continue
        if name not in list(Operation):
            raise PolicyError(
                f"{key}: unknown operation {name!r}; the catalog can permit "
                f"{', '.join(CATALOG_PERMITS)}"
            )
        rule = REGISTRY[Operation(name)].catalog
        if rule is OnCatalogManaged.NEVER:
            raise PolicyError(
                f"{key}: {name} commits, and commits to a catalog-managed table go through its "
                "catalog, which deltakeeper does not do; no setting allows it"
            )
        raise PolicyError(f"{key}: {name} runs on catalog-managed tables without permission")
    return frozenset(value)

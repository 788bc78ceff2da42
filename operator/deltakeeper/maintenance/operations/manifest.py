"""Symlink format manifests, where the table's property
`delta.compatibility.symlinkFormatManifest.enabled` asks for them: kept current with the
live files (delta/manifest.py)."""

from __future__ import annotations

from deltakeeper.delta import manifest
from deltakeeper.maintenance.memory import per_action
from deltakeeper.maintenance.operations import Cadence, OnCatalogManaged, Operation
from deltakeeper.maintenance.operations.outcome import Outcome, Result
from deltakeeper.maintenance.operations.spec import OperationSpec, Planning, Running
from deltakeeper.maintenance.operations.steps import Step

MANIFEST = Operation.MANIFEST


def plan(p: Planning) -> Step:
    reason = "delta.compatibility.symlinkFormatManifest.enabled: manifests kept current"
    return Step(MANIFEST, True, reason)


def run(r: Running) -> Outcome:
    allows = MANIFEST in r.plan.policy.catalog_allowed  # a catalog-managed table's catalog's
    done = manifest.generate(r.table, r.dry_run, catalog_allows=allows)
    if not done.written and not done.deleted:
        return Outcome(MANIFEST, Result.SKIPPED, f"{done.unchanged} manifests already current")
    verb = ("would write", "would delete") if r.dry_run else ("wrote", "deleted")
    message = f"{verb[0]} {len(done.written)} manifests, {verb[1]} {len(done.deleted)} stale"
    files = [*done.written, *done.deleted] if r.dry_run else []
    result = Result.DRY_RUN if r.dry_run else Result.DONE
    return Outcome(MANIFEST, result, message, written_files=len(done.written), files=files)


SPEC = OperationSpec(
    MANIFEST,
    "keeps symlink format manifests current, where the table's property asks for them",
    Cadence.EACH_VERSION,
    plan,
    run,
    per_action(512),
    "ManifestsWritten",
    lambda o: o.message,
    asked=lambda policy: policy.manifest_enabled,
    writes=True,
    catalog=OnCatalogManaged.IF_PERMITTED,
)

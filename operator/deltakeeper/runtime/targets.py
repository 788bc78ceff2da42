"""A DeltaTable resource (with the policy that selects it and its Secret) as a watch Target.

Shared by the operator and standalone mode: they differ only in where resources and Secrets
come from. Anything that makes the spec impossible to act on safely becomes the Target's
`problem`, and the watcher then touches no storage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from deltakeeper.delta import storage_options
from deltakeeper.delta.errors import InvalidCredentialsError, InvalidInputError
from deltakeeper.delta.storage import normalize_options
from deltakeeper.maintenance.policy import POLL_INTERVAL_MS, PolicyError
from deltakeeper.resources import manifests
from deltakeeper.resources import spec as spec_settings
from deltakeeper.resources.conditions import Reason
from deltakeeper.resources.manifests import PolicyResource, TableResource
from deltakeeper.runtime import credentials
from deltakeeper.runtime.model import Problem, Target

# (namespace, name) -> the Secret's decoded data, or None when there is no such Secret.
ReadSecret = Callable[[str, str], Mapping[str, str] | None]


class SecretUnreadable(Exception):
    """The Secret exists (or may) but could not be read: permissions, API server trouble."""


def secret_name(table: TableResource) -> str | None:
    """The Secret `spec.storage.secretRef` names, if any."""
    return ((table.spec.get("storage") or {}).get("secretRef") or {}).get("name") or None


def unchanged(old: Sequence[object] | None, new: Sequence[object]) -> bool:
    """Whether a Target resolved from the objects `old` still holds for `new`: the same objects.

    Reloads and watch events replace a resource, policy or Secret rather than change it, so
    identity says whether anything changed. The cache holds the objects themselves, not their
    ids, so no id can be reused by a newer object while it is held.
    """
    if old is None or len(old) != len(new):
        return False
    return all(a is b for a, b in zip(old, new, strict=True))


def resolve(
    table: TableResource,
    policies: Sequence[PolicyResource],
    read_secret: ReadSecret,
    duplicates: tuple[str, ...] = (),
    default_poll_ms: int = POLL_INTERVAL_MS,
) -> Target:
    """`duplicates`: the other resources naming the same table (Registry.duplicates);
    `default_poll_ms`: the poll interval when neither the table nor its policy sets one."""
    spec = table.spec
    if in_uri := credentials.uri_secrets(str(spec.get("uri", ""))):  # a query: a signature?
        credentials.SCRUBBER.register(in_uri)
    base: dict[str, Any] = {
        "namespace": table.namespace,
        "name": table.name,
        "uri": str(spec.get("uri", "")),
        "generation": table.generation,
        "suspend": bool(spec.get("suspend", False)),
        "duplicates": duplicates,
    }
    policy, warning = manifests.select_policy(table, policies)
    ref = ((spec.get("policyRef") or {}).get("name")) or None
    if ref and policy is None:
        message = (
            f"spec.policyRef names DeltaMaintenancePolicy {table.namespace}/{ref}, which does not "
            "exist; create it or remove policyRef (nothing is maintained meanwhile, since the "
            "missing policy may ask for longer retention)"
        )
        return Target(**base, problem=Problem(Reason.POLICY_NOT_FOUND, message))
    base["policy_name"] = policy.name if policy else None
    base["warnings"] = (warning,) if warning else ()
    try:
        base.update(spec_settings.watch_settings(table, policy, default_poll_ms))
    except (PolicyError, ValueError) as e:
        return Target(**base, problem=Problem(Reason.INVALID_SPEC, str(e)))
    try:
        base["storage_options"] = _storage_options(table, read_secret)
    except _Refused as e:
        return Target(**base, problem=e.problem)
    return Target(**base)


class _Refused(Exception):
    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def _known_keys(uri: str, store: str, options: Mapping[str, Any]) -> None:
    """Name an option neither spelling knows as it was written (obstore would name it in
    lower case, once the spelling is one)."""
    unknown = storage_options.unknown_keys(store, options)
    if unknown:
        raise InvalidCredentialsError(
            f"deltakeeper does not know the storage option '{unknown[0]}' for {uri}; check its "
            "spelling against docs/storage.md (fsspec's or object_store's names)"
        )


def _storage_options(table: TableResource, read_secret: ReadSecret) -> dict[str, Any]:
    storage = table.spec.get("storage") or {}
    uri = str(table.spec.get("uri", ""))
    store = storage_options.store_of(uri)
    try:
        options = normalize_options(dict(storage.get("options") or {}))
        if store is not None:  # one spelling, so the Secret's keys replace the spec's
            _known_keys(uri, store, options)
            options = storage_options.canonical(store, options)
    except InvalidCredentialsError as e:
        raise _Refused(Problem(Reason.INVALID_SECRET, f"spec.storage.options: {e}")) from None
    except InvalidInputError as e:
        raise _Refused(Problem(Reason.INVALID_SPEC, f"spec.storage.options: {e}")) from None
    ref = secret_name(table)
    if not ref:
        return options
    where = f"Secret {table.namespace}/{ref}"
    try:
        data = read_secret(table.namespace, ref)
    except SecretUnreadable as e:
        raise _Refused(Problem(Reason.SECRET_UNREADABLE, f"cannot read {where}: {e}")) from None
    if data is None:
        message = (
            f"{where} (spec.storage.secretRef) does not exist; create it in the table's namespace"
        )
        raise _Refused(Problem(Reason.SECRET_NOT_FOUND, message))
    credentials.SCRUBBER.register(credentials.secret_values(data))
    try:
        from_secret = credentials.storage_options(uri, data)
    except InvalidInputError as e:
        raise _Refused(Problem(Reason.INVALID_SECRET, f"{where}: {e}")) from None
    return {**options, **from_secret}

"""Whether this replica acts, by kopf's peering rule.

kopf pauses a replica that sees a live peer of higher priority, or another of the same
priority, in its peering objects; it then stops its watch streams, but tells no handler. The
tables' watch loops run on their own, so they follow the same rule, read from the same objects
(kopf's documented format: `status` maps each peer's id to its priority, lifetime in seconds,
and when it was last seen).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from deltakeeper.k8s.api import TIMEOUT


def acting(peerings: Iterable[Mapping[str, Any]], priority: int, now: datetime) -> bool:
    """True when no live peer outranks this replica (`priority`) in any peering object."""
    for peering in peerings:
        same = 0
        for peer in (peering.get("status") or {}).values():
            if not isinstance(peer, Mapping) or not _alive(peer, now):
                continue
            theirs = int(peer.get("priority") or 0)
            if theirs > priority:
                return False
            same += theirs == priority
        if same > 1:  # this replica and another of its priority: kopf pauses both
            return False
    return True


def _alive(peer: Mapping[str, Any], now: datetime) -> bool:
    try:
        seen = datetime.fromisoformat(str(peer["lastseen"]).replace("Z", "+00:00"))
        lifetime = timedelta(seconds=int(peer.get("lifetime", 60)))
    except (KeyError, TypeError, ValueError):
        return True  # unreadable: kopf treats a peer without lastseen as seen now
    if seen.tzinfo is None:
        seen = seen.replace(tzinfo=UTC)
    return seen + lifetime > now


def read(api: client.ApiClient, name: str, namespaces: list[str]) -> list[dict[str, Any]]:
    """The peering objects kopf uses: the ClusterKopfPeering `name` cluster-wide, else the
    KopfPeering `name` of each namespace. Missing ones are left out."""
    objects = client.CustomObjectsApi(api)
    found: list[dict[str, Any]] = []
    where: list[str | None] = list(namespaces) or [None]
    for ns in where:
        try:
            if ns is None:
                got = objects.get_cluster_custom_object(
                    "kopf.dev", "v1", "clusterkopfpeerings", name, _request_timeout=TIMEOUT
                )
            else:
                got = objects.get_namespaced_custom_object(
                    "kopf.dev", "v1", ns, "kopfpeerings", name, _request_timeout=TIMEOUT
                )
        except ApiException as e:
            if e.status != 404:
                raise
            continue
        found.append(cast(dict[str, Any], got))
    return found

"""kopf handlers for DeltaLakes, registered only when discovery is on (`deltakeeper operator
--discovery`, or DELTAKEEPER_DISCOVERY=true under `kopf run -m deltakeeper.k8s`): without it
the operator neither watches DeltaLakes nor needs the rights to. The scans and the DeltaTables
they make are lakes.py's; the handlers only feed it.
"""

from __future__ import annotations

from typing import Any

import kopf

from deltakeeper.k8s.lakes import Lakes
from deltakeeper.resources.crd import GROUP, LAKES, VERSION


@kopf.on.startup()
async def start_lakes(memo: kopf.Memo, **_: Any) -> None:
    memo.lakes = Lakes(memo.api, memo.secrets, memo.metrics, memo.tables)


@kopf.on.cleanup()
async def stop_lakes(memo: kopf.Memo, **_: Any) -> None:
    await memo.lakes.stop()


@kopf.on.event(GROUP, VERSION, LAKES)  # type: ignore[arg-type]
async def lake_event(
    type: str | None, body: kopf.Body, namespace: str, name: str, memo: kopf.Memo, **_: Any
) -> None:
    lakes: Lakes = memo.lakes
    if type == "DELETED":
        lakes.remove((namespace, name))
    else:
        lakes.upsert(body)

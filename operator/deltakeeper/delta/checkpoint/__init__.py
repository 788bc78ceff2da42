"""Write a checkpoint, verify it, then move `_last_checkpoint`.

Layouts (the spec's "checkpoint naming schemes"):
- classic: one `<v>.checkpoint.parquet` (V1 spec; on a v2Checkpoint table, V2 spec with a
  `checkpointMetadata` row and every file action inline, for readers that do not know V2).
- multi-part: `<v>.checkpoint.<p>.<n>.parquet` (V1 spec), never on v2Checkpoint tables.
- v2: `<v>.checkpoint.<uuid>.parquet` holding the non-file actions, `checkpointMetadata` and one
  `sidecar` row per `_delta_log/_sidecars/` file; the sidecars hold the add and remove rows.

Rows are clustered into parts and sidecars as Delta Spark does it (spark_hash.py), and every
layout takes the add/remove rows as a stream of Arrow record batches, so a bounded-memory source
can replace the in-memory snapshot later. Part counts come from counts known up front.

Order matters for crash safety: checkpoint files are written and read back before
`_last_checkpoint` points at them, and `_last_checkpoint` never moves backwards.

Modules: write (the entry point; it also moves `_last_checkpoint`), sources (snapshot or
incremental), content (the rows), stats, layouts (the files), prefetch.
"""

from deltakeeper.delta.checkpoint.content import Content, HeaderRow, snapshot_content
from deltakeeper.delta.checkpoint.layouts import Layout
from deltakeeper.delta.checkpoint.sources import (
    CheckpointSource,
    checkpoint_source,
    incremental_content,
    incremental_source,
    load_for_checkpoint,
)
from deltakeeper.delta.checkpoint.stats import StatsColumns
from deltakeeper.delta.checkpoint.write import (
    CheckpointResult,
    checkpoint_table,
    uses_v2,
    write_checkpoint,
    write_source,
)

__all__ = [
    "CheckpointResult",
    "CheckpointSource",
    "Content",
    "HeaderRow",
    "Layout",
    "StatsColumns",
    "checkpoint_source",
    "checkpoint_table",
    "incremental_content",
    "incremental_source",
    "load_for_checkpoint",
    "snapshot_content",
    "uses_v2",
    "write_checkpoint",
    "write_source",
]

"""deltakeeper keeps Delta Lake tables healthy."""

import os

# Arrow's allocator (mimalloc) keeps freed memory for a while before giving it back; a daemon
# that reads a big table now and then would hold the peak of its last read between polls.
# Given back at once, a watched 1,000,000-file table holds ~135 MiB instead of ~180 and peaks
# lower (BENCHMARKS.md, "Holding a big table between polls"). Read when pyarrow loads, so set
# before any import of it; an explicit setting wins.
os.environ.setdefault("MIMALLOC_PURGE_DELAY", "0")

__version__ = "0.1.0"

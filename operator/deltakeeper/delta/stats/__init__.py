"""Per-file statistics: built as Delta Spark builds them, and committed for the
files that lack them."""

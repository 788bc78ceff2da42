"""Not tests: test_cli_discover.py imports `make_table` from here until the CLI tests move to
tests/unit/cli/; it lives in tests/support/tables.py, and this file goes with that move."""

from tests.support.tables import make_table

__all__ = ["make_table"]

"""Not tests: test_cli_maintain.py imports these helpers from here until the CLI tests move to
tests/unit/cli/; they live in tests/support/tables.py, and this file goes with that move."""

from tests.support.tables import DAY, START, daily_table, log_names, touch

__all__ = ["DAY", "START", "daily_table", "log_names", "touch"]

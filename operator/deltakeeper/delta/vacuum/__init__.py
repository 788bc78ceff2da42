"""Data-file vacuum: its modes, the plan, LITE's window, `_last_vacuum_info` and
storage inventories. Kept empty: the CLI parser imports `modes` at start-up."""

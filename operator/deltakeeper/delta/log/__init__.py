"""Reading the log: names listed into segments, JSON and checkpoint files read, the
`_last_checkpoint` hint, and actions reconciled into a snapshot's."""

"""The one mapping from what went wrong to an exit code (the CLI contract, docs/cli.md), and to the
`error` of a --json error object: 0 ok, 1 unexpected failure, 2 bad input or not a Delta table,
3 unsupported protocol (nothing written), 4 storage unreachable."""

from __future__ import annotations

from deltakeeper.delta import errors

OK = 0
UNEXPECTED = 1
BAD_INPUT = 2
UNSUPPORTED = 3  # a protocol feature this build does not know; nothing written
UNREACHABLE = 4
INTERRUPTED = 130  # Ctrl-C, as a shell reports a SIGINT
# The `error` of bad input, a flag argparse refuses included.
INVALID_INPUT = "InvalidInput"
UNEXPECTED_ERROR = "Unexpected"

# Each kind of library error: its `error` in --json and its exit code. Most specific first.
ERRORS = (
    (errors.InvalidCredentialsError, "InvalidCredentials", BAD_INPUT),
    (errors.InvalidInputError, INVALID_INPUT, BAD_INPUT),
    (errors.NotADeltaTableError, "NotADeltaTable", BAD_INPUT),
    (errors.CorruptLogError, "CorruptLog", BAD_INPUT),
    (errors.UnsupportedProtocolError, "UnsupportedProtocol", UNSUPPORTED),
    (errors.StorageUnreachableError, "StorageUnreachable", UNREACHABLE),
    (errors.CommitConflictError, "CommitConflict", UNEXPECTED),
)


def error_name(e: errors.DeltaError) -> str:
    """The documented `error` of a --json error object (docs/cli.md: Exit codes)."""
    return next((name for cls, name, _ in ERRORS if isinstance(e, cls)), UNEXPECTED_ERROR)


def exit_code(error: errors.DeltaError | None) -> int:
    """0 without an error; 1 for one the contract does not name."""
    if error is None:
        return OK
    return next((code for cls, _, code in ERRORS if isinstance(error, cls)), UNEXPECTED)

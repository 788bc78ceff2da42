"""The CLI's exit codes (the contract, docs/cli.md): 0 ok, 1 unexpected failure, 2 bad input
or not a Delta table, 3 unsupported protocol (nothing written), 4 storage unreachable, 130
interrupted. Each kind of library error carries its own code and --json `error`
(delta/errors.py); this module adds what is not a library error."""

from __future__ import annotations

from deltakeeper.delta import errors

OK = 0
UNEXPECTED = errors.UNEXPECTED
BAD_INPUT = errors.BAD_INPUT
INTERRUPTED = 130  # Ctrl-C, as a shell reports a SIGINT
# The `error` of bad input, a flag argparse refuses included.
INVALID_INPUT = errors.InvalidInputError.error_name
UNEXPECTED_ERROR = errors.DeltaError.error_name


def error_name(e: errors.DeltaError) -> str:
    """The documented `error` of a --json error object (docs/cli.md: Exit codes)."""
    return e.error_name if isinstance(e, errors.DeltaError) else UNEXPECTED_ERROR


def exit_code(error: errors.DeltaError | None) -> int:
    """0 without an error; 1 for one the contract does not name."""
    if error is None:
        return OK
    return error.exit_code if isinstance(error, errors.DeltaError) else UNEXPECTED

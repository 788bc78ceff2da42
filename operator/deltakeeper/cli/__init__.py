"""`deltakeeper ...`: the command line. Exit codes: 0 ok, 1 unexpected, 2 bad input or not a
Delta table, 3 unsupported protocol, 4 storage unreachable.

`main` masks credentials in all output (output.py), parses (parser.py), runs the command's
function, imported only then (inspect.py, discover.py, maintenance.py, compact.py,
daemons.py; their flags read through flags.py), and maps what went wrong to an exit code
(exits.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from deltakeeper.cli import exits, output
from deltakeeper.cli.parser import UsageError, build_parser
from deltakeeper.delta.errors import DeltaError

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    with output.masked(argv):
        return _run(argv)


def _run(argv: list[str]) -> int:
    as_json = "--json" in argv
    try:
        args = build_parser().parse_args(argv)
        as_json = bool(getattr(args, "json", False))
        output.register_secrets(
            [
                *(f"--storage-option={o}" for o in getattr(args, "storage_option", [])),
                str(getattr(args, "uri", "")),
            ]
        )
        return int(args.func(args))
    except UsageError as e:
        e.parser.print_usage(sys.stderr)
        command = e.parser.prog.removeprefix("deltakeeper").strip()
        message = f"{command}: {e}" if command else str(e)
        return output.fail(as_json, exits.INVALID_INPUT, message, exits.BAD_INPUT)
    except DeltaError as e:
        return output.fail(as_json, exits.error_name(e), str(e), exits.exit_code(e))
    except KeyboardInterrupt:
        return exits.INTERRUPTED
    except BrokenPipeError:
        return exits.OK
    except Exception as e:  # the last line of defence: say what failed, never dump secrets
        if os.environ.get("DELTAKEEPER_DEBUG"):
            raise
        message = f"unexpected error: {type(e).__name__}: {e}"
        return output.fail(as_json, exits.UNEXPECTED_ERROR, message, exits.UNEXPECTED)

"""Errors the library raises, by kind, each carrying how it is reported: its name in the CLI's
--json, the CLI's exit code (docs/cli.md: Exit codes) and the reason of a failed poll's
conditions. cli/exits.py and runtime/conditions.py read them from here, so a new kind of error
is named once."""

from typing import ClassVar

# The exit codes of docs/cli.md (cli/exits.py adds 0 ok and 130 interrupted).
UNEXPECTED = 1
BAD_INPUT = 2
UNSUPPORTED = 3  # a protocol feature this build does not know; nothing written
UNREACHABLE = 4


class DeltaError(Exception):
    """Base class of every error the library raises on purpose.

    `error_name` is the `error` of the CLI's --json error object, `exit_code` the CLI's exit
    code, `reason` the Reason a failed poll's conditions give (resources/conditions.py names
    each). A kind says them once; its subclasses keep them unless they say otherwise."""

    error_name: ClassVar[str] = "Unexpected"
    exit_code: ClassVar[int] = UNEXPECTED
    reason: ClassVar[str] = "Error"  # anything else: the conditions name the exception


class InvalidInputError(DeltaError):
    """Bad arguments: a malformed URI, version or timestamp out of range."""

    error_name = "InvalidInput"
    exit_code = BAD_INPUT
    reason = "InvalidSpec"


class InvalidCredentialsError(InvalidInputError):
    """Credentials the store's client cannot even use (an account key that is not base64, an
    option it does not know); nothing was sent."""

    error_name = "InvalidCredentials"
    reason = "InvalidSecret"


class UnsupportedOperationError(InvalidInputError):
    """The store cannot do what the operation needs (an fsspec filesystem has no create-only
    write); nothing of that operation was written."""


class NotADeltaTableError(DeltaError):
    """The location holds no readable `_delta_log`."""

    error_name = "NotADeltaTable"
    exit_code = BAD_INPUT
    reason = "NotADeltaTable"


class CorruptLogError(DeltaError):
    """A log file that cannot be parsed; the message names the file and line."""

    error_name = "CorruptLog"
    exit_code = BAD_INPUT
    reason = "CorruptLog"


class MissingLogFileError(CorruptLogError):
    """A log file that was listed or referenced is not there (deleted underneath us?)."""


class DamagedCheckpointError(CorruptLogError):
    """A checkpoint that cannot be read (truncated, empty): readers fall back past it."""

    def __init__(self, message: str, version: int, keys: tuple[str, ...]) -> None:
        super().__init__(message)
        self.version = version
        self.keys = keys


class UnsupportedProtocolError(DeltaError):
    """The table needs a reader or writer feature this build does not understand."""

    error_name = "UnsupportedProtocol"
    exit_code = UNSUPPORTED
    reason = "UnsupportedProtocol"


class CatalogOwnedError(UnsupportedProtocolError):
    """The table is catalog-managed and the operation is its catalog's to run (Delta's
    "Maintenance Operations on Catalog-managed Tables"): refused, not failed, and told apart
    from a feature this build lacks."""

    error_name = "CatalogOwned"
    reason = "CatalogOwned"


class StorageUnreachableError(DeltaError):
    """The object store or file system could not be reached or refused access."""

    error_name = "StorageUnreachable"
    exit_code = UNREACHABLE
    reason = "StorageUnreachable"


class CommitConflictError(DeltaError):
    """A put-if-absent found the file already there: another writer won."""

    error_name = "CommitConflict"


class ExpiryLimitError(InvalidInputError):
    """An expiry would remove a larger share of the table's rows than its maxFraction allows
    (a `keep` of 9d meant as 90d): refused, nothing written."""

    error_name = "MaxFractionExceeded"


class LiteVacuumImpossible(InvalidInputError):
    """A LITE vacuum cannot see every file it should (Delta Spark's DELTA_CANNOT_VACUUM_LITE):
    commits after the last vacuum are gone. A FULL vacuum can."""


class Stopped(Exception):
    """The caller asked a long step to stop (a daemon shutting down), and it did at a safe
    point: what it did stands and what it left is the next run's. Not a DeltaError: nothing is
    wrong, and nothing about it is recorded as a result."""

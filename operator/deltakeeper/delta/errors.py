"""Errors the library raises, by kind; the CLI maps each kind to its exit code (cli/exits.py)."""


class DeltaError(Exception):
    """Base class of every error the library raises on purpose."""


class InvalidInputError(DeltaError):
    """Bad arguments: a malformed URI, version or timestamp out of range."""


class InvalidCredentialsError(InvalidInputError):
    """Credentials the store's client cannot even use (an account key that is not base64, an
    option it does not know); nothing was sent."""


class UnsupportedOperationError(InvalidInputError):
    """The store cannot do what the operation needs (an fsspec filesystem has no create-only
    write); nothing of that operation was written."""


class NotADeltaTableError(DeltaError):
    """The location holds no readable `_delta_log`."""


class CorruptLogError(DeltaError):
    """A log file that cannot be parsed; the message names the file and line."""


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


class StorageUnreachableError(DeltaError):
    """The object store or file system could not be reached or refused access."""


class CommitConflictError(DeltaError):
    """A put-if-absent found the file already there: another writer won."""


class LiteVacuumImpossible(InvalidInputError):
    """A LITE vacuum cannot see every file it should (Delta Spark's DELTA_CANNOT_VACUUM_LITE):
    commits after the last vacuum are gone. A FULL vacuum can."""

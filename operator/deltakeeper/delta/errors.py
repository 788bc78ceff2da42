"""Errors the library raises. Each carries the CLI exit code that DESIGN.md assigns to it."""


class DeltaError(Exception):
    """Base class; `exit_code` is what the CLI returns for it."""

    exit_code = 1


class InvalidInputError(DeltaError):
    """Bad arguments: a malformed URI, version or timestamp out of range."""

    exit_code = 2


class InvalidCredentialsError(InvalidInputError):
    """Credentials the store's client cannot even use (an account key that is not base64, an
    option it does not know); nothing was sent."""


class NotADeltaTableError(DeltaError):
    """The location holds no readable `_delta_log`."""

    exit_code = 2


class CorruptLogError(DeltaError):
    """A log file that cannot be parsed; the message names the file and line."""

    exit_code = 2


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

    exit_code = 3


class StorageUnreachableError(DeltaError):
    """The object store or file system could not be reached or refused access."""

    exit_code = 4


class CommitConflictError(DeltaError):
    """A put-if-absent found the file already there: another writer won."""

    exit_code = 1

"""delta/errors.py: each kind of error carries its --json name, exit code and conditions'
reason, exactly as docs/cli.md documents them; subclasses keep their parent's."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from deltakeeper.delta import errors

DOCS = Path(__file__).resolve().parents[3] / "docs" / "cli.md"
# Every kind: (error_name, exit_code, reason).
EXPECTED = {
    errors.DeltaError: ("Unexpected", 1, "Error"),
    errors.InvalidInputError: ("InvalidInput", 2, "InvalidSpec"),
    errors.InvalidCredentialsError: ("InvalidCredentials", 2, "InvalidSecret"),
    errors.UnsupportedOperationError: ("InvalidInput", 2, "InvalidSpec"),
    errors.NotADeltaTableError: ("NotADeltaTable", 2, "NotADeltaTable"),
    errors.CorruptLogError: ("CorruptLog", 2, "CorruptLog"),
    errors.MissingLogFileError: ("CorruptLog", 2, "CorruptLog"),
    errors.DamagedCheckpointError: ("CorruptLog", 2, "CorruptLog"),
    errors.UnsupportedProtocolError: ("UnsupportedProtocol", 3, "UnsupportedProtocol"),
    errors.CatalogOwnedError: ("CatalogOwned", 3, "CatalogOwned"),
    errors.StorageUnreachableError: ("StorageUnreachable", 4, "StorageUnreachable"),
    errors.CommitConflictError: ("CommitConflict", 1, "Error"),
    errors.LiteVacuumImpossible: ("InvalidInput", 2, "InvalidSpec"),
    errors.ExpiryLimitError: ("MaxFractionExceeded", 2, "InvalidSpec"),
}


def test_every_kind_of_error_is_listed() -> None:
    kinds = {
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.DeltaError)
    }
    assert kinds == set(EXPECTED)


@pytest.mark.parametrize("cls", list(EXPECTED), ids=lambda c: c.__name__)
def test_each_kind_carries_its_name_exit_code_and_reason(cls: type[errors.DeltaError]) -> None:
    assert (cls.error_name, cls.exit_code, cls.reason) == EXPECTED[cls]


def test_the_names_and_codes_are_those_docs_cli_md_documents() -> None:
    """docs/cli.md: "`error` is one of `A`, `B` (2), `C` (3), ...": each name with the code
    after its group."""
    text = " ".join(DOCS.read_text().split())
    sentence = re.search(r"`error` is one of (.*?)\.\s", text)
    assert sentence is not None
    documented: dict[str, int] = {}
    for group, code in re.findall(r"((?:`\w+`(?:, )?)+) \((\d+)\)", sentence.group(1)):
        documented |= {name: int(code) for name in re.findall(r"`(\w+)`", group)}
    carried = {cls.error_name: cls.exit_code for cls in EXPECTED}
    assert carried == documented

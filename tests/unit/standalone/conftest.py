"""The folder of manifests with a DeltaLake that the standalone tests run over."""

from pathlib import Path

import pytest

from tests.support.standalone import write_lake_folder


@pytest.fixture
def lake_folder(tmp_path: Path) -> tuple[Path, Path]:
    """(data, manifests): see tests/support/standalone.py's write_lake_folder."""
    return write_lake_folder(tmp_path)

"""Session-wide object-store emulators: `minio`, `azurite` and `fake_gcs`.

Each fixture installs the emulators if needed (scripts/stores/install.sh, cached outside the
clone), starts one on a free 127.0.0.1 port and yields a `tests.support.stores.Emulator`:
`.uri(path)`, `.storage_options` for `open_storage`, `.create_bucket(name)`,
`.upload_folder(local, uri)`. A server that cannot start fails the tests that use it; nothing
is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import stores

EMULATOR_FIXTURES = {"minio", "azurite", "fake_gcs", "store_binaries"}
_BINARIES = pytest.StashKey[dict[str, str]]()
_INSTALL_ERROR = pytest.StashKey[Exception]()


def pytest_collection_modifyitems(session: pytest.Session, items: list[pytest.Item]) -> None:
    # Install before any test runs, so a first (cold) build does not count against the
    # per-test timeout of whichever test happens to start the first emulator. A failure is
    # kept for the fixtures to raise: the tests that need the stores fail, the rest still run.
    if any(EMULATOR_FIXTURES & set(getattr(item, "fixturenames", ())) for item in items):
        try:
            session.config.stash[_BINARIES] = stores.install()
        except Exception as e:
            session.config.stash[_INSTALL_ERROR] = e


@pytest.fixture(scope="session")
def store_binaries(pytestconfig: pytest.Config) -> dict[str, str]:
    if _INSTALL_ERROR in pytestconfig.stash:
        raise pytestconfig.stash[_INSTALL_ERROR]
    if _BINARIES not in pytestconfig.stash:
        pytestconfig.stash[_BINARIES] = stores.install()
    return pytestconfig.stash[_BINARIES]


@pytest.fixture(scope="session")
def minio(
    store_binaries: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[stores.Emulator]:
    emu = stores.start_minio(store_binaries["MINIO"], tmp_path_factory.mktemp("minio"))
    yield emu
    emu.stop()


@pytest.fixture(scope="session")
def fake_gcs(
    store_binaries: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[stores.Emulator]:
    emu = stores.start_fake_gcs(
        store_binaries["FAKE_GCS_SERVER"], tmp_path_factory.mktemp("fake-gcs")
    )
    yield emu
    emu.stop()


@pytest.fixture(scope="session")
def azurite(
    store_binaries: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[stores.Emulator]:
    emu = stores.start_azurite(store_binaries["AZURITE"], tmp_path_factory.mktemp("azurite"))
    yield emu
    emu.stop()

"""delta/log/last_checkpoint.py: the hint's canonical-JSON checksum, parsing and serializing."""

import json

import pytest

from deltakeeper.delta.log import last_checkpoint as lc

SPEC_EXAMPLE = (
    '{"k0":"\'v 0\'", "checksum": "adsaskfljadfkjadfkj", "k1":{"k2": 2, "k3": ["v3", [1, 2], '
    '{"k4": "v4", "k5": ["v5", "v6", "v7"]}]}}'
)


def test_spec_example_canonical_form_and_checksum():
    obj = json.loads(SPEC_EXAMPLE)
    assert lc.canonicalize(obj) == (
        '"k0"="%27v%200%27","k1"+"k2"=2,"k1"+"k3"+0="v3","k1"+"k3"+1+0=1,"k1"+"k3"+1+1=2,'
        '"k1"+"k3"+2+"k4"="v4","k1"+"k3"+2+"k5"+0="v5","k1"+"k3"+2+"k5"+1="v6",'
        '"k1"+"k3"+2+"k5"+2="v7"'
    )
    assert lc.checksum(obj) == "6a92d155a59bf2eecbd4b4ec7fd1f875"


def test_serialize_then_parse_round_trips_with_checksum():
    data = lc.serialize({"version": 12, "size": 40, "parts": None, "sizeInBytes": 1234})
    parsed = lc.parse(data)
    assert (parsed.version, parsed.size, parsed.parts) == (12, 40, None)
    assert "checksum" in parsed.raw and "parts" not in parsed.raw


def test_the_checksums_delta_spark_wrote_validate(corpus):
    for table in ("checkpoint-cdf-table", "spark-shredded-variant-preview-delta"):
        raw = (corpus / table / "_delta_log" / "_last_checkpoint").read_bytes()
        assert "checksum" in json.loads(raw)
        assert lc.parse(raw).version >= 0


@pytest.mark.parametrize(
    "content, why",
    [
        (b"{not json", "not JSON"),
        (b'{"size": 3}', "no integer version"),
        (b'{"version": -1}', "no integer version"),
        (b'{"version": 3, "version": 4}', "duplicate"),
        (b'{"version": 3, "size": 10, "checksum": "00000000000000000000000000000000"}', "checksum"),
        pytest.param(b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "not JSON", id="too-deep"),
    ],
)
def test_untrustworthy_files_are_rejected(content, why):
    with pytest.raises(lc.InvalidLastCheckpoint, match=why):
        lc.parse(content)

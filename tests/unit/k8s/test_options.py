"""k8s/options.py: the operator's settings from the environment (the chart sets them)."""

from __future__ import annotations

import pytest

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.k8s.options import Options


def test_history_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (Options().history_uri, Options().history_options) == ("", {})
    monkeypatch.setenv("DELTAKEEPER_HISTORY_URI", "s3://lake/history")
    options = '{"AWS_ACCESS_KEY_ID": "ak", "aws_secret_access_key": "sk", "allow_http": true}'
    monkeypatch.setenv("DELTAKEEPER_HISTORY_OPTIONS", options)
    got = Options()
    assert got.history_uri == "s3://lake/history"
    assert got.history_options == {
        "AWS_ACCESS_KEY_ID": "ak",
        "aws_secret_access_key": "sk",
        "allow_http": True,
    }


@pytest.mark.parametrize("text", ["not json sk-secret", '["sk-secret"]'])
def test_bad_history_options_say_so_without_their_text(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv("DELTAKEEPER_HISTORY_OPTIONS", text)
    with pytest.raises(InvalidInputError) as raised:
        Options()
    assert "sk-secret" not in str(raised.value)

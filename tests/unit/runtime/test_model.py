"""runtime/model.py: a Target's repr never shows its storage options."""

from __future__ import annotations

from deltakeeper.runtime.model import Target

SECRET = "wTestSecretKey/K7MDENG+bPxRfiCYEXAMPLE0001"


def test_a_target_repr_does_not_show_its_storage_options() -> None:
    target = Target("ns", "t", "s3://b/t", storage_options={"secret": SECRET})
    assert SECRET not in repr(target) and SECRET not in str(target)

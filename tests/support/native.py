"""Whether the native stats parser must be there: CI sets DELTAKEEPER_REQUIRE_NATIVE=1, and then
its absence fails the tests that need it instead of skipping them."""

from __future__ import annotations

import os

REQUIRED = os.environ.get("DELTAKEEPER_REQUIRE_NATIVE") == "1"

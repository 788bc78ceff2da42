"""runtime/registry.py: the tables a daemon watches, and which of them name the same storage."""

from __future__ import annotations

import logging

from deltakeeper.resources.manifests import TableResource
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.model import Event, Observation, Target
from deltakeeper.runtime.registry import Entry, Key, Registry, same_table


class NoSink:
    async def write_status(self, entry: Entry, target: Target, obs: Observation) -> bool:
        return True

    def post_event(self, entry: Entry, event: Event) -> None:
        pass

    def forget(self, key: Key) -> None:
        pass


async def no_resolve(key: Key, entry: Entry) -> Target:
    raise AssertionError("not resolved here")


def registry() -> Registry[Entry]:
    return Registry(Metrics(), NoSink(), no_resolve, logging.getLogger("test"))


def table(namespace: str, name: str, uri: str) -> TableResource:
    return TableResource(namespace, name, {}, 1, {"uri": uri})


def add(r: Registry[Entry], namespace: str, name: str, uri: str) -> Key:
    r.add((namespace, name), Entry(table(namespace, name, uri)))
    return (namespace, name)


def test_every_spelling_of_a_uri_names_one_table() -> None:
    for uri in ("/lake/t", "/lake/t/", "file:/lake/t", "file:///lake/t", "file:///lake/t/"):
        assert same_table(uri) == "/lake/t", uri
    assert same_table("s3://lake/t/") == "s3://lake/t"
    assert same_table("/") == "/"
    assert same_table("s3://lake/t") != same_table("s3://lake/u")


def test_tables_naming_one_uri_name_each_other() -> None:
    r = registry()
    a = add(r, "lake", "a", "file:///lake/t")
    assert r.duplicates(a) == ()
    b = add(r, "lake", "b", "file:/lake/t/")
    c = add(r, "other", "c", "/lake/t")
    add(r, "lake", "d", "/lake/elsewhere")
    assert r.duplicates(a) == ("lake/b", "other/c")
    assert r.duplicates(b) == ("lake/a", "other/c")
    assert r.duplicates(c) == ("lake/a", "lake/b")
    assert r.duplicates(("lake", "d")) == ()


def test_duplicates_follow_changes_and_removals() -> None:
    r = registry()
    a = add(r, "lake", "a", "s3://lake/t")
    b = add(r, "lake", "b", "s3://lake/t")
    seen = r.duplicates(a)
    assert seen == ("lake/b",)
    add(r, "lake", "x", "s3://lake/x")  # another table: a's answer is the same object
    assert r.duplicates(a) is seen
    r.change(b, table("lake", "b", "s3://lake/u"))  # b now names another table
    assert r.duplicates(a) == () and r.duplicates(b) == ()
    r.change(b, table("lake", "b", "s3://lake/t/"))
    assert r.duplicates(a) == ("lake/b",) and r.duplicates(b) == ("lake/a",)
    r.remove(b)
    assert r.duplicates(a) == () and r.duplicates(b) == ()
    assert r.entries.keys() == {a, ("lake", "x")}


def test_a_table_without_uri_names_no_other() -> None:
    r = registry()
    a = add(r, "lake", "a", "")
    b = add(r, "lake", "b", "")
    assert r.duplicates(a) == r.duplicates(b) == ()

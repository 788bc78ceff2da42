import gc
import threading

import pytest

from deltakeeper.delta.bulk import collector_paused


def test_the_collector_is_off_inside_and_back_on_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_error_inside_still_turns_it_back_on() -> None:
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_a_collector_turned_off_before_stays_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_pauses_in_two_threads_end_with_it_on() -> None:
    """The first pause to end must not turn the collector on under the second, nor may the
    second, which began with it off, leave it off for good."""
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def second() -> None:
        first_in.wait()
        with collector_paused():
            second_in.set()
            first_out.wait()
            seen.append(gc.isenabled())

    worker = threading.Thread(target=second)
    worker.start()
    with collector_paused():
        first_in.set()
        second_in.wait()
    first_out.set()
    worker.join()
    assert seen == [False]
    assert gc.isenabled()


def test_as_a_decorator_each_call_pauses() -> None:
    @collector_paused()
    def inside() -> bool:
        return gc.isenabled()

    assert (inside(), inside(), gc.isenabled()) == (False, False, True)

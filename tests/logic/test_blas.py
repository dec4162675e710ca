"""The one-thread BLAS limit: one thread inside, the count as it was after (nested, overlapping, raising)."""

import threading

from threadpoolctl import ThreadpoolController

from booku_memory.services.logic.blas import single_threaded_blas


def blas_threads() -> list[int]:
    return [library.get_num_threads() for library in ThreadpoolController().select(user_api="blas").lib_controllers]


def test_limit_sets_one_thread_inside_and_restores_after():
    before = blas_threads()
    with single_threaded_blas():
        assert blas_threads() == [1] * len(before)
        with single_threaded_blas():  # nested: still one thread, and leaving it does not restore yet
            pass
        assert blas_threads() == [1] * len(before)
    assert blas_threads() == before


def test_overlapping_blocks_in_two_threads_leave_the_count_as_it_was():
    """Thread A enters, B enters, A leaves, B leaves: the count is as it was. (A block restores only a count it
    changed itself; threadpoolctl's limit had B restore the one thread it found, A's limit, for good.)"""
    before = blas_threads()
    a_inside, b_inside, a_left = (threading.Event() for _ in range(3))

    def first() -> None:
        with single_threaded_blas():
            a_inside.set()
            b_inside.wait(5)
        a_left.set()

    def second() -> None:
        a_inside.wait(5)
        with single_threaded_blas():
            b_inside.set()
            a_left.wait(5)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert blas_threads() == before


def test_an_exception_inside_still_restores():
    before = blas_threads()
    try:
        with single_threaded_blas():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert blas_threads() == before

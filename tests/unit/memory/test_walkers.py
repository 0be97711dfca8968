"""`search_service._Walkers`: the users whose segment walk may start before their count."""

from app.domain.memory.search_service import _Walkers


def test_remembers_the_last_users_seen_past_the_line() -> None:
    w = _Walkers(2)
    w.note("a", True)
    w.note("b", True)
    w.note("a", True)  # a is the most recent again
    w.note("c", True)  # b, the least recent, goes
    assert (w.walks("a"), w.walks("b"), w.walks("c")) == (True, False, True)


def test_a_user_seen_below_the_line_is_forgotten() -> None:
    w = _Walkers(4)
    w.note("a", True)
    w.note("a", False)
    w.note("z", False)  # never seen past it: nothing to forget
    assert not w.walks("a") and not w.walks("z")

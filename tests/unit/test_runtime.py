import gc

import pytest

from app.lib import runtime


def test_freeze_startup_heap_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "_frozen", False)
    runtime.freeze_startup_heap()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    keep = [[n] for n in range(1000)]  # allocated after start-up: stays collectable
    runtime.freeze_startup_heap()
    assert gc.get_freeze_count() <= frozen  # not frozen again (frozen objects may be freed)
    assert keep

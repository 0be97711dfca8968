import gc

import pytest

from app.lib import runtime


def test_freeze_startup_heap_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "_frozen", False)
    runtime.freeze_startup_heap()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    keep = [object() for _ in range(1000)]  # allocated after start-up: stays collectable
    runtime.freeze_startup_heap()
    assert gc.get_freeze_count() == frozen
    assert keep

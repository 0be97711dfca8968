"""Process-level tuning, applied once the service has started."""

from __future__ import annotations

import gc

_frozen = False


def freeze_startup_heap() -> None:
    """Exempt every object alive after start-up from garbage collection (`gc.freeze`),
    once per process.

    The modules, settings, pools and the embedder make a heap of 100k+ long-lived
    objects; a full (generation 2) collection walks all of them, and a search at a
    heavy user allocates enough (thousands of chunk ids) to trigger one every few
    requests (why: docs/performance.md, "frozen start-up heap"). Frozen objects are
    never collected, so this runs once, after a collection, when what is alive is what
    the process keeps."""
    global _frozen
    if _frozen:
        return
    gc.collect()
    gc.freeze()
    _frozen = True

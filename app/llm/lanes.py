"""Embedding lanes: a query's embedding never waits behind index work.

A request embeds one short query and waits for it; background work (the live index's
vectors, the idle job, compression's demoted chunks in a job) embeds batches of dozens of
segments and nobody waits for it. In one process they would share the in-process model's
run lock, and a `memory_search` would queue behind a batch (about 1.5 s on two cores).
So the lane is part of the call's context: the periodic jobs, the tasks they spawn and
the indexer process run in the `index` lane, everything else in the `query` lane, and the
local embedder keeps one model session per lane (app/llm/local_embedder.py).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Literal

Lane = Literal["query", "index"]

_LANE: ContextVar[Lane] = ContextVar("navi_embed_lane", default="query")


def current_lane() -> Lane:
    return _LANE.get()


def use_index_lane() -> None:
    """From here on, in this context (a task, and the threads it starts through
    `asyncio.to_thread`), embeddings run in the index lane."""
    _LANE.set("index")

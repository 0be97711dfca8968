"""What the raw search remembers between searches, per process (bounded, least recently
used first out). Each memory saves work, never changes an answer: it is checked against
what the search's first statement reads (`ChunkRepository.begin_search`)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

MAX_WALKERS = 10_000
MAX_COMMON_TERMS = 512  # entries of at most TERM_CAP ids each: ~20 MB at 500 ids


class Walkers:
    """The users last seen with more than `EXACT_SCAN_CHUNKS` chunks: for them the
    segment walk starts on its side connection at once, beside the count, instead of
    after it. Only the order of the statements depends on it: a user who crossed the
    line since is walked (or compared exactly) as before, and remembered anew."""

    def __init__(self, size: int = MAX_WALKERS) -> None:
        self.size = size
        self._seen: OrderedDict[str, None] = OrderedDict()

    def walks(self, user_id: str) -> bool:
        return user_id in self._seen

    def note(self, user_id: str, walks: bool) -> None:
        if not walks:
            self._seen.pop(user_id, None)
            return
        self._seen[user_id] = None
        self._seen.move_to_end(user_id)
        while len(self._seen) > self.size:
            self._seen.popitem(last=False)


class CommonTerms:
    """A user's most common query terms — those found in `cap` chunks or more — with the
    ids the lookup returned, stored with the `version` of the user's chunks it was made
    at (the database's oid and `memory_chunk_counts.version`, which every statement
    adding or removing the user's chunks changes, never to a value used before: a
    database created anew — another test's, a restored copy — has another oid). A lookup of such a term is
    the costly part of a raw search at a large history: its GIN bitmap holds every
    posting of the prefix, whatever the cap (why: docs/performance.md, "raw search
    common terms"). While the version is the same the stored ids are what the lookup returns."""

    def __init__(self, size: int = MAX_COMMON_TERMS) -> None:
        self.size = size
        self._ids: OrderedDict[tuple[str, str], tuple[tuple[int, int], tuple[str, ...]]] = (
            OrderedDict()
        )

    def get(self, user_id: str, term: str, version: tuple[int, int]) -> tuple[str, ...] | None:
        found = self._ids.get((user_id, term))
        if found is None or found[0] != version:
            return None
        self._ids.move_to_end((user_id, term))
        return found[1]

    def put(self, user_id: str, term: str, version: tuple[int, int], ids: Sequence[str]) -> None:
        self._ids[(user_id, term)] = (version, tuple(ids))
        self._ids.move_to_end((user_id, term))
        while len(self._ids) > self.size:
            self._ids.popitem(last=False)

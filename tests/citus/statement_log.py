"""Record every SQL statement the app runs during a test run (for the Citus plan check).

A `before_cursor_execute` listener on SQLAlchemy's `Engine` class sees every statement
of every engine made in this process (the app's, the background jobs', the CLI
commands'), with its DBAPI parameters. Each statement is attributed to the innermost
frame of the app's own code that ran it (`app/domain/auth/repositories.py:
UserRepository.get`, say) — through SQLAlchemy's greenlet into the awaiting coroutine —
so the allow-list of deliberate multi-shard statements names code, not SQL text.
Statements no app code ran (a test's own SQL, the fixtures') are recorded with no
caller and are not checked.

The log is one pickle: {statement: Entry}, a few parameter sets per statement.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

ROOT = Path(__file__).resolve().parents[2]
APP_ROOTS = (str(ROOT / "app") + "/",)
# Plumbing under app/ that runs other code's statements: attribute to its caller.
SKIP = (str(ROOT / "app" / "db") + "/",)
TESTS_ROOT = str(ROOT / "tests") + "/"
PARAMS_KEPT = 3


@dataclass
class Entry:
    statement: str
    callers: set[str] = field(default_factory=set)
    params: list[bytes] = field(default_factory=list)  # pickled DBAPI parameter sets
    count: int = 0

    def parameter_sets(self) -> list[Any]:
        return [pickle.loads(p) for p in self.params] or [None]


def _frames(frame: FrameType | None) -> Iterable[FrameType]:
    while frame is not None:
        yield frame
        frame = frame.f_back


def _stacks() -> Iterable[FrameType]:
    """This thread's frames, then those of the greenlets that are waiting on this one."""
    yield from _frames(sys._getframe(2))
    try:
        import greenlet
    except ImportError:  # pragma: no cover - SQLAlchemy's asyncio needs it
        return
    g = greenlet.getcurrent().parent
    while g is not None:
        yield from _frames(g.gr_frame)
        g = g.parent


def caller(
    roots: tuple[str, ...] = APP_ROOTS,
    skip: tuple[str, ...] = SKIP,
    others: tuple[str, ...] = (TESTS_ROOT,),
) -> str | None:
    """`path:qualname` of the innermost frame under `roots` (not under `skip`).

    None when a frame under `others` (the tests) comes first: SQL a test hands the app
    to run (a hook of its own, say) is the test's, not the app's.
    """
    for frame in _stacks():
        name = frame.f_code.co_filename
        if name == __file__ or name.startswith(skip):
            continue
        if name.startswith(roots):
            rel = name[len(str(ROOT)) + 1 :] if name.startswith(str(ROOT)) else name
            return f"{rel}:{frame.f_code.co_qualname}"
        if name.startswith(others):
            return None
    return None


class StatementLog:
    def __init__(
        self,
        path: Path | None = None,
        roots: tuple[str, ...] = APP_ROOTS,
        skip: tuple[str, ...] = SKIP,
        others: tuple[str, ...] = (TESTS_ROOT,),
    ) -> None:
        self.path = path
        self.roots = roots
        self.skip = skip
        self.others = others
        self.entries: dict[str, Entry] = {}

    def _record(self, conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        entry = self.entries.get(statement)
        if entry is None:
            entry = self.entries[statement] = Entry(statement)
        entry.count += 1
        who = caller(self.roots, self.skip, self.others)
        if who:
            entry.callers.add(who)
        if len(entry.params) < PARAMS_KEPT:
            many = executemany and isinstance(parameters, (list, tuple)) and parameters
            params = parameters[0] if many else parameters  # a batch: its first row
            try:
                blob = pickle.dumps(params)
            except Exception:  # noqa: BLE001 - an unpicklable value: keep the statement only
                return
            if blob not in entry.params:
                entry.params.append(blob)

    def install(self) -> None:
        event.listen(Engine, "before_cursor_execute", self._record)

    def uninstall(self) -> None:
        event.remove(Engine, "before_cursor_execute", self._record)

    def write(self, path: Path | None = None) -> Path:
        target = path or self.path
        assert target is not None
        merged = load(target) if target.exists() else {}
        for text, entry in self.entries.items():
            old = merged.get(text)
            if old is None:
                merged[text] = entry
                continue
            old.callers |= entry.callers
            old.count += entry.count
            for p in entry.params:
                if len(old.params) < PARAMS_KEPT and p not in old.params:
                    old.params.append(p)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(target.suffix + ".tmp")
        tmp.write_bytes(pickle.dumps(merged))
        tmp.replace(target)
        return target


def load(path: Path) -> dict[str, Entry]:
    """The log, its parameter sets unpickled once here: that imports the modules of
    their types (the backfill's `PackedVector` registers its psycopg dumper when
    imported), and a psycopg connection copies the global adapters when it is made, so
    this must happen before the check connects."""
    data: dict[str, Entry] = pickle.loads(path.read_bytes())
    for entry in data.values():
        entry.parameter_sets()
    return data

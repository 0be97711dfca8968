"""Import an NDJSON export into an empty account (the export: `exporter.py`).

`import_into`: one transaction (all or nothing) over lines the caller already has (a
spooled request body, a file): the account locked and checked empty (409), then line
by line: each record checked (422 naming the line), rows inserted in batches, facts
given new ids (`merged_into` mapped at the end), the chunk count set. Vectors are kept
when the header's embedder is the server's. Session files are written to a staging
directory and moved into place only after the commit (`files_io.FileWriter`), so the
orphan cleanup never sees a directory whose session is not committed yet.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog
from sqlalchemy.exc import DataError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.engine import transaction
from app.domain.kernel.forgotten import NOTHING
from app.domain.kernel.forgotten_repository import ForgottenRepository
from app.domain.sessions.planning_repository import PlanningRepository
from app.domain.sessions.quota import check_quota, message_bytes
from app.domain.sessions.services import PLANNING_ENTRY_MAX_BYTES, PLANNING_LOGS_KEPT
from app.domain.transfer.decoding import RecordError, decode, split_legacy_planning
from app.domain.transfer.export_repository import ExportRepository
from app.domain.transfer.files_io import FileWriter
from app.domain.transfer.import_repository import ImportRepository
from app.domain.transfer.records import (
    END,
    FILE,
    FORGOTTEN,
    FORMAT,
    HEADER,
    KIND_BY_TYPE,
    VERSION,
    Kind,
    embedder_of,
)
from app.domain.transfer.redaction import ImportRedaction, check_entries
from app.lib.errors import Conflict, NotFound, Unprocessable

log = structlog.get_logger()

#: Rows inserted per statement on import, and the bytes of their lines at most (a
#: message may hold MESSAGE_MAX_CHARS): what an import holds in memory at a time.
INSERT_BATCH = 500
INSERT_BATCH_BYTES = 16 * 1024 * 1024
_PLANNING = KIND_BY_TYPE["planning_entry"]
_MESSAGE_TYPES = ("message", "archived_message")


async def require_user(db: AsyncSession, user_id: str) -> None:
    if not await ExportRepository(db).user_exists(user_id):
        raise NotFound(f"no user {user_id!r}")


class ImportReport(msgspec.Struct):
    """What an import stored: records per type, and whether vectors were kept."""

    user_id: str
    records: dict[str, int]
    vectors: str  # "kept" or "dropped"
    dropped_records: int
    #: planning entries dropped, oldest first, past a session's kept count or bytes
    #: (PLANNING_MAX_SESSION_BYTES), as an append past them drops them
    trimmed_planning_entries: int = 0


@dataclass
class _Batch:
    kind: Kind | None = None
    first_line: int = 0
    last_line: int = 0
    bytes: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)


async def import_into(
    factory: async_sessionmaker[AsyncSession],
    settings: Settings,
    user_id: str,
    lines: AsyncIterable[bytes],
) -> ImportReport:
    """Import `lines` into the (empty) account `user_id` in one transaction of its own;
    the session files are moved into place once it has committed."""
    files = FileWriter(settings)
    try:
        async with transaction(factory) as db:
            report = await ImportService(db, settings).run(user_id, lines, files)
    except BaseException:
        await files.discard()
        raise
    await files.publish()
    return report


class ImportService:
    def __init__(self, db: AsyncSession, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self.repo = ImportRepository(db)

    async def run(
        self, user_id: str, lines: AsyncIterable[bytes], files: FileWriter
    ) -> ImportReport:
        """The import on `db` (committed whole or not at all by its caller); the files
        go to `files`' staging directory."""
        await require_user(self.db, user_id)
        return await _Import(self, user_id, files).run(lines)


class _Import:
    """One import's state: the batch being filled, the ids seen, the counts."""

    def __init__(self, service: ImportService, user_id: str, files: FileWriter) -> None:
        self.repo = service.repo
        self.db = service.db
        self.settings = service.settings
        # the account's forget records and the file's: every record checked against them
        self.redaction = ImportRedaction(NOTHING)
        self.user_id = user_id
        self.files = files
        self.batch = _Batch()
        self.dimension: int | None = None
        self.counts: Counter[str] = Counter()
        self.dropped = 0
        self.sessions: set[uuid.UUID] = set()
        self.fact_ids: dict[int, int] = {}  # id in the file -> new id
        self.merges: list[tuple[int, int]] = []  # (id, merged_into), ids of the file
        self.gone_fact_ids: dict[int, int] = {}  # a version's fact not in the file -> new id
        self.chunks = 0
        self.trimmed = 0  # planning entries past a session's caps
        self.message_bytes = 0  # of the file's messages (the storage quota)
        self.session_bytes: Counter[uuid.UUID] = Counter()
        # planning entries of the session records of an older file (`planning_logs`)
        self.legacy_planning: list[dict[str, Any]] = []

    async def run(self, lines: AsyncIterable[bytes]) -> ImportReport:
        number = records = 0
        started = ended = False
        async for raw in lines:
            number += 1
            if not raw.strip():
                continue
            record = _parse(raw, number)
            type_ = record["type"]
            if not started:
                await self._start(record, number)
                started = True
                continue
            if ended:
                raise Unprocessable(f"line {number}: a record after the end record")
            if type_ == END:
                await self._flush()
                self._check_end(record, records, number)
                ended = True
                continue
            records += 1
            await self._record(type_, record, number, len(raw))
        if not started:
            raise Unprocessable("line 1: the file is empty (expected the header record)")
        if not ended:
            raise Unprocessable(
                f"line {number}: the file ends without its end record (was it cut short?)"
            )
        await self._finish()
        return ImportReport(
            user_id=self.user_id,
            records=dict(self.counts),
            vectors="kept" if self.dimension is not None else "dropped",
            dropped_records=self.dropped,
            trimmed_planning_entries=self.trimmed,
        )

    async def _start(self, record: dict[str, Any], number: int) -> None:
        if record.get("type") != HEADER:
            raise Unprocessable(
                f'line {number}: expected the header record (`"type": "header"`) first'
            )
        if record.get("format") != FORMAT:
            raise Unprocessable(f"line {number}: format: expected {FORMAT!r}")
        if record.get("version") != VERSION:
            raise Unprocessable(
                f"line {number}: version: {record.get('version')!r} is not supported (this "
                f"server reads version {VERSION})"
            )
        ours = embedder_of(self.settings)
        if record.get("embedder") == ours and ours["name"] != "none":
            self.dimension = int(ours["dimension"])
        await self.repo.lock_account(self.user_id)
        table = await self.repo.first_nonempty(self.user_id)
        if table is not None:
            raise Conflict(
                f"user {self.user_id!r}: the account is not empty ({table} has rows); an "
                "import needs an account without sessions, facts or other memory"
            )
        # held in share mode until the import commits: a forget of this account waits
        # for it (and then finds what it stored), or went first and is checked here
        self.redaction.forgotten = await ForgottenRepository(self.db).guard(self.user_id)

    async def _record(self, type_: str, record: dict[str, Any], number: int, size: int) -> None:
        if type_ == HEADER:
            raise Unprocessable(f"line {number}: a second header record")
        if type_ == FILE:
            await self._flush()
            try:
                await self.files.write(record, self.sessions)
            except RecordError as exc:
                raise Unprocessable(f"line {number} (file): {exc}") from None
            self.counts[FILE] += 1
            return
        kind = KIND_BY_TYPE.get(type_)
        if kind is None:
            raise Unprocessable(f"line {number}: unknown record type {type_!r}")
        if kind.vectors_only and self.dimension is None:
            self.dropped += 1
            return
        try:
            record, legacy = split_legacy_planning(record)
            values = decode(kind, record, self.dimension)
            planning = [decode(_PLANNING, r, self.dimension) for r in legacy]
            for entry in [values] if kind is _PLANNING else planning:
                _check_planning_entry(entry)
        except RecordError as exc:
            raise Unprocessable(f"line {number} ({type_}): {exc}") from None
        if type_ == FORGOTTEN:
            await self._forgotten(values, number)
            return
        if self.redaction.drops(type_, values):  # a vector of a text now redacted
            self.dropped += 1
            return
        values = self.redaction.apply(type_, values)
        planning = [self.redaction.apply(_PLANNING.type, p) for p in planning]
        full = len(self.batch.rows) >= INSERT_BATCH or self.batch.bytes >= INSERT_BATCH_BYTES
        if self.batch.kind is not kind or full:
            await self._flush()
            self.batch = _Batch(kind, number)
        if kind.type in _MESSAGE_TYPES:
            self._count_message(values, number)
        self.batch.rows.append(values)
        if planning:  # inserted after their session's batch
            self.legacy_planning.extend(planning)
            self.counts[_PLANNING.type] += len(planning)
        self.batch.last_line = number
        self.batch.bytes += size
        self.counts[type_] += 1

    def _count_message(self, values: dict[str, Any], number: int) -> None:
        """The message's bytes to its session's `message_bytes`; 413 naming the line once
        the file passes the user's message-storage quota (the account is empty)."""
        n = message_bytes(
            values.get("content"),
            values.get("thinking"),
            values.get("tool_calls"),
            values.get("images"),
        )
        check_quota(self.settings, self.message_bytes, n, f"line {number}")
        self.message_bytes += n
        sid = values.get("session_id")
        if isinstance(sid, uuid.UUID):
            self.session_bytes[sid] += n

    async def _forgotten(self, values: dict[str, Any], number: int) -> None:
        """The file's forget records: added to the account's, and checked from here on."""
        try:
            entries = check_entries(values.get("entries", []))
        except ValueError as exc:
            raise Unprocessable(f"line {number} ({FORGOTTEN}): {exc}") from None
        await self._flush()
        repo = ForgottenRepository(self.db)
        for entry in entries:
            await repo.add(self.user_id, entry)
        self.redaction.forgotten = self.redaction.forgotten.with_entries(entries)
        self.counts[FORGOTTEN] += 1

    async def _flush(self) -> None:
        batch, self.batch = self.batch, _Batch()
        if batch.kind is None or not batch.rows:
            return
        kind, rows = batch.kind, batch.rows
        where = f"lines {batch.first_line}-{batch.last_line} ({kind.type})"
        if kind.type == "session":
            await self._check_sessions(rows)
        try:
            if kind.type == "fact":
                new_ids = await self.repo.insert_facts(self.user_id, rows)
                for row, new_id in zip(rows, new_ids, strict=True):
                    self.fact_ids[row["id"]] = new_id
                    if row.get("merged_into") is not None:
                        self.merges.append((row["id"], row["merged_into"]))
            elif kind.type == "fact_version":
                await self.repo.insert(kind, self.user_id, await self._version_rows(rows))
            else:
                await self.repo.insert(kind, self.user_id, rows)
        except (IntegrityError, DataError) as exc:  # rows the database refuses: the file's
            detail = getattr(getattr(exc.orig, "diag", None), "message_primary", None)
            raise Unprocessable(f"{where}: {detail or type(exc.orig).__name__}") from None
        if kind.type == "session":
            self.sessions.update(r["id"] for r in rows)
            planning, self.legacy_planning = self.legacy_planning, []
            if planning:
                await self.repo.insert(_PLANNING, self.user_id, planning)
        elif kind.type == "chunk":
            self.chunks += len(rows)

    async def _version_rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The versions with their facts' new ids; a fact the file does not hold (deleted
        before the export) gets a new id of its own, the same for all its versions."""
        ids = {**self.gone_fact_ids, **self.fact_ids}
        unknown = sorted({r["fact_id"] for r in rows} - ids.keys())
        if unknown:
            fresh = dict(zip(unknown, await self.repo.new_fact_ids(len(unknown)), strict=True))
            self.gone_fact_ids.update(fresh)
            ids.update(fresh)
        return [{**r, "fact_id": ids[r["fact_id"]]} for r in rows]

    async def _check_sessions(self, rows: list[dict[str, Any]]) -> None:
        taken = await self.repo.taken_session_ids([r["id"] for r in rows])
        if taken:
            raise Conflict(
                f"session {taken[0]}: the id is already a session on this server (another "
                "account's, or imported before); delete it first to move it here"
            )

    def _check_end(self, record: dict[str, Any], records: int, number: int) -> None:
        if record.get("records") != records:
            raise Unprocessable(
                f"line {number}: the end record counts {record.get('records')!r} records, "
                f"the file has {records}"
            )

    async def _finish(self) -> None:
        merges = []
        for fact_id, into in self.merges:
            if into not in self.fact_ids:
                raise Unprocessable(f"fact {fact_id}: merged_into {into} is not a fact of the file")
            merges.append((self.fact_ids[fact_id], self.fact_ids[into]))
        try:
            await self.repo.merge_facts(self.user_id, merges)
        except (IntegrityError, DataError) as exc:
            raise Unprocessable(f"facts: merged_into: {type(exc.orig).__name__}") from None
        await self.repo.add_missing_versions(self.user_id)
        await self.repo.set_message_bytes(
            self.user_id, {sid: self.session_bytes[sid] for sid in self.sessions}
        )
        self.trimmed = await PlanningRepository(self.repo.session).trim_user(
            self.user_id,
            keep=PLANNING_LOGS_KEPT,
            max_bytes=self.settings.planning_max_session_bytes,
        )
        await self.repo.count_chunks(self.user_id, self.chunks)
        await self.repo.mark_extraction_pending(self.user_id)
        await self.repo.mark_background_work(self.user_id)
        log.info(
            "transfer.imported",
            user_id=self.user_id,
            records=sum(self.counts.values()),
            vectors="kept" if self.dimension is not None else "dropped",
            redacted=self.redaction.redacted,
        )


def _check_planning_entry(values: dict[str, Any]) -> None:
    """An entry the API would refuse (over PLANNING_ENTRY_MAX_BYTES) is refused here."""
    size = len(msgspec.json.encode(values.get("entry")))
    if size > PLANNING_ENTRY_MAX_BYTES:
        raise RecordError(f"entry: {size} bytes, the limit is {PLANNING_ENTRY_MAX_BYTES}")


def _parse(raw: bytes, number: int) -> dict[str, Any]:
    try:
        record = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise Unprocessable(f"line {number}: not JSON ({exc})") from None
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        raise Unprocessable(f"line {number}: expected a JSON object with a string `type`")
    return record

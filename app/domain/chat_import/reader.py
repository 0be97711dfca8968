"""Streaming reader of an export file: detect its format, yield one conversation at a time.

The file (a spooled request body, or a file the CLI opened) is read incrementally —
`ijson` over the JSON array, a line at a time for JSON Lines, one zip member at a time —
so memory holds one conversation, whatever the export's size. Synchronous: the importer
calls it from a worker thread.

Detection (unless the caller names the format): zip magic → a ChatGPT (or Claude) export
archive, its `conversations*.json` read in manifest order (`conversation_asset_file_names
.json` is not one of them); `[` → a JSON array whose first element says which vendor
(`mapping`: ChatGPT, `chat_messages`: Claude); `{` → JSON Lines. A damaged or cut file
stops the reading where it breaks: what came before is imported and `truncated` says why.
"""

from __future__ import annotations

import bisect
import itertools
import json
import posixpath
import re
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import ijson

from app.domain.chat_import.chatgpt import parse_chatgpt
from app.domain.chat_import.claude import parse_claude
from app.domain.chat_import.formats import (
    CHATGPT,
    CLAUDE,
    FORMATS,
    JSONL,
    Attachment,
    Conversation,
    RecordError,
    fill_times,
    parse_jsonl_line,
)
from app.lib.errors import Unprocessable

ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_SHARD = re.compile(r"^conversations(-\d+)?\.json$")
SIDE_FILE_MAX_BYTES = 16 * 1024 * 1024  # conversation_asset_file_names.json at most
_PARSERS: dict[str, Callable[[Any], Conversation]] = {CHATGPT: parse_chatgpt, CLAUDE: parse_claude}


@dataclass(frozen=True)
class Skip:
    where: str  # "conversation 12 (id …)", "line 7"
    reason: str


def _first_byte(f: IO[bytes]) -> bytes:
    head = f.read(4096)
    f.seek(0)
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]


def _vendor(first: Any) -> str:
    if isinstance(first, dict) and "mapping" in first:
        return CHATGPT
    if isinstance(first, dict) and "chat_messages" in first:
        return CLAUDE
    raise Unprocessable(
        "format: the first conversation has neither `mapping` (ChatGPT) nor "
        "`chat_messages` (Claude); name the format with `?format=`"
    )


class ExportReader:
    """One export file. `conversations()` yields them; `skipped`, `truncated` and
    `notes` say what was left out; `attachment()` opens a file of a zip."""

    def __init__(self, f: IO[bytes], fmt: str | None, max_line_bytes: int) -> None:
        if fmt is not None and fmt not in FORMATS:
            raise Unprocessable(f"format: {fmt!r} is not one of {', '.join(FORMATS)}")
        self.f = f
        self.max_line_bytes = max_line_bytes
        self.skipped: list[Skip] = []
        self.notes: list[str] = []
        self.truncated: str | None = None
        self.zip: zipfile.ZipFile | None = None
        self._members: list[tuple[str, str]] = []  # (basename, member), sorted
        self._asset_names: dict[str, str] = {}
        self._absent: list[str] = []  # shards the manifest lists that the zip lacks
        head = f.read(4)
        f.seek(0)
        if head in ZIP_MAGIC:
            try:
                self.zip = zipfile.ZipFile(f)
            except (zipfile.BadZipFile, OSError) as exc:
                raise Unprocessable(f"file: a damaged or truncated zip ({exc})") from None
            self.format = fmt if fmt in (CHATGPT, CLAUDE) else ""
            self._index_zip()
        elif fmt in (JSONL,) or (fmt is None and _first_byte(f) == b"{"):
            self.format = JSONL
        elif fmt in (CHATGPT, CLAUDE) or (fmt is None and _first_byte(f) == b"["):
            self.format = fmt or ""
        else:
            raise Unprocessable("file: not a zip, a JSON array (conversations.json) or JSON Lines")

    # --- zip -------------------------------------------------------------------------

    def _index_zip(self) -> None:
        assert self.zip is not None
        names = [i.filename for i in self.zip.infolist() if not i.is_dir()]
        self._members = sorted((posixpath.basename(n), n) for n in names)
        shards = self._shards(names)
        if not shards:
            raise Unprocessable("file: the zip holds no conversations.json")
        self._shard_names = shards
        for base, name in self._members:
            if base == "conversation_asset_file_names.json":
                info = self.zip.getinfo(name)
                if info.file_size <= SIDE_FILE_MAX_BYTES:
                    try:
                        loaded = json.loads(self.zip.read(name))
                    except (ValueError, zipfile.BadZipFile, OSError):
                        loaded = None
                    if isinstance(loaded, dict):
                        self._asset_names = {k: v for k, v in loaded.items() if isinstance(v, str)}
            elif base.endswith(".zip"):
                self.notes.append(f"{name}: a nested zip, not read (unpack it and import it)")

    def _shards(self, names: list[str]) -> list[str]:
        assert self.zip is not None
        manifest = next((n for n in names if posixpath.basename(n) == "export_manifest.json"), None)
        listed: list[str] = []
        if manifest is not None and self.zip.getinfo(manifest).file_size <= SIDE_FILE_MAX_BYTES:
            try:
                data = json.loads(self.zip.read(manifest))
                files = data["logical_files"]["conversations.json"]["files"]
                listed = [str(p) for p in files]
            except (ValueError, KeyError, TypeError, zipfile.BadZipFile, OSError):
                listed = []
        if listed:
            prefix = posixpath.dirname(manifest or "")
            present = set(names)
            out = []
            for p in listed:
                full = posixpath.join(prefix, p) if prefix else p
                if full in present:
                    out.append(full)
                else:
                    self._absent.append(p)
            return out
        shards = [n for n in names if _SHARD.match(posixpath.basename(n))]
        return sorted(shards, key=lambda n: (n.count("/"), n))

    def _find_member(self, ref: str) -> str | None:
        exact = f"{ref}.dat"
        i = bisect.bisect_left(self._members, (ref, ""))
        for base, name in self._members[i:]:
            if not base.startswith(ref):
                break
            if base == exact or base[len(ref) : len(ref) + 1] in ("-", "_", "."):
                return name
        return None

    def attachment(self, att: Attachment) -> tuple[str, zipfile.ZipInfo] | None:
        """The zip member holding `att`'s bytes and the name to store it under; None
        when the export does not carry them."""
        if self.zip is None or not att.ref:
            return None
        member = self._find_member(att.ref)
        if member is None:
            return None
        base = posixpath.basename(member)
        name = att.name if att.name != att.ref else self._asset_names.get(base, base)
        return name, self.zip.getinfo(member)

    # --- conversations ---------------------------------------------------------------

    def conversations(self) -> Iterator[Conversation]:
        if self.format == JSONL:
            yield from self._jsonl()
            return
        if self.zip is None:
            yield from self._array(self.f, "")
            return
        for shard in self._shard_names:
            with self.zip.open(shard) as member:
                yield from self._array(member, f"{shard}: ")
            if self.truncated:
                return
        if self._absent:  # a download cut short: its other shards were read
            self.truncated = (
                f"{', '.join(self._absent[:5])}: listed in export_manifest.json, not in the zip"
            )

    def _array(self, f: IO[bytes], where: str) -> Iterator[Conversation]:
        items = ijson.items(f, "item", use_float=True)
        index = 0
        try:
            for conv in items:
                index += 1
                if not self.format:
                    self.format = _vendor(conv)
                yield from self._one(conv, f"{where}conversation {index}")
        except ijson.JSONError as exc:  # IncompleteJSONError included
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            self.truncated = (
                f"{where}the JSON breaks after conversation {index} ({why}); the "
                "conversations before it were read"
            )

    def _one(self, conv: Any, where: str) -> Iterator[Conversation]:
        cid = (
            conv.get("conversation_id") or conv.get("id") or conv.get("uuid")
            if isinstance(conv, dict)
            else None
        )
        label = f"{where} ({str(cid)[:80]})" if isinstance(cid, str) else where
        try:
            yield _PARSERS[self.format](conv)
        except RecordError as exc:
            self.skipped.append(Skip(label, str(exc)))

    def _lines(self) -> Iterator[tuple[int, Any]]:
        for number in itertools.count(1):
            raw = self.f.readline(self.max_line_bytes + 1)
            if not raw:
                return
            if len(raw) > self.max_line_bytes and not raw.endswith(b"\n"):
                while (rest := self.f.readline(1024 * 1024)) and not rest.endswith(b"\n"):
                    pass
                self.skipped.append(Skip(f"line {number}", "longer than the limit"))
                continue
            if not raw.strip():
                continue
            try:
                yield number, json.loads(raw)
            except ValueError as exc:
                if not raw.endswith(b"\n") and self.f.read(1) == b"":
                    self.truncated = (
                        f"line {number}: cut short ({exc}); the lines before it were read"
                    )
                    return
                self.skipped.append(Skip(f"line {number}", f"not JSON ({exc})"))

    def _jsonl(self) -> Iterator[Conversation]:
        current: Conversation | None = None
        seen: set[str] = set()
        refused: set[str] = set()
        for number, record in self._lines():
            try:
                line = parse_jsonl_line(record)
            except RecordError as exc:
                self.skipped.append(Skip(f"line {number}", str(exc)))
                continue
            if current is None or line.conversation_id != current.source_id:
                if current is not None:
                    fill_times(current.messages, None)
                    yield current
                    current = None
                if line.conversation_id in seen:
                    if line.conversation_id in refused:
                        continue
                    refused.add(line.conversation_id)
                    self.skipped.append(
                        Skip(
                            f"line {number} ({line.conversation_id[:80]})",
                            "the conversation's lines are not together (sort the file by "
                            "conversation_id)",
                        )
                    )
                    continue
                seen.add(line.conversation_id)
                current = Conversation(JSONL, line.conversation_id, line.title, None, [])
            if line.title and not current.title:
                current.title = line.title
            if line.message is None:
                current.skipped[line.skip or "unreadable"] += 1
            else:
                current.messages.append(line.message)
        if current is not None:
            fill_times(current.messages, None)
            yield current
        if not seen and not self.skipped and self.truncated is None:
            self.notes.append("the file holds no line")

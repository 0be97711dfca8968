"""The workload of `make soak` (bench/soak.py): users driving the service from asyncio
clients, and the ledger of what each request was answered.

Every message a client sends starts with a marker of its own (`mk` + 12 hex digits; a
turn's final reply `re` + the user message's marker), so the checker finds each one by
its first word whatever else the message holds. A request answered 2xx is
**acknowledged**: its writes must be there exactly once. One that failed (a non-2xx, a
dropped connection, a timeout) is **unknown**: at most once. The secrets the forgets
remove (`sq` + 10 hex digits) are planted in acknowledged appends and fact values.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from _app import DEFAULT_CHAT_REPLY, ScriptedReply

KINDS = ("append", "turn", "fact_save", "fact_delete", "forget", "compact", "search", "import", "upload")  # fmt: skip
WEIGHTS = (34, 14, 16, 8, 7, 8, 13, 3, 4)
CATEGORY = "soak"
MARKER = re.compile(r"^(re)?(mk[0-9a-f]{12})\b")
ANY_MARKER = re.compile(r"mk[0-9a-f]{12}")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
PROFILE_ID = "soak"
#: a small window: sessions of a few dozen messages compact
PROFILES = {PROFILE_ID: {"context_window": 4096, "compression_keep_recent": 4}}
WORDS = "deploy staging branch smoke tests editor neovim tabs spaces release notes".split()


def marker() -> str:
    return f"mk{random.getrandbits(48):012x}"


def secret() -> str:
    return f"sq{random.getrandbits(40):010x}"


# ------------------------------------------------------------------ the model's script
def model_reply(body: dict[str, Any]) -> ScriptedReply | str:
    """The fake model's answer to one chat call: a turn (tools offered) first calls
    `memory_search`, then answers `re<marker>` of the turn's user message; anything else
    (a summary, a title, extraction) gets the fake's default reply."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if not body.get("tools") or not messages:
        return DEFAULT_CHAT_REPLY
    if messages[-1].get("role") == "user":
        query = f"nothing{random.getrandbits(20):05x}"
        return ScriptedReply("Let me look.", tool_calls=[{"name": "memory_search", "arguments": {"query": query}}])  # fmt: skip
    for m in reversed(messages):
        found = MARKER.match(str(m.get("content") or "")) if m.get("role") == "user" else None
        if found:
            return ScriptedReply(f"re{found.group(2)} done, nothing more to add.")
    return ScriptedReply("done.")


# ------------------------------------------------------------------ the ledger
@dataclass
class Ledger:
    """What every client was answered, in seconds since `t0` (monotonic)."""

    t0: float = field(default_factory=time.monotonic)
    #: marker → True (acknowledged) / False (unknown); its session
    messages: dict[str, bool] = field(default_factory=dict)
    message_session: dict[str, str] = field(default_factory=dict)
    #: (user, key) → saved | save? | deleted | delete? | forgotten; the value saved
    facts: dict[tuple[str, str], str] = field(default_factory=dict)
    fact_values: dict[tuple[str, str], str] = field(default_factory=dict)
    #: (user, text) of every acknowledged forget
    forgotten: list[tuple[str, str]] = field(default_factory=list)
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    #: (seconds, kind, status) of every answer that was not 2xx (0: no answer)
    failures: list[tuple[float, str, int]] = field(default_factory=list)
    #: 5xx other than a 503 with Retry-After
    bad: list[str] = field(default_factory=list)
    #: a 4xx that contradicts an acknowledged write (a saved fact's delete answered 404)
    odd: list[str] = field(default_factory=list)
    #: "kind status: detail" of every 4xx/5xx answer, counted
    details: Counter[str] = field(default_factory=Counter)
    #: the users the imports created: id → token
    import_users: dict[str, str] = field(default_factory=dict)
    #: per client, the longest its turn session refused turns (409 "already running")
    turn_refused: list[float] = field(default_factory=list)
    #: kind → (started, answered) of every 2xx
    ok_times: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    #: (user, session, stored name) → sha256 of every acknowledged upload
    uploads: dict[tuple[str, str, str], str] = field(default_factory=dict)
    #: (from, to) while the session files' disk was full (bench/_soak_disk.py)
    full_windows: list[tuple[float, float]] = field(default_factory=list)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def record(self, kind: str, started: float, r: httpx.Response | None, error: str = "") -> None:
        status = r.status_code if r is not None else 0
        self.statuses[(kind, status)] += 1
        if 200 <= status < 300:
            self.ok_times.setdefault(kind, []).append((started, self.now()))
            return
        self.failures.append((started, kind, status))
        if r is not None:
            self.details[f"{kind} {status}: {_detail(r)}"] += 1
        if r is not None and status >= 500:
            # a turn's 503 comes without Retry-After by contract: its message is stored,
            # and re-sending would store it twice (docs/agents.md)
            if status == 503 and (r.headers.get("retry-after") or kind == "turn"):
                return
            # 507 while the session files' disk is full: nothing stored, by contract
            if status == 507 and self.disk_was_full(started, self.now()):
                return
            self.bad.append(f"{started:7.1f} s {kind}: {status} {r.text[:300]}")

    def disk_was_full(self, start: float, end: float) -> bool:
        """Whether the session files' disk was full at some time from `start` to `end`."""
        return any(a <= end and start <= b for a, b in self.full_windows)


def _detail(r: httpx.Response) -> str:
    try:
        body = r.json()
    except ValueError:
        return r.text[:80]
    detail = str(body.get("detail", "")) if isinstance(body, dict) else ""
    return re.sub(r"[0-9a-f]{8,}|\d+(\.\d+)?", "#", detail)[:90]


# ------------------------------------------------------------------ one client
@dataclass
class Client:
    """One asyncio client of one user: its own sessions, facts and secrets (no two
    clients touch the same key or turn session), ops drawn by WEIGHTS."""

    http: httpx.AsyncClient
    user_id: str
    ledger: Ledger
    rng: random.Random
    token: str = ""
    sessions: list[str] = field(default_factory=list)
    turn_session: str = ""
    live_facts: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)  # planted and acknowledged
    secret_facts: dict[str, list[str]] = field(default_factory=dict)
    #: for the imports: an admin client, and an export whose ids and markers each
    #: import replaces with new ones (a new user's account is restored from it)
    admin: httpx.AsyncClient | None = None
    template: str = ""
    refused_since: float | None = None  # the turn session answers 409 since then
    refused_longest: float = 0.0

    async def call(self, kind: str, method: str, path: str, **kw: Any) -> httpx.Response | None:
        started = self.ledger.now()
        try:
            r = await self.http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            self.ledger.record(kind, started, None, type(exc).__name__)
            return None
        self.ledger.record(kind, started, r)
        return r

    async def setup(self, n_sessions: int) -> None:
        for _ in range(n_sessions + 1):
            r = await self.http.post("/sessions", json={"profile_id": PROFILE_ID, "name": "soak"})
            r.raise_for_status()
            self.sessions.append(r.json()["id"])
        self.turn_session = self.sessions.pop()

    async def run(self, stop: asyncio.Event) -> None:
        ops: dict[str, Callable[[], Any]] = {
            "append": self.append, "turn": self.turn, "fact_save": self.fact_save,
            "fact_delete": self.fact_delete, "forget": self.forget, "compact": self.compact,
            "search": self.search, "import": self.import_, "upload": self.upload,
        }  # fmt: skip
        while not stop.is_set():
            kind = self.rng.choices(KINDS, WEIGHTS)[0]
            await ops[kind]()
            await asyncio.sleep(self.rng.uniform(0.02, 0.12))

    # -------------------------------------------------------------- the operations
    async def append(self) -> None:
        sid = self.rng.choice(self.sessions)
        plant = secret() if self.rng.random() < 0.15 else None
        msgs, marks = [], []
        for i in range(self.rng.randint(1, 3)):
            m = marker()
            words = " ".join(self.rng.choices(WORDS, k=8))
            text = f"{m} {words}" + (f" my code is {plant}" if plant and i == 0 else "")
            msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
            marks.append(m)
        r = await self.call("append", "POST", f"/sessions/{sid}/messages", json={"messages": msgs})
        acked = r is not None and r.status_code == 201
        for m in marks:
            self.ledger.messages[m] = acked
            self.ledger.message_session[m] = sid
        if acked and plant:
            self.secrets.append(plant)

    async def turn(self) -> None:
        m = marker()
        body = {"message": {"content": f"{m} please check my memory"}}
        r = await self.call("turn", "POST", f"/sessions/{self.turn_session}/turns", json=body)
        acked = r is not None and r.status_code == 200
        if r is not None and r.status_code == 409 and self.refused_since is None:
            self.refused_since = self.ledger.now()
        elif acked:
            self.end_refusal()
        self.ledger.messages[m] = acked
        self.ledger.message_session[m] = self.turn_session
        completed = acked and r is not None and r.json().get("status") == "completed"
        self.ledger.messages["re" + m] = completed
        self.ledger.message_session["re" + m] = self.turn_session

    def end_refusal(self) -> None:
        """A stretch of 409s on the turn session ended (a 2xx, or the run's end)."""
        if self.refused_since is not None:
            self.refused_longest = max(self.refused_longest, self.ledger.now() - self.refused_since)
            self.refused_since = None

    async def fact_save(self) -> None:
        key = f"k{self.rng.getrandbits(40):010x}"
        plant = secret() if self.rng.random() < 0.2 else None
        value = f"value {key} " + (f"code {plant}" if plant else " ".join(self.rng.choices(WORDS, k=4)))  # fmt: skip
        body = {"category": CATEGORY, "key": key, "value": value, "dedupe": False}
        r = await self.call("fact_save", "POST", "/memory/facts", json=body)
        acked = r is not None and r.status_code == 201
        self.ledger.facts[(self.user_id, key)] = "saved" if acked else "save?"
        self.ledger.fact_values[(self.user_id, key)] = value
        if acked and plant:
            self.secrets.append(plant)
            self.secret_facts.setdefault(plant, []).append(key)
        elif acked:
            self.live_facts.append(key)

    async def fact_delete(self) -> None:
        if not self.live_facts:
            return await self.fact_save()
        key = self.live_facts.pop(self.rng.randrange(len(self.live_facts)))
        path = f"/memory/facts/{key}"
        r = await self.call("fact_delete", "DELETE", path, params={"category": CATEGORY})
        if r is not None and r.status_code == 404:  # an acknowledged save, not found
            self.ledger.odd.append(f"{self.ledger.now():7.1f} s fact_delete: 404 for saved {key}")
        acked = r is not None and r.status_code == 204
        self.ledger.facts[(self.user_id, key)] = "deleted" if acked else "delete?"

    async def forget(self) -> None:
        if not self.secrets:
            return await self.append()
        text = self.secrets.pop(0)
        r = await self.call("forget", "POST", "/memory/forget", json={"text": text})
        done = r is not None and r.status_code == 200
        if r is not None and r.status_code == 202:  # a job: done once its status says so
            done = await self.forget_job(r.json()["status_url"])
        for key in self.secret_facts.pop(text, []):
            self.ledger.facts[(self.user_id, key)] = "forgotten" if done else "save?"
        if done:
            self.ledger.forgotten.append((self.user_id, text))

    async def forget_job(self, url: str) -> bool:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            try:
                r = await self.http.get(url)
            except httpx.HTTPError:
                continue
            if r.status_code == 200 and r.json().get("state") != "running":
                return bool(r.json().get("state") == "done")
        return False

    async def compact(self) -> None:
        sid = self.rng.choice(self.sessions)
        r = await self.call("compact", "POST", f"/sessions/{sid}/compact", json={})
        if r is not None and r.status_code == 409 and "nothing to compact" not in r.text:
            self.ledger.odd.append(f"{self.ledger.now():7.1f} s compact: 409 {r.text[:200]}")

    async def search(self) -> None:
        query = " ".join(self.rng.choices(WORDS, k=2))
        await self.call("search", "POST", "/memory/search", json={"query": query, "k": 5})

    async def upload(self) -> None:
        """A small file (1–8 KiB) to one of the sessions: acknowledged (201), it must be
        listed and download with its bytes at the end."""
        sid = self.rng.choice(self.sessions)
        name = f"{marker()}.txt"
        data = (name.encode() + b" " + self.rng.randbytes(24).hex().encode()) * self.rng.randint(16, 128)  # fmt: skip
        files = [("files", (name, data, "text/plain"))]
        r = await self.call("upload", "POST", f"/sessions/{sid}/files", files=files)
        if r is not None and r.status_code == 201:
            stored = r.json()["files"][0]["name"]
            self.ledger.uploads[(self.user_id, sid, stored)] = hashlib.sha256(data).hexdigest()

    async def import_(self) -> None:
        """A new user (the admin's), then `POST /me/import` of the template with fresh
        ids and markers: acknowledged, its messages must be there exactly once."""
        if self.admin is None or not self.template:
            return await self.search()
        try:
            r = await self.admin.post("/admin/users", json={"name": f"soak-import-{marker()}"})
            user_id = r.json()["id"] if r.status_code == 201 else None
            if user_id:
                r = await self.admin.post(f"/admin/users/{user_id}/tokens", json={"name": "soak"})
        except httpx.HTTPError:
            return
        if not user_id or r.status_code != 201:
            return  # a fault: no account to import into (not the import's answer)
        token = r.json()["token"]
        ids: dict[str, str] = {}
        marks: dict[str, str] = {}
        body = UUID.sub(lambda m: ids.setdefault(m.group(0), str(uuid.uuid4())), self.template)
        body = ANY_MARKER.sub(lambda m: marks.setdefault(m.group(0), marker()), body)
        headers = {"authorization": f"Bearer {token}", "content-type": "application/x-ndjson"}
        r = await self.call("import", "POST", "/me/import", content=body, headers=headers)
        acked = r is not None and r.status_code == 201
        self.ledger.import_users[user_id] = token
        for line in body.splitlines():
            if '"type":"message"' not in line.replace(" ", ""):
                continue
            record = json.loads(line)
            m = MARKER.match(record.get("content") or "")
            if m:
                self.ledger.messages[m.group(2)] = acked
                self.ledger.message_session[m.group(2)] = record["session_id"]

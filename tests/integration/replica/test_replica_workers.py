"""Read-your-writes across the worker processes of one `navi serve` (issue 36): a write
served by one worker, the next read by the other, no `Navi-Min-LSN` header, replay
paused on the replica — the read sees the write (app/db/write_positions.py)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import _free_port, app_env, child_pids, cmdline
from tests.conftest import ADMIN_TOKEN, replica_url_of
from tests.fakes.ollama_server import FakeOllama
from tests.integration.replica.test_replica_reads import paused_replay  # noqa: F401

pytestmark = pytest.mark.skipif(
    not os.environ.get("TEST_DATABASE_REPLICA_URL"),
    reason="needs TEST_DATABASE_REPLICA_URL (scripts/provision-replica.sh)",
)
ROUNDS = 10


class Served:
    """`navi serve --workers 2` on the test database and its replica."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log

    def workers(self) -> set[int]:
        # uvicorn's supervisor starts the workers (multiprocessing's spawn); a resource
        # tracker would be a child too, without spawn_main
        return {p for p in child_pids(self.proc.pid) if "spawn_main" in cmdline(p)}

    def worker_of(self, conn: http.client.HTTPConnection) -> int:
        """The worker process holding the server end of `conn` (from /proc)."""
        assert conn.sock is not None
        client_port = conn.sock.getsockname()[1]
        inode = _server_socket_inode(self.port, client_port)
        for pid in self.workers():
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    if os.readlink(fd) == f"socket:[{inode}]":
                        return pid
                except OSError:
                    continue
        raise AssertionError(f"no worker holds the connection from port {client_port}")


def _server_socket_inode(server_port: int, client_port: int) -> str:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if (
                int(local.rsplit(":", 1)[1], 16) == server_port
                and int(remote.rsplit(":", 1)[1], 16) == client_port
            ):
                return inode
    raise AssertionError("the connection is not in /proc/net/tcp")


@pytest.fixture
def served(db_url: str, ollama: FakeOllama, tmp_path: Path) -> Iterator[Served]:
    port = _free_port()
    env = app_env(
        db_url,
        ollama,
        tmp_path,
        DATABASE_REPLICA_URL=replica_url_of(db_url),
        # a high bound: only read-your-writes may send the reads to the primary
        REPLICA_MAX_LAG_SECONDS="3600",
        REPLICA_CHECK_SECONDS="0.2",
    )
    env.pop("NAVI_WRITE_POSITIONS", None)
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--workers", "2", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    s = Served(proc, port, log)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                status, _ = _call(_conn(port), "GET", "/health")
                if status in (200, 503) and len(s.workers()) == 2:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"not up: {log.read_text()[-3000:]}"
            time.sleep(0.3)
        yield s
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _conn(port: int) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", port, timeout=30)


def _call(
    conn: http.client.HTTPConnection,
    method: str,
    path: str,
    body: Any = None,
    token: str = ADMIN_TOKEN,
    extra: dict[str, str] | None = None,
) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}", **(extra or {})}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    raw = r.read()
    return r.status, json.loads(raw) if raw and raw[:1] in b"[{" else raw


def _two_workers(s: Served) -> tuple[http.client.HTTPConnection, http.client.HTTPConnection]:
    """Two kept-alive connections served by different workers."""
    first = _conn(s.port)
    _call(first, "GET", "/health")
    for _ in range(200):
        second = _conn(s.port)
        _call(second, "GET", "/health")
        if s.worker_of(second) != s.worker_of(first):
            return first, second
        second.close()
    raise AssertionError("every connection landed on one worker")


def _user_token(conn: http.client.HTTPConnection, name: str) -> str:
    status, user = _call(conn, "POST", "/admin/users", {"name": name})
    assert status == 201, user
    status, issued = _call(conn, "POST", f"/admin/users/{user['id']}/tokens", {"name": "t"})
    assert status == 201, issued
    return str(issued["token"])


def test_a_write_through_one_worker_is_read_through_the_other(served: Served, request: Any) -> None:
    a, b = _two_workers(served)
    a_worker, b_worker = served.worker_of(a), served.worker_of(b)
    token = _user_token(a, "ryw")
    other = _user_token(a, "bystander")
    status, session = _call(a, "POST", "/sessions", {"name": "ryw"}, token)
    assert status == 201, session
    sid = session["id"]
    request.getfixturevalue("paused_replay")  # replay stops here: the replica is frozen
    for i in range(ROUNDS):
        writer, reader = (a, b) if i % 2 == 0 else (b, a)
        text = f"message {i} written while replay is paused"
        status, out = _call(
            writer,
            "POST",
            f"/sessions/{sid}/messages",
            {"messages": [{"role": "user", "content": text}]},
            token,
        )
        assert status == 201, out
        status, page = _call(reader, "GET", f"/sessions/{sid}/messages?limit=5", token=token)
        assert status == 200, page
        assert [m["content"] for m in page["messages"]][-1] == text, (i, page)
    assert served.worker_of(a) == a_worker and served.worker_of(b) == b_worker

    # a user who wrote nothing since the pause still reads on the (paused) replica: the
    # reads above went to the primary for this user's writes, not for everyone
    before = _replica_reads(a)
    status, _ = _call(b, "GET", "/sessions?limit=5", token=other)
    assert status == 200
    assert _replica_reads(a) == before + 1


def _replica_reads(conn: http.client.HTTPConnection) -> float:
    """navi_replica_reads_total summed over the workers (multiprocess /metrics)."""
    status, body = _call(conn, "GET", "/metrics")
    assert status == 200
    for line in body.decode().splitlines():
        if line.startswith("navi_replica_reads_total "):
            return float(line.split()[1])
    return 0.0


def _mcp(conn: http.client.HTTPConnection, token: str, name: str, arguments: dict[str, Any]) -> Any:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    status, out = _call(
        conn, "POST", "/mcp", body, token, {"Accept": "application/json, text/event-stream"}
    )
    assert status == 200, out
    assert out["result"]["isError"] is False, out
    return out["result"]


def test_mcp_memory_save_then_search_on_the_other_worker(served: Served, request: Any) -> None:
    a, b = _two_workers(served)
    token = _user_token(a, "mcpryw")
    request.getfixturevalue("paused_replay")
    for i in range(4):
        writer, reader = (a, b) if i % 2 == 0 else (b, a)
        value = f"favourite tea number {i} is oolong-{i}"
        _mcp(
            writer,
            token,
            "memory",
            {"action": "save", "category": "prefs", "key": f"tea{i}", "value": value},
        )
        found = _mcp(reader, token, "memory_search", {"query": f"oolong-{i}"})
        assert f"oolong-{i}" in json.dumps(found), (i, found)

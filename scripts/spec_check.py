"""Schemathesis over the service's own OpenAPI spec, as a stranger would probe it.

    .venv/bin/python scripts/spec_check.py                 # make spec-check
    .venv/bin/python scripts/spec_check.py --max-examples 50 --seed 7

What it does:

1. a fresh database on the test server (TEST_DATABASE_URL, else the embedded one under
   `.navi-test/`), migrated; the fake Ollama server on 127.0.0.1;
2. the service in its own process (uvicorn, as `make run` serves it) on a free port;
3. a user and a token through the admin API, and one session of theirs;
4. `st run` over every operation, once with the user's token and once with the admin's,
   checking: no server error, status codes, content types, headers and bodies as the
   spec documents them. Deleting users and tokens is left out of both runs (it would
   revoke the token the run uses) and run last, on its own, as the admin.

Exit code 0 only when every run passed. Reports go to `.cache/spec-check/`.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import psycopg
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.db import migrate  # noqa: E402
from app.db.engine import normalize_url, start_embedded  # noqa: E402
from tests.fakes.ollama_server import FakeOllama  # noqa: E402

ADMIN_TOKEN = "spec-check-admin-token-0123456789abcdef"
CHECKS = ",".join(
    (
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    )
)
# Not in the spec, so never probed: `/mcp`, the MCP server mounted as a raw ASGI app (a
# JSON-RPC endpoint OpenAPI cannot describe; Litestar leaves ASGI mounts out of the
# schema). tests/integration/agents/test_mcp.py drives it with the MCP SDK's client.
NOT_IN_SPEC = {"/mcp": "MCP JSON-RPC over streamable HTTP, not an OpenAPI operation"}

# Deleting users or tokens revokes what a run authenticates with: run last, apart.
DESTRUCTIVE = r"^/(admin/users/\{[^}]+\}(/tokens/\{[^}]+\})?|me/tokens/\{[^}]+\})$"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fresh_database() -> tuple[str, str]:
    """(URL of a new migrated database, its name) on the test server."""
    url = os.environ.get("TEST_DATABASE_URL")
    server = normalize_url(url) if url else start_embedded(ROOT / ".navi-test")
    name = f"navi_spec_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(_libpq(server, "postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    target = make_url(server).set(database=name).render_as_string(hide_password=False)
    migrate.upgrade(target)
    return target, name


def drop_database(server_url: str, name: str) -> None:
    with psycopg.connect(_libpq(server_url, "postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _libpq(url: str, database: str) -> str:
    return (
        make_url(url)
        .set(database=database)
        .render_as_string(hide_password=False)
        .replace("postgresql+psycopg://", "postgresql://", 1)
    )


def start_service(
    db_url: str, ollama_url: str, port: int, data_dir: str
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "NAVI_ADMIN_TOKEN": ADMIN_TOKEN,
        "OLLAMA_HOST": ollama_url,
        "EMBEDDING_PROVIDER": "ollama",
        "NAVI_DATA_DIR": data_dir,
        "LOG_LEVEL": "warning",
        "LOG_JSON": "false",
        "MEMORY_EXTRACTION_INTERVAL_SECONDS": "0",
    }
    cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port)]
    return subprocess.Popen(cmd, cwd=ROOT, env=env)


def wait_ready(base: str, proc: subprocess.Popen[bytes], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"spec-check: the service exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/schema/openapi.json", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit("spec-check: the service did not start")


def user_token(base: str) -> str:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    r = httpx.post(f"{base}/admin/users", json={"name": "spec-user"}, headers=admin, timeout=30)
    r.raise_for_status()
    uid = r.json()["id"]
    r = httpx.post(f"{base}/admin/users/{uid}/tokens", json={"name": "st"}, headers=admin)
    r.raise_for_status()
    token = str(r.json()["token"])
    r = httpx.post(
        f"{base}/sessions",
        json={"profile_id": "default"},
        headers={"Authorization": f"Bearer {token}"},
    )
    r.raise_for_status()
    return token


def st_run(base: str, token: str, label: str, args: argparse.Namespace, *extra: str) -> int:
    report = ROOT / ".cache" / "spec-check"
    report.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(Path(sys.executable).with_name("st")),
        "run",
        f"{base}/schema/openapi.json",
        "--header",
        f"Authorization: Bearer {token}",
        "--checks",
        CHECKS,
        "--max-examples",
        str(args.max_examples),
        "--seed",
        str(args.seed),
        "--workers",
        "1",
        "--request-timeout",
        "60",
        "--no-shrink",
        "--suppress-health-check",
        "all",
        "--report",
        "junit",
        "--report-junit-path",
        str(report / f"{label}.xml"),
        *extra,
    ]
    print(f"== schemathesis as {label}", flush=True)
    return subprocess.run(cmd, cwd=ROOT).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-examples", type=int, default=25, help="cases per operation")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    db_url, name = fresh_database()
    fake = FakeOllama().start()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    failed = 0
    with tempfile.TemporaryDirectory(prefix="navi-spec-") as data_dir:
        proc = start_service(db_url, fake.url, port, data_dir)
        try:
            wait_ready(base, proc)
            token = user_token(base)
            paths = httpx.get(f"{base}/schema/openapi.json", timeout=10).json()["paths"]
            for path, why in NOT_IN_SPEC.items():  # a mount there would go unjudged
                if path in paths:
                    print(f"{path} is in the spec but listed as not: {why}", flush=True)
                    failed += 1
            failed += st_run(base, token, "user", args, "--exclude-path-regex", DESTRUCTIVE) != 0
            failed += (
                st_run(base, ADMIN_TOKEN, "admin", args, "--exclude-path-regex", DESTRUCTIVE) != 0
            )
            failed += (
                st_run(
                    base, ADMIN_TOKEN, "admin-deletes", args, "--include-path-regex", DESTRUCTIVE
                )
                != 0
            )
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            fake.stop()
            drop_database(db_url, name)
    print(f"spec-check: {'FAILED' if failed else 'passed'} ({3 - failed}/3 runs passed)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

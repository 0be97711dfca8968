#!/usr/bin/env bash
# Provision a streaming replica of the CI PostgreSQL 15 (scripts/provision-postgres.sh)
# on 127.0.0.1:5433, for the read-replica tests (tests/integration/replica/) and the
# suite run with DATABASE_REPLICA_URL configured.
#
# Run as root, after (or instead of) provision-postgres.sh — it runs that script first,
# which is itself idempotent. Idempotent: a second run only performs cheap checks
# (replica up, in recovery, streaming, replay not paused — resumed when a test left it
# paused); a replica that is broken (promoted, not streaming, data directory of another
# server) or far behind (more than NAVI_REPLICA_MAX_CATCHUP_MB of WAL to replay, default
# 256, or not caught up within 60 s — a data directory left from an earlier machine
# state) is rebuilt: a fresh base backup of the test database is quicker than replaying
# gigabytes of WAL.
#
#   * the primary (127.0.0.1:5432) accepts replication connections from 127.0.0.1
#     (pg_hba `host replication postgres 127.0.0.1/32 trust`, reloaded)
#   * `pg_basebackup -R` with a physical replication slot (`navi_replica`) into a data
#     directory of its own (default /var/lib/postgresql/navi-replica, owned by postgres)
#   * hot_standby=on, port 5433, started detached with pg_ctl as postgres
#
# All progress output goes to stderr. The LAST line on stdout is:
#   TEST_DATABASE_REPLICA_URL=postgresql+psycopg://postgres@127.0.0.1:5433/navi_test
set -euo pipefail

PG_MAJOR=15
PG_BIN=/usr/lib/postgresql/${PG_MAJOR}/bin
PG_HOST=127.0.0.1
PRIMARY_PORT=5432
REPLICA_PORT=${NAVI_REPLICA_PORT:-5433}
PG_USER=postgres
DB_NAME=navi_test
REPLICA_DIR=${NAVI_REPLICA_DIR:-/var/lib/postgresql/navi-replica}
SLOT=navi_replica
READY_TIMEOUT=${NAVI_REPLICA_READY_TIMEOUT:-60}
MAX_CATCHUP_BYTES=$(( ${NAVI_REPLICA_MAX_CATCHUP_MB:-256} * 1024 * 1024 ))
HERE=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=scripts/_lib.sh
source "$HERE/_lib.sh"
provision_start provision-replica "runs provision-postgres.sh, edits pg_hba.conf, runs pg_ctl as postgres"

# 0. The primary (its own lock; it prints its URL on its stdout, which is our stderr).
log "step 0/5: the primary (scripts/provision-postgres.sh)"
bash "$HERE/provision-postgres.sh" >&2

if command -v flock >/dev/null 2>&1; then
    lockfile=/run/lock/navi-provision-replica.lock
    [[ -d /run/lock && -w /run/lock ]] || lockfile=/tmp/navi-provision-replica.lock
    exec 9>"$lockfile"
    flock 9
fi

as_postgres() { runuser -u postgres -- "$@"; }

psql_at() {
    # psql_at <port> <db> <sql>  -> unaligned, tuples-only output
    psql -X -w -v ON_ERROR_STOP=1 -h "$PG_HOST" -p "$1" -U "$PG_USER" -d "$2" -Atc "$3"
}
primary() { psql_at "$PRIMARY_PORT" postgres "$1"; }
replica() { psql_at "$REPLICA_PORT" postgres "$1"; }

# ---------------------------------------------------------------------------
# 1. The primary allows replication from 127.0.0.1
# ---------------------------------------------------------------------------
log "step 1/5: replication connections to the primary"
wal_level=$(primary 'show wal_level')
senders=$(primary 'show max_wal_senders')
[[ "$wal_level" == replica || "$wal_level" == logical ]] \
    || die "primary wal_level is ${wal_level}; needs replica (a restart of the primary)"
((senders > 0)) || die "primary max_wal_senders is 0; needs > 0 (a restart of the primary)"
hba=$(primary 'show hba_file')
rep_line="host replication ${PG_USER} ${PG_HOST}/32 trust"
if grep -qxF "$rep_line" "$hba"; then
    log "pg_hba already has '${rep_line}'"
else
    log "prepending '${rep_line}' to ${hba}"
    tmp=$(mktemp)
    { printf '%s\n' "$rep_line"; cat "$hba"; } >"$tmp"
    cat "$tmp" >"$hba"   # keeps owner/mode of the original file
    rm -f "$tmp"
    primary 'select pg_reload_conf()' >/dev/null
    sleep 0.5
fi

# ---------------------------------------------------------------------------
# 2. Is there a healthy replica already?
# ---------------------------------------------------------------------------
log "step 2/5: checking the replica on ${PG_HOST}:${REPLICA_PORT}"
port_holder() {
    ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | head -n1 | cut -d= -f2 || true
}
ours_running() {
    [[ "$(replica 'show data_directory' 2>/dev/null || true)" == "$REPLICA_DIR" ]]
}
streaming() {
    [[ "$(replica "select count(*) from pg_stat_wal_receiver where status = 'streaming'" 2>/dev/null || true)" == 1 ]]
}
in_recovery() { [[ "$(replica 'select pg_is_in_recovery()' 2>/dev/null || true)" == t ]]; }
pg_ctl_replica() {
    detached as_postgres "$PG_BIN/pg_ctl" -D "$REPLICA_DIR" -l "$REPLICA_DIR/server.log" "$@"
}
wait_streaming() {
    local deadline=$((SECONDS + READY_TIMEOUT))
    until in_recovery && streaming; do
        if ((SECONDS >= deadline)); then return 1; fi
        sleep 0.5
    done
}

healthy=0
if ours_running; then
    log "replica running from ${REPLICA_DIR}"
elif [[ -f "$REPLICA_DIR/standby.signal" && -f "$REPLICA_DIR/PG_VERSION" ]]; then
    holder=$(port_holder "$REPLICA_PORT")
    [[ -z "$holder" ]] || die "port ${REPLICA_PORT} is taken by pid ${holder}; set NAVI_REPLICA_PORT"
    log "replica data directory exists but the server is down; starting it"
    rm -f "$REPLICA_DIR/postmaster.pid"  # a stale pid file of a killed server
    pg_ctl_replica -w -t "$READY_TIMEOUT" start || log "start failed (log above); rebuilding"
fi
if ours_running; then
    if ! in_recovery; then
        log "replica is not in recovery (promoted?); rebuilding"
    else
        if [[ "$(replica 'select pg_is_wal_replay_paused()')" == t ]]; then
            log "replay was paused (a test left it so); resuming"
            replica 'select pg_wal_replay_resume()' >/dev/null
        fi
        if ! wait_streaming; then
            log "replica in recovery but not streaming after ${READY_TIMEOUT}s; rebuilding"
        else
            replayed=$(replica "select coalesce(pg_last_wal_replay_lsn(), '0/0')")
            behind=$(primary "select pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '${replayed}')::bigint")
            if ((behind > MAX_CATCHUP_BYTES)); then
                log "replica is $((behind / 1024 / 1024)) MB of WAL behind the primary; rebuilding"
            else
                healthy=1
            fi
        fi
    fi
fi

# ---------------------------------------------------------------------------
# 3. Build it (pg_basebackup -R) when there is no healthy one
# ---------------------------------------------------------------------------
build_replica() {
    log "building the replica in ${REPLICA_DIR}"
    if [[ -f "$REPLICA_DIR/PG_VERSION" ]]; then
        pg_ctl_replica -m immediate stop >/dev/null 2>&1 || true
    fi
    holder=$(port_holder "$REPLICA_PORT")
    [[ -z "$holder" ]] || die "port ${REPLICA_PORT} is taken by pid ${holder}; set NAVI_REPLICA_PORT"
    rm -rf "$REPLICA_DIR"
    install -d -o postgres -g postgres -m 0700 "$REPLICA_DIR"
    if [[ "$(primary "select count(*) from pg_replication_slots where slot_name = '${SLOT}'")" == 1 ]]; then
        log "dropping the old replication slot ${SLOT}"
        primary "select pg_drop_replication_slot('${SLOT}')" >/dev/null
    fi
    log "pg_basebackup from ${PG_HOST}:${PRIMARY_PORT} (slot ${SLOT})"
    as_postgres "$PG_BIN/pg_basebackup" -h "$PG_HOST" -p "$PRIMARY_PORT" -U "$PG_USER" -w \
        -D "$REPLICA_DIR" -R -X stream -C -S "$SLOT" -c fast
    # Debian keeps the primary's postgresql.conf and pg_hba.conf under /etc: the copy has
    # none. A hot standby needs these limits at least as high as the primary's.
    limits=""
    for name in max_connections max_worker_processes max_wal_senders \
        max_prepared_transactions max_locks_per_transaction; do
        limits+="${name} = $(primary "show ${name}")"$'\n'
    done
    as_postgres tee "$REPLICA_DIR/postgresql.conf" >/dev/null <<EOF
# written by scripts/provision-replica.sh: a hot standby of ${PG_HOST}:${PRIMARY_PORT}
listen_addresses = '${PG_HOST}'
port = ${REPLICA_PORT}
unix_socket_directories = '/var/run/postgresql'
hot_standby = on
hot_standby_feedback = on
shared_buffers = 128MB
log_min_messages = warning
${limits}
include_if_exists = 'postgresql.auto.conf'
EOF
    as_postgres tee "$REPLICA_DIR/pg_hba.conf" >/dev/null <<EOF
local all all trust
host all all ${PG_HOST}/32 trust
EOF
    log "starting the replica on ${PG_HOST}:${REPLICA_PORT} (log: ${REPLICA_DIR}/server.log)"
    if ! pg_ctl_replica -w -t "$READY_TIMEOUT" start; then
        tail -n 30 "$REPLICA_DIR/server.log" >&2 || true
        die "the replica did not start"
    fi
    if ! wait_streaming; then
        tail -n 30 "$REPLICA_DIR/server.log" >&2 || true
        die "the replica is not streaming from the primary after ${READY_TIMEOUT}s"
    fi
}

if ((healthy)); then
    log "step 3/5: replica healthy (in recovery, streaming, close behind); nothing to build"
else
    log "step 3/5: no healthy replica"
    build_replica
fi

# ---------------------------------------------------------------------------
# 4. Replication really flows: a write on the primary is seen on the replica
# ---------------------------------------------------------------------------
log "step 4/5: checking that replay keeps up"
wal_probe() {
    # a WAL record of its own on the primary, its position printed: the insert position
    # alone may sit past a segment's header that a quiet primary never replays beyond
    primary "select pg_logical_emit_message(false, 'navi-provision', 'probe')"
}
replays() {
    # replays <lsn>: true once the replica has replayed up to <lsn>, false after the timeout
    local deadline=$((SECONDS + READY_TIMEOUT))
    until [[ "$(replica "select pg_last_wal_replay_lsn() >= '$1'::pg_lsn" 2>/dev/null || true)" == t ]]; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}
target=$(wal_probe)
if ! replays "$target"; then
    ((healthy)) || die "a fresh replica has not replayed ${target} after ${READY_TIMEOUT}s"
    log "replica has not replayed ${target} after ${READY_TIMEOUT}s; rebuilding"
    build_replica
    target=$(wal_probe)
    replays "$target" || die "a fresh replica has not replayed ${target} after ${READY_TIMEOUT}s"
fi
[[ "$(replica "select count(*) from pg_database where datname = '${DB_NAME}'")" == 1 ]] \
    || die "database ${DB_NAME} missing on the replica"
log "replica replayed ${target}; lag $(replica "select coalesce(round(extract(epoch from now() - pg_last_xact_replay_timestamp())::numeric, 3)::text, 'n/a')") s since the last replayed commit"

# ---------------------------------------------------------------------------
# 5. Result
# ---------------------------------------------------------------------------
log "step 5/5: done"
printf 'TEST_DATABASE_REPLICA_URL=postgresql+psycopg://%s@%s:%s/%s\n' \
    "$PG_USER" "$PG_HOST" "$REPLICA_PORT" "$DB_NAME" >&3

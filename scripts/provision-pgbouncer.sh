#!/usr/bin/env bash
# Provision a PgBouncer in transaction mode in front of the CI PostgreSQL 15
# (scripts/provision-postgres.sh) on 127.0.0.1:6434, for the pooler tests
# (tests/integration/pooler/) and the suites .ci/run runs through it with DB_POOLER=transaction.
#
# Run as root. Idempotent: a running PgBouncer with this configuration is left as it is.
#
#   * the Debian package `pgbouncer` (1.18 on bookworm: no prepared-statement support,
#     which is what DB_POOLER=transaction assumes)
#   * pool_mode=transaction, every database of 127.0.0.1:5432 (`*`), a small server pool
#     per database (default_pool_size=3) so client connections really share server ones
#   * auth_type=trust for the user postgres (the CI server trusts 127.0.0.1 the same way)
#   * its own config, pid and log under /etc/navi-pgbouncer and /var/run/navi-pgbouncer,
#     started detached as the postgres user (the distribution's own service is not used)
#
# All progress output goes to stderr. The LAST line on stdout is:
#   TEST_DATABASE_POOLER_URL=postgresql+psycopg://postgres@127.0.0.1:6434/navi_test
set -euo pipefail

PG_HOST=127.0.0.1
PG_PORT=5432
PORT=${NAVI_PGBOUNCER_PORT:-6434}
PG_USER=postgres
DB_NAME=navi_test
CONF_DIR=/etc/navi-pgbouncer
RUN_DIR=/var/run/navi-pgbouncer
HERE=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=scripts/_lib.sh
source "$HERE/_lib.sh"
provision_start provision-pgbouncer "needs apt-get, runs pgbouncer as postgres"

log "step 0/3: the server behind it (scripts/provision-postgres.sh)"
bash "$HERE/provision-postgres.sh" >&2

log "step 1/3: the package"
if [[ "$(dpkg-query -W -f='${Status}' pgbouncer 2>/dev/null || true)" != "install ok installed" ]]; then
    apt-get update -q
    detached apt-get install -y -q pgbouncer  # the package may start its own service
fi
BIN=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
[[ -x "$BIN" ]] || die "pgbouncer not found after installation"
log "$("$BIN" --version | head -n 1)"

log "step 2/3: configuration and process"
mkdir -p "$CONF_DIR" "$RUN_DIR"
chown postgres:postgres "$RUN_DIR"
conf="$CONF_DIR/pgbouncer.ini"
want=$(cat <<EOF
[databases]
* = host=${PG_HOST} port=${PG_PORT}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${PORT}
unix_socket_dir =
auth_type = trust
auth_file = ${CONF_DIR}/userlist.txt
pool_mode = transaction
default_pool_size = 3
max_client_conn = 1000
server_reset_query =
ignore_startup_parameters = extra_float_digits
pidfile = ${RUN_DIR}/pgbouncer.pid
logfile = ${RUN_DIR}/pgbouncer.log
admin_users = ${PG_USER}
EOF
)
printf '"%s" ""\n' "$PG_USER" > "$CONF_DIR/userlist.txt"
changed=0
if [[ ! -f "$conf" ]] || [[ "$(cat "$conf")" != "$want" ]]; then
    printf '%s\n' "$want" > "$conf"
    changed=1
fi
chown -R postgres:postgres "$CONF_DIR"
pid=$(cat "$RUN_DIR/pgbouncer.pid" 2>/dev/null || true)
if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    if ((changed)); then
        log "configuration changed: restarting"
        kill "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        pid=
    else
        log "already running (pid $pid)"
    fi
else
    pid=
fi
if [[ -z "$pid" ]]; then
    rm -f "$RUN_DIR/pgbouncer.pid"
    detached su -s /bin/sh postgres -c "$BIN -d $conf" >&2
fi

log "step 3/3: waiting for ${PG_HOST}:${PORT}"
for _ in $(seq 50); do
    if psql -X -w -q -h "$PG_HOST" -p "$PORT" -U "$PG_USER" -d "$DB_NAME" -Atc 'select 1' >/dev/null 2>&1; then
        log "PgBouncer answers on ${PG_HOST}:${PORT} (transaction mode)"
        printf 'TEST_DATABASE_POOLER_URL=postgresql+psycopg://%s@%s:%s/%s\n' \
            "$PG_USER" "$PG_HOST" "$PORT" "$DB_NAME" >&3
        exit 0
    fi
    sleep 0.2
done
die "PgBouncer did not answer on ${PG_HOST}:${PORT}; see $RUN_DIR/pgbouncer.log"

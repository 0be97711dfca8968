#!/usr/bin/env bash
# Add a worker to the local Citus cluster while it serves, and move shards onto it online.
#
#   scripts/citus-add-worker.sh PORT [NAME]        # as root
#
#   * a PostgreSQL 15 + Citus node on 127.0.0.1:PORT: data directory $BASE_DIR/NAME
#     (NAME: worker-PORT), initdb'd and configured as scripts/provision-citus.sh does its
#     nodes (scripts/_citus.sh: the same navi-citus.conf), started detached as postgres;
#   * in every database of the coordinator that has `citus` (node membership is per
#     database): the database and `citus` created on the new node, `citus_add_node`
#     (Citus copies the extensions, the reference tables' definitions and the metadata);
#   * then, database by database, `citus_rebalance_start(shard_transfer_mode => MODE)`:
#     a background job on the coordinator that moves shard groups onto the new node by
#     logical replication (the shards stay readable and writable; each move blocks writes
#     to its shards for the final catch-up only), followed until done with
#     `citus_rebalance_wait()`.
#
# Environment: NAVI_CITUS_PORT (the coordinator, 5460), NAVI_CITUS_DATA_DIR
# (/var/lib/postgresql/navi-citus), NAVI_SHARD_TRANSFER_MODE (auto: logical replication,
# refused for a table without a replica identity; force_logical; block_writes),
# NAVI_CITUS_REBALANCE=0 to add the node without moving anything.
#
# Progress goes to stderr. The LAST line on stdout is
#   ADDED=127.0.0.1:PORT moves=N seconds=S
set -euo pipefail

PG_HOST=127.0.0.1
PG_USER=postgres
BASE_DIR=${NAVI_CITUS_DATA_DIR:-/var/lib/postgresql/navi-citus}
COORDINATOR_PORT=${NAVI_CITUS_PORT:-5460}
MODE=${NAVI_SHARD_TRANSFER_MODE:-auto}
READY_TIMEOUT=30

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/_lib.sh
source "$here/_lib.sh"
# shellcheck source=scripts/_citus.sh
source "$here/_citus.sh"
provision_start citus-add-worker "needs initdb and pg_ctl as postgres"

[[ $# -ge 1 && "$1" =~ ^[0-9]+$ ]] || die "usage: $0 PORT [NAME]"
PORT=$1
NAME=${2:-worker-$PORT}
dir=$BASE_DIR/$NAME
started=$SECONDS

citus_psql "$COORDINATOR_PORT" postgres 'select 1' >/dev/null \
    || die "no coordinator on ${PG_HOST}:${COORDINATOR_PORT} (NAVI_CITUS_PORT)"
mapfile -t databases < <(citus_databases "$COORDINATOR_PORT")
((${#databases[@]})) || die "no database with citus on the coordinator ${COORDINATOR_PORT}"

# 1. The node: initdb'd, configured and started like the provisioned ones
mkdir -p "$BASE_DIR/run"
chown postgres:postgres "$BASE_DIR" "$BASE_DIR/run"
if [[ ! -f "$dir/PG_VERSION" ]]; then
    log "initdb ${dir}"
    rm -rf "$dir"
    runuser -u postgres -- "$CITUS_PG_BIN/initdb" -D "$dir" -U "$PG_USER" -A trust -E UTF8 \
        --locale=C.UTF-8 >/dev/null
fi
citus_node_conf "$NAME" "$PORT" "$BASE_DIR/run" >"$dir/navi-citus.conf"
chown postgres:postgres "$dir/navi-citus.conf"
grep -qxF "include = 'navi-citus.conf'" "$dir/postgresql.conf" \
    || echo "include = 'navi-citus.conf'" >>"$dir/postgresql.conf"
if ! runuser -u postgres -- "$CITUS_PG_BIN/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
    log "starting ${NAME} on ${PORT} (log: ${dir}/server.log)"
    detached runuser -u postgres -- "$CITUS_PG_BIN/pg_ctl" -D "$dir" -l "$dir/server.log" -w \
        -t "$READY_TIMEOUT" start </dev/null >/dev/null 2>&1 \
        || { tail -n 20 "$dir/server.log" >&2; die "${NAME} did not start"; }
fi
deadline=$((SECONDS + READY_TIMEOUT))
until citus_psql "$PORT" postgres 'select 1' >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "${NAME} not accepting connections on ${PORT}"
    sleep 0.5
done

# 2. A member of every citus database
for db in "${databases[@]}"; do
    if [[ "$(citus_psql "$PORT" postgres "select count(*) from pg_database where datname = '${db}'")" != 1 ]]; then
        citus_psql "$PORT" postgres "CREATE DATABASE \"${db}\"" >/dev/null
    fi
    [[ "$(citus_psql "$PORT" "$db" "select count(*) from pg_extension where extname = 'citus'")" == 1 ]] \
        || citus_psql "$PORT" "$db" "SET client_min_messages = warning; CREATE EXTENSION citus" >/dev/null
    if [[ "$(citus_psql "$COORDINATOR_PORT" "$db" "select count(*) from pg_dist_node where nodename = '${PG_HOST}' and nodeport = ${PORT} and isactive")" != 1 ]]; then
        log "${db}: citus_add_node(${PG_HOST}, ${PORT})"
        citus_psql "$COORDINATOR_PORT" "$db" "SELECT citus_add_node('${PG_HOST}', ${PORT})" >/dev/null
    fi
done
joined=$((SECONDS - started))
log "${NAME} joined ${#databases[@]} database(s) in ${joined} s"

# 3. Shards moved onto it, online
moves=0
if [[ "${NAVI_CITUS_REBALANCE:-1}" != 0 ]]; then
    for db in "${databases[@]}"; do
        t0=$SECONDS
        job=$(citus_psql "$COORDINATOR_PORT" "$db" \
            "SELECT citus_rebalance_start(shard_transfer_mode => '${MODE}')" 2>&1 | tail -n 1) \
            || die "${db}: citus_rebalance_start failed: ${job}"
        if [[ ! "$job" =~ ^[0-9]+$ ]]; then
            log "${db}: nothing to move (${job:-no job})"
            continue
        fi
        log "${db}: rebalance job ${job} started (${MODE}); waiting (citus_rebalance_status() follows it)"
        citus_psql "$COORDINATOR_PORT" "$db" "SELECT citus_rebalance_wait()" >/dev/null \
            || die "${db}: rebalance job ${job} failed: $(citus_psql "$COORDINATOR_PORT" "$db" \
                "select string_agg(message, ' | ') from pg_dist_background_task where job_id = ${job} and message <> ''")"
        n=$(citus_psql "$COORDINATOR_PORT" "$db" \
            "select count(*) from pg_dist_background_task where job_id = ${job} and command like '%citus_move_shard_placement%'")
        moves=$((moves + n))
        log "${db}: ${n} shard group move(s) in $((SECONDS - t0)) s; shards per node now: $(citus_psql "$COORDINATOR_PORT" "$db" \
            "select string_agg(nodeport || ':' || n, ' ' order by nodeport) from (select nodeport, count(*) n from citus_shards group by nodeport) s")"
    done
fi
log "done in $((SECONDS - started)) s"
printf 'ADDED=%s:%s moves=%s seconds=%s\n' "$PG_HOST" "$PORT" "$moves" "$((SECONDS - started))" >&3

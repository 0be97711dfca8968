#!/usr/bin/env bash
# Drain a worker of the local Citus cluster while it serves, then remove it.
#
#   scripts/citus-drain-worker.sh HOST PORT [DATA_DIR]      # as root
#
# In every database of the coordinator that has `citus` (node membership is per
# database):
#   * `citus_set_node_property(HOST, PORT, 'shouldhaveshards', false)`: no new shard
#     goes there;
#   * `citus_rebalance_start(drain_only => true, shard_transfer_mode => MODE)`: a
#     background job that moves every shard group off the node by logical replication
#     (online: each move blocks writes to its shards for the final catch-up only),
#     followed until done with `citus_rebalance_wait()`;
#   * the moved shards' old copies dropped (`citus_cleanup_orphaned_resources()`), then
#     `citus_remove_node(HOST, PORT)` (its reference-table copies go with it).
# With DATA_DIR, the node's server is stopped afterwards (its data directory is kept).
#
# Environment: NAVI_CITUS_PORT (the coordinator, 5460), NAVI_SHARD_TRANSFER_MODE (auto).
#
# Progress goes to stderr. The LAST line on stdout is
#   REMOVED=HOST:PORT moves=N seconds=S
set -euo pipefail

PG_HOST=127.0.0.1
PG_USER=postgres
COORDINATOR_PORT=${NAVI_CITUS_PORT:-5460}
MODE=${NAVI_SHARD_TRANSFER_MODE:-auto}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/_lib.sh
source "$here/_lib.sh"
# shellcheck source=scripts/_citus.sh
source "$here/_citus.sh"
provision_start citus-drain-worker "needs pg_ctl as postgres to stop the node"

[[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || die "usage: $0 HOST PORT [DATA_DIR]"
HOST=$1 PORT=$2 DATA_DIR=${3:-}
started=$SECONDS

citus_psql "$COORDINATOR_PORT" postgres 'select 1' >/dev/null \
    || die "no coordinator on ${PG_HOST}:${COORDINATOR_PORT} (NAVI_CITUS_PORT)"
mapfile -t databases < <(citus_databases "$COORDINATOR_PORT")

moves=0
for db in "${databases[@]}"; do
    coord() { citus_psql "$COORDINATOR_PORT" "$db" "$1"; }
    if [[ "$(coord "select count(*) from pg_dist_node where nodename = '${HOST}' and nodeport = ${PORT}")" != 1 ]]; then
        log "${db}: ${HOST}:${PORT} is not a node; nothing to do"
        continue
    fi
    [[ "$(coord "select count(*) from pg_dist_node where groupid <> 0 and isactive and shouldhaveshards and not (nodename = '${HOST}' and nodeport = ${PORT})")" -ge 1 ]] \
        || die "${db}: no other worker would hold the shards of ${HOST}:${PORT}"
    t0=$SECONDS
    coord "SELECT citus_set_node_property('${HOST}', ${PORT}, 'shouldhaveshards', false)" >/dev/null
    job=$(coord "SELECT citus_rebalance_start(drain_only => true, shard_transfer_mode => '${MODE}')" 2>&1 \
        | tail -n 1) || die "${db}: citus_rebalance_start failed: ${job}"
    if [[ "$job" =~ ^[0-9]+$ ]]; then
        log "${db}: drain job ${job} started (${MODE}); waiting (citus_rebalance_status() follows it)"
        coord "SELECT citus_rebalance_wait()" >/dev/null \
            || die "${db}: drain job ${job} failed: $(coord \
                "select string_agg(message, ' | ') from pg_dist_background_task where job_id = ${job} and message <> ''")"
        n=$(coord "select count(*) from pg_dist_background_task where job_id = ${job} and command like '%citus_move_shard_placement%'")
        moves=$((moves + n))
        log "${db}: ${n} shard group move(s) off ${HOST}:${PORT} in $((SECONDS - t0)) s"
    else
        log "${db}: nothing to move (${job:-no job})"
    fi
    left=$(coord "select count(*) from citus_shards s join pg_dist_partition p on p.logicalrelid = s.table_name where s.nodename = '${HOST}' and s.nodeport = ${PORT} and p.partmethod <> 'n'")
    [[ "$left" == 0 ]] || die "${db}: ${left} distributed shard(s) still on ${HOST}:${PORT}"
    coord "CALL citus_cleanup_orphaned_resources()" >/dev/null
    log "${db}: citus_remove_node(${HOST}, ${PORT})"
    coord "SELECT citus_remove_node('${HOST}', ${PORT})" >/dev/null
done
if [[ -n "$DATA_DIR" ]]; then
    log "stopping the server of ${DATA_DIR}"
    detached runuser -u postgres -- "$CITUS_PG_BIN/pg_ctl" -D "$DATA_DIR" -m fast -w stop >/dev/null
fi
log "done in $((SECONDS - started)) s"
printf 'REMOVED=%s:%s moves=%s seconds=%s\n' "$HOST" "$PORT" "$moves" "$((SECONDS - started))" >&3

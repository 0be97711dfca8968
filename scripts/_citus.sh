# Sourced by scripts/provision-citus.sh, scripts/citus-add-worker.sh and
# scripts/citus-drain-worker.sh (never run): what every node of the local Citus cluster
# shares. Expects PG_HOST, PG_USER and `log`/`die` (scripts/_lib.sh).

CITUS_PG_BIN=/usr/lib/postgresql/15/bin

# citus_node_conf NODE PORT RUN_DIR: the settings of one node (navi-citus.conf beside its
# postgresql.conf), the same for the coordinator and every worker.
citus_node_conf() {
    cat <<CONF
# written by scripts/_citus.sh for provision-citus.sh / citus-add-worker.sh ($1)
listen_addresses = '${PG_HOST}'
port = $2
unix_socket_directories = '$3'
shared_preload_libraries = 'citus'
max_connections = 300
max_prepared_transactions = 300
fsync = off
synchronous_commit = off
full_page_writes = off
logging_collector = off
log_min_messages = warning
# Test databases stay cheap to truncate and to alter: 4 shards per distributed table.
citus.shard_count = 4
# Online shard moves (citus_rebalance_start, citus_drain_node: scripts/citus-add-worker.sh,
# scripts/citus-drain-worker.sh) copy a shard by logical replication, on every node.
wal_level = logical
CONF
}

# citus_psql PORT DB SQL: unaligned, tuples-only output, stops on the first error.
citus_psql() {
    psql -X -w -v ON_ERROR_STOP=1 -h "$PG_HOST" -p "$1" -U "$PG_USER" -d "$2" -Atc "$3"
}

# citus_databases PORT: the databases of the coordinator on PORT that have `citus` (node
# membership is per database: a node joins, and leaves, each of them).
citus_databases() {
    local db
    for db in $(citus_psql "$1" postgres \
        "select datname from pg_database where datallowconn and not datistemplate order by 1"); do
        [[ "$(citus_psql "$1" "$db" "select count(*) from pg_extension where extname = 'citus'" \
            2>/dev/null || true)" == 1 ]] && echo "$db"
    done
    return 0
}

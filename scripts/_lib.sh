# Sourced by scripts/provision-*.sh (never run): the common start of a provisioning
# script. `provision_start NAME WHY_ROOT`: the real stdout moves to fd 3 (the script's
# last line, the URL, is printed there; everything else goes to stderr), stray libpq
# settings of the environment cannot redirect psql, `log`/`die` prefix NAME, and the
# script stops unless run as root.

provision_start() {
    NAVI_SCRIPT=$1
    exec 3>&1 1>&2
    export DEBIAN_FRONTEND=noninteractive
    export PGCONNECT_TIMEOUT=5
    unset PGSERVICE PGSERVICEFILE PGHOSTADDR PGOPTIONS PGSSLMODE PGPASSFILE PGPASSWORD \
        PGDATABASE || true
    [[ ${EUID} -eq 0 ]] || die "must run as root ($2)"
}

log() { printf '[%s] %s\n' "$NAVI_SCRIPT" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$NAVI_SCRIPT" "$*" >&2; exit 1; }

# Run a command that may leave a daemon behind (a PostgreSQL server, PgBouncer) without
# leaking any fd above 2 into it: fd 3 (the real stdout: a reader of
# `$(provision-….sh | tail -n1)` would never see EOF, and .ci/run would wait forever),
# a flock's fd (the daemon would hold the lock forever), and whatever the caller handed
# us (a CI runner's pipes).
detached() {
    (
        for fd in /proc/self/fd/*; do
            fd=${fd##*/}
            ((fd > 2)) && eval "exec ${fd}>&-"
        done 2>/dev/null
        "$@"  # not exec: a shell function is run too (the subshell ends with it)
    )
}

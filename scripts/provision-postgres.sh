#!/usr/bin/env bash
# Provision a local PostgreSQL 15 with pgvector and pg_trgm for the test suite.
#
# Intended for CI (.ci/run) on Debian 12 (bookworm), run as root, possibly on a
# brand-new machine. Idempotent: a second run only performs cheap checks.
#
#   * installs postgresql-15 (+ contrib, server-dev-15, build-essential) if missing
#   * creates/starts cluster 15/main, ensures trust auth for postgres on 127.0.0.1
#   * builds pgvector from Debian trixie's source package if `vector` is not
#     available (private apt config: nothing under /etc/apt is touched)
#   * creates database navi_test with extensions vector and pg_trgm
#
# All progress output goes to stderr. The LAST line on stdout is:
#   TEST_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/navi_test
set -euo pipefail

PG_MAJOR=15
PG_CLUSTER=main
PG_HOST=127.0.0.1
PG_PORT=5432
PG_USER=postgres
DB_NAME=navi_test
PG_CONFIG=/usr/lib/postgresql/${PG_MAJOR}/bin/pg_config
BUILD_DIR=${NAVI_PGVECTOR_BUILD_DIR:-/tmp/navi-pgvector-build}
SOURCE_SUITE=trixie
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
READY_TIMEOUT=30

# shellcheck source=scripts/_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/_lib.sh"
provision_start provision-postgres "needs apt-get, pg_ctlcluster"

# Serialise concurrent runs on the same machine.
if command -v flock >/dev/null 2>&1; then
    lockfile=/run/lock/navi-provision-postgres.lock
    [[ -d /run/lock && -w /run/lock ]] || lockfile=/tmp/navi-provision-postgres.lock
    exec 9>"$lockfile"
    flock 9
fi

pkg_installed() {
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}


psql_q() {
    # psql_q <db> <sql>  -> unaligned, tuples-only output
    psql -X -w -v ON_ERROR_STOP=1 -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d "$1" -Atc "$2"
}

# ---------------------------------------------------------------------------
# 1. Packages
# ---------------------------------------------------------------------------
log "step 1/5: checking packages"
missing=()
if ! pkg_installed "postgresql-${PG_MAJOR}"; then
    missing=("postgresql-${PG_MAJOR}" postgresql-contrib "postgresql-server-dev-${PG_MAJOR}" build-essential)
else
    for p in "postgresql-server-dev-${PG_MAJOR}" build-essential; do
        pkg_installed "$p" || missing+=("$p")
    done
    # build-essential is a metapackage; make sure the tools really exist.
    if ! command -v gcc >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
        pkg_installed build-essential && missing+=(gcc make)
    fi
fi
if ((${#missing[@]})); then
    log "installing: ${missing[*]}"
    apt-get update
    detached apt-get install -y "${missing[@]}"
else
    log "postgresql-${PG_MAJOR}, postgresql-server-dev-${PG_MAJOR}, build-essential already installed"
fi
[[ -x "$PG_CONFIG" ]] || die "$PG_CONFIG not found after installation"

# ---------------------------------------------------------------------------
# 2. Cluster running, reachable over TCP with trust auth
# ---------------------------------------------------------------------------
log "step 2/5: checking cluster ${PG_MAJOR}/${PG_CLUSTER}"
cluster_line() {
    pg_lsclusters -h 2>/dev/null | awk -v v="$PG_MAJOR" -v c="$PG_CLUSTER" '$1 == v && $2 == c' || true
}
line=$(cluster_line)
if [[ -z "$line" ]]; then
    log "no cluster ${PG_MAJOR}/${PG_CLUSTER}; creating it"
    detached pg_createcluster "$PG_MAJOR" "$PG_CLUSTER" --port="$PG_PORT"
    line=$(cluster_line)
    [[ -n "$line" ]] || die "pg_createcluster did not create ${PG_MAJOR}/${PG_CLUSTER}"
fi
port=$(awk '{print $3}' <<<"$line")
status=$(awk '{print $4}' <<<"$line")
if [[ "$port" != "$PG_PORT" ]]; then
    die "cluster ${PG_MAJOR}/${PG_CLUSTER} is configured for port ${port}, expected ${PG_PORT}"
fi
if [[ "$status" == online* ]]; then
    log "cluster ${PG_MAJOR}/${PG_CLUSTER} already running (${status})"
else
    log "starting cluster ${PG_MAJOR}/${PG_CLUSTER} (status: ${status})"
    detached pg_ctlcluster --skip-systemctl-redirect "$PG_MAJOR" "$PG_CLUSTER" start
fi

wait_ready() {
    local deadline=$((SECONDS + READY_TIMEOUT))
    until pg_isready -q -h "$PG_HOST" -p "$PG_PORT"; do
        if ((SECONDS >= deadline)); then
            tail -n 20 "/var/log/postgresql/postgresql-${PG_MAJOR}-${PG_CLUSTER}.log" >&2 2>/dev/null || true
            die "server not accepting connections on ${PG_HOST}:${PG_PORT} after ${READY_TIMEOUT}s"
        fi
        sleep 0.5
    done
}
log "waiting for ${PG_HOST}:${PG_PORT} to accept connections"
wait_ready

if psql_q postgres 'select 1' >/dev/null 2>&1; then
    log "passwordless TCP login as ${PG_USER}@${PG_HOST} works"
else
    hba=$(runuser -u postgres -- psql -X -p "$PG_PORT" -Atc 'show hba_file' 2>/dev/null || true)
    [[ -n "$hba" ]] || hba=/etc/postgresql/${PG_MAJOR}/${PG_CLUSTER}/pg_hba.conf
    [[ -f "$hba" ]] || die "cannot log in as ${PG_USER} over TCP and pg_hba.conf not found ($hba)"
    trust_line="host all all ${PG_HOST}/32 trust"
    if [[ "$(head -n1 "$hba")" != "$trust_line" ]]; then
        log "prepending '${trust_line}' to ${hba}"
        tmp=$(mktemp)
        { printf '%s\n' "$trust_line"; cat "$hba"; } >"$tmp"
        cat "$tmp" >"$hba"   # keeps owner/mode of the original file
        rm -f "$tmp"
    fi
    log "reloading cluster configuration"
    detached pg_ctlcluster --skip-systemctl-redirect "$PG_MAJOR" "$PG_CLUSTER" reload
    wait_ready
    ok=0
    for _ in $(seq 1 20); do
        if psql_q postgres 'select 1' >/dev/null 2>&1; then ok=1; break; fi
        sleep 0.5
    done
    if ((ok == 0)); then
        psql_q postgres 'select 1' || true
        die "still cannot log in as ${PG_USER} over TCP on ${PG_HOST}:${PG_PORT}"
    fi
    log "passwordless TCP login as ${PG_USER}@${PG_HOST} works now"
fi

# ---------------------------------------------------------------------------
# 3. pgvector
# ---------------------------------------------------------------------------
log "step 3/5: checking pgvector"
ext_available() {
    [[ "$(psql_q postgres "select count(*) from pg_available_extensions where name = '$1'")" == 1 ]]
}

debian_mirror() {
    local uri=""
    if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
        # URIs: of the first stanza (stanzas are separated by blank lines).
        uri=$(awk 'BEGIN{IGNORECASE=1}
                   /^[[:space:]]*$/ { if (seen) exit; next }
                   /^URIs:/ { seen=1; print $2; exit }' /etc/apt/sources.list.d/debian.sources)
    fi
    if [[ -z "$uri" && -f /etc/apt/sources.list ]]; then
        uri=$(awk '$1 == "deb" {
                      for (i = 2; i <= NF; i++) if ($i ~ /^https?:\/\//) { print $i; exit }
                   }' /etc/apt/sources.list)
    fi
    printf '%s\n' "${uri:-http://deb.debian.org/debian}"
}

build_pgvector() {
    local mirror srclist aptopts tarball srcdir
    mirror=$(debian_mirror)
    [[ -f "$KEYRING" ]] || die "$KEYRING missing (install debian-archive-keyring)"
    log "building pgvector from Debian ${SOURCE_SUITE} source package (mirror: ${mirror}, work dir: ${BUILD_DIR})"

    rm -rf "$BUILD_DIR"
    mkdir -p "$BUILD_DIR/lists/partial" "$BUILD_DIR/cache/archives/partial" "$BUILD_DIR/src"
    if id _apt >/dev/null 2>&1; then
        # let apt's sandbox user write its downloads (avoids "unsandboxed" warnings)
        chown _apt:root "$BUILD_DIR/lists/partial" "$BUILD_DIR/cache/archives/partial" "$BUILD_DIR/src"
    fi
    srclist="$BUILD_DIR/sources.list"
    printf 'deb-src [signed-by=%s] %s %s main\n' "$KEYRING" "$mirror" "$SOURCE_SUITE" >"$srclist"

    aptopts=(
        -o "Dir::Etc::SourceList=$srclist"
        -o "Dir::Etc::SourceParts=/dev/null"
        -o "Dir::State::Lists=$BUILD_DIR/lists"
        -o "Dir::Cache=$BUILD_DIR/cache"
        -o "Acquire::Languages=none"
    )
    log "apt-get update (private lists in ${BUILD_DIR}/lists)"
    apt-get "${aptopts[@]}" update

    log "downloading pgvector source package"
    if ! (cd "$BUILD_DIR/src" && apt-get "${aptopts[@]}" source --download-only pgvector); then
        if ! pkg_installed dpkg-dev; then
            log "apt-get source failed; installing dpkg-dev and retrying"
            detached apt-get install -y dpkg-dev \
                || { apt-get update && detached apt-get install -y dpkg-dev; }
            (cd "$BUILD_DIR/src" && apt-get "${aptopts[@]}" source --download-only pgvector)
        else
            die "apt-get source --download-only pgvector failed"
        fi
    fi

    tarball=$(find "$BUILD_DIR/src" -maxdepth 1 -name 'pgvector_*.orig.tar.*' | sort | tail -n1)
    [[ -n "$tarball" ]] || die "no pgvector_*.orig.tar.* downloaded into $BUILD_DIR/src"
    log "unpacking $(basename "$tarball")"
    mkdir -p "$BUILD_DIR/build"
    tar -xf "$tarball" -C "$BUILD_DIR/build"
    srcdir=$(find "$BUILD_DIR/build" -mindepth 2 -maxdepth 2 -name Makefile -printf '%h\n' | head -n1)
    [[ -n "$srcdir" ]] || die "no Makefile found in unpacked pgvector source"

    log "compiling pgvector in ${srcdir}"
    local makeargs=(with_llvm=no OPTFLAGS= "PG_CONFIG=$PG_CONFIG")
    make -C "$srcdir" -j"$(nproc)" "${makeargs[@]}"
    log "installing pgvector"
    make -C "$srcdir" "${makeargs[@]}" install
}

if ext_available vector; then
    log "extension 'vector' already available"
else
    build_pgvector
    ext_available vector || die "'vector' still not in pg_available_extensions after install"
    log "pgvector installed"
fi
ext_available pg_trgm || die "'pg_trgm' not available (is postgresql-contrib installed?)"

# ---------------------------------------------------------------------------
# 4. Database + extensions
# ---------------------------------------------------------------------------
log "step 4/5: ensuring database ${DB_NAME}"
if [[ "$(psql_q postgres "select count(*) from pg_database where datname = '${DB_NAME}'")" == 1 ]]; then
    log "database ${DB_NAME} already exists"
else
    log "creating database ${DB_NAME}"
    psql_q postgres "CREATE DATABASE ${DB_NAME}" >/dev/null
fi
log "ensuring extensions vector, pg_trgm in ${DB_NAME}"
psql -X -w -q -v ON_ERROR_STOP=1 -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d "$DB_NAME" \
    -c 'SET client_min_messages = warning' \
    -c 'CREATE EXTENSION IF NOT EXISTS vector' \
    -c 'CREATE EXTENSION IF NOT EXISTS pg_trgm' >/dev/null
log "extensions: $(psql_q "$DB_NAME" "select string_agg(extname || ' ' || extversion, ', ' order by extname) from pg_extension")"

# ---------------------------------------------------------------------------
# 5. Result
# ---------------------------------------------------------------------------
log "step 5/5: done"
printf 'TEST_DATABASE_URL=postgresql+psycopg://%s@%s:%s/%s\n' "$PG_USER" "$PG_HOST" "$PG_PORT" "$DB_NAME" >&3

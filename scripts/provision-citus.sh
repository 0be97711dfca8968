#!/usr/bin/env bash
# Provision a local Citus 13.2.2 cluster (a coordinator and two workers on 127.0.0.1)
# for the scale-out tests: PostgreSQL 15 + Citus + pgvector + pg_trgm.
#
# Intended for CI (.ci/run) on Debian 12, run as root. Idempotent: a second run on the
# same machine only performs cheap checks (a few seconds).
#
#   * runs scripts/provision-postgres.sh first (PostgreSQL 15 + pgvector + pg_trgm)
#   * installs the build packages of the vendored source's README when missing
#   * builds Citus 13.2.2 from the vendored source (never downloaded) with its patch,
#     only when the installed citus.so is not this build for this PostgreSQL; the build
#     tree is cached under /var/cache/navi-citus, so a reinstall is a `make install`
#   * three data directories under /var/lib/postgresql/navi-citus/{coordinator,worker1,
#     worker2} on ports 5460/5461/5462, trust auth on 127.0.0.1, started detached
#   * database navi_test on all three with extensions citus, vector, pg_trgm; the
#     coordinator knows itself and both workers
#
# The vendored source: $NAVI_CITUS_SOURCE, else <repo>/../shared/vendor/citus, else
# /work/shared/vendor/citus (a directory holding citus-13.2.2.tar.gz and the patch).
#
# All progress output goes to stderr. The LAST line on stdout is:
#   TEST_CITUS_URL=postgresql+psycopg://postgres@127.0.0.1:5460/navi_test
set -euo pipefail

CITUS_VERSION=13.2.2
PG_MAJOR=15
PG_BIN=/usr/lib/postgresql/${PG_MAJOR}/bin
PG_CONFIG=${PG_BIN}/pg_config
PG_HOST=127.0.0.1
PG_USER=postgres
DB_NAME=navi_test
BASE_DIR=${NAVI_CITUS_DATA_DIR:-/var/lib/postgresql/navi-citus}
CACHE_DIR=${NAVI_CITUS_CACHE_DIR:-/var/cache/navi-citus}
COORDINATOR_PORT=${NAVI_CITUS_PORT:-5460}
NODES=(coordinator worker1 worker2)
PORTS=("$COORDINATOR_PORT" $((COORDINATOR_PORT + 1)) $((COORDINATOR_PORT + 2)))
READY_TIMEOUT=30
# --without-libcurl: libcurl only serves Citus' anonymous statistics collection.
CONFIGURE_FLAGS=(--without-libcurl)
# No LLVM bitcode for JIT inlining: clang is not needed and the build is faster.
MAKE_FLAGS=(with_llvm=no)
BUILD_PACKAGES=(postgresql-server-dev-${PG_MAJOR} liblz4-dev libzstd-dev autoconf flex libkrb5-dev
    libselinux1-dev libxslt1-dev libpam0g-dev libreadline-dev libssl-dev)

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")

# shellcheck source=scripts/_lib.sh
source "$here/_lib.sh"
# shellcheck source=scripts/_citus.sh
source "$here/_citus.sh"
provision_start provision-citus "needs apt-get, make install, runuser"

# Serialise concurrent runs on the same machine (fd 8; provision-postgres.sh uses 9).
lockfile=/run/lock/navi-provision-citus.lock
[[ -d /run/lock && -w /run/lock ]] || lockfile=/tmp/navi-provision-citus.lock
exec 8>"$lockfile"
flock 8


pkg_installed() {
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

psql_q() {
    # psql_q <port> <db> <sql>  -> unaligned, tuples-only output
    psql -X -w -v ON_ERROR_STOP=1 -h "$PG_HOST" -p "$1" -U "$PG_USER" -d "$2" -Atc "$3"
}

started=$SECONDS

# ---------------------------------------------------------------------------
# 1. PostgreSQL 15 + pgvector + pg_trgm (the project's own script)
# ---------------------------------------------------------------------------
log "step 1/6: PostgreSQL ${PG_MAJOR} + pgvector (scripts/provision-postgres.sh)"
detached bash "$here/provision-postgres.sh" >/dev/null
[[ -x "$PG_CONFIG" ]] || die "$PG_CONFIG missing after provision-postgres.sh"
pg_version=$("$PG_CONFIG" --version)

# ---------------------------------------------------------------------------
# 2. Citus: built from the vendored source when the installed one is not this build
# ---------------------------------------------------------------------------
log "step 2/6: checking Citus ${CITUS_VERSION} for ${pg_version}"
find_source() {
    local d
    for d in "${NAVI_CITUS_SOURCE:-}" "$repo/../shared/vendor/citus" /work/shared/vendor/citus; do
        [[ -n "$d" && -f "$d/citus-${CITUS_VERSION}.tar.gz" ]] && { (cd "$d" && pwd); return; }
    done
    die "Citus source not found: set NAVI_CITUS_SOURCE to a directory holding citus-${CITUS_VERSION}.tar.gz"
}
src_dir=$(find_source)
tarball=$src_dir/citus-${CITUS_VERSION}.tar.gz
patches=("$src_dir"/*.patch)
[[ -e "${patches[0]}" ]] || patches=()

pkglibdir=$("$PG_CONFIG" --pkglibdir)
sharedir=$("$PG_CONFIG" --sharedir)
installed_so=$pkglibdir/citus.so
# The identity of a build: source, patches, flags and the exact PostgreSQL it is for.
build_key=$({ sha256sum "$tarball" "${patches[@]}" | awk '{print $1}'
              echo "$pg_version ${CONFIGURE_FLAGS[*]} ${MAKE_FLAGS[*]}"; } | sha256sum | cut -c1-16)
build_root=$CACHE_DIR/build-$build_key
build_tree=$build_root/citus-${CITUS_VERSION}
stamp=$build_root/built.stamp           # the build tree is complete
install_stamp=$CACHE_DIR/installed      # "<build key> <sha256 of the installed citus.so>"

installed_is_current() {
    [[ -f "$installed_so" && -f "$sharedir/extension/citus.control" && -f "$install_stamp" ]] || return 1
    [[ "$(cat "$install_stamp")" == "$build_key $(sha256sum "$installed_so" | awk '{print $1}')" ]] || return 1
    grep -aq "Citus ${CITUS_VERSION}" "$installed_so"
}

install_build_packages() {
    local missing=() p
    for p in "${BUILD_PACKAGES[@]}"; do pkg_installed "$p" || missing+=("$p"); done
    command -v gcc >/dev/null && command -v make >/dev/null || missing+=(build-essential)
    if ((${#missing[@]})); then
        log "installing build packages: ${missing[*]}"
        apt-get update -q
        detached apt-get install -y -q "${missing[@]}"
    else
        log "build packages already installed"
    fi
}

if installed_is_current; then
    log "citus.so is Citus ${CITUS_VERSION} built for ${pg_version} (build ${build_key}); nothing to build"
else
    install_build_packages
    if [[ -f "$stamp" ]]; then
        log "cached build tree ${build_tree} is complete; installing it"
    else
        t0=$SECONDS
        log "building Citus ${CITUS_VERSION} in ${build_tree} (source ${tarball})"
        rm -rf "$build_root"
        mkdir -p "$build_root"
        tar -xzf "$tarball" -C "$build_root"
        [[ -f "$build_tree/configure" ]] || die "no configure in $build_tree"
        for p in "${patches[@]}"; do
            log "applying $(basename "$p")"
            patch -d "$build_tree" -p1 --forward <"$p"
        done
        (cd "$build_tree" && PG_CONFIG=$PG_CONFIG ./configure "${CONFIGURE_FLAGS[@]}" >"$build_root/configure.log" 2>&1) \
            || { tail -n 30 "$build_root/configure.log" >&2; die "configure failed (log: $build_root/configure.log)"; }
        log "compiling (make -j$(nproc) ${MAKE_FLAGS[*]}; log: $build_root/make.log)"
        make -C "$build_tree" -j"$(nproc)" "${MAKE_FLAGS[@]}" >"$build_root/make.log" 2>&1 \
            || { tail -n 30 "$build_root/make.log" >&2; die "make failed (log: $build_root/make.log)"; }
        touch "$stamp"
        log "built in $((SECONDS - t0)) s"
        # Older build trees (another source or PostgreSQL) are of no further use.
        find "$CACHE_DIR" -mindepth 1 -maxdepth 1 -name 'build-*' ! -name "build-$build_key" -exec rm -rf {} +
    fi
    make -C "$build_tree" "${MAKE_FLAGS[@]}" install >"$build_root/install.log" 2>&1 \
        || { tail -n 30 "$build_root/install.log" >&2; die "make install failed"; }
    printf '%s %s\n' "$build_key" "$(sha256sum "$installed_so" | awk '{print $1}')" >"$install_stamp"
    installed_is_current || die "citus.so at $installed_so is not Citus ${CITUS_VERSION} after make install"
    log "Citus ${CITUS_VERSION} installed into ${pkglibdir}"
fi

# ---------------------------------------------------------------------------
# 3. Three data directories
# ---------------------------------------------------------------------------
log "step 3/6: data directories under ${BASE_DIR}"
mkdir -p "$BASE_DIR/run"
chown postgres:postgres "$BASE_DIR" "$BASE_DIR/run"
chmod 700 "$BASE_DIR"
for i in "${!NODES[@]}"; do
    node=${NODES[$i]} port=${PORTS[$i]} dir=$BASE_DIR/${NODES[$i]}
    if [[ ! -f "$dir/PG_VERSION" ]]; then
        log "initdb ${dir}"
        rm -rf "$dir"
        runuser -u postgres -- "$PG_BIN/initdb" -D "$dir" -U "$PG_USER" -A trust -E UTF8 \
            --locale=C.UTF-8 >/dev/null
    fi
    [[ "$(cat "$dir/PG_VERSION")" == "$PG_MAJOR" ]] || die "$dir is not a PostgreSQL ${PG_MAJOR} data directory"
    # Our settings in one file of our own, compared every run: a server whose file
    # changed is restarted in step 4. A throwaway test cluster: no durability.
    citus_node_conf "$node" "$port" "$BASE_DIR/run" >"$dir/navi-citus.conf.new"
    if cmp -s "$dir/navi-citus.conf.new" "$dir/navi-citus.conf"; then
        rm -f "$dir/navi-citus.conf.new"
    else
        log "settings of ${node} written (${dir}/navi-citus.conf)"
        mv "$dir/navi-citus.conf.new" "$dir/navi-citus.conf"
        touch "$dir/navi-citus.conf.changed"
    fi
    chown postgres:postgres "$dir/navi-citus.conf"
    grep -qxF "include = 'navi-citus.conf'" "$dir/postgresql.conf" \
        || echo "include = 'navi-citus.conf'" >>"$dir/postgresql.conf"
done

# ---------------------------------------------------------------------------
# 4. Started (detached, as postgres), on ports nothing else holds
# ---------------------------------------------------------------------------
log "step 4/6: servers on ports ${PORTS[*]}"
port_holder() {
    # the pid listening on 127.0.0.1:<port>, or nothing
    ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | head -n1 | cut -d= -f2 || true
}
for i in "${!NODES[@]}"; do
    node=${NODES[$i]} port=${PORTS[$i]} dir=$BASE_DIR/${NODES[$i]}
    if runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
        running_port=$(psql_q "$port" postgres 'show data_directory' 2>/dev/null || true)
        if [[ "$running_port" == "$dir" && ! -e "$dir/navi-citus.conf.changed" ]]; then
            log "${node} already running on ${port}"
            continue
        fi
        log "${node} runs with other settings; restarting it"
        detached runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$dir" -m fast -w stop >/dev/null
    fi
    holder=$(port_holder "$port")
    [[ -z "$holder" ]] || die "port ${port} is taken by pid ${holder} ($(ps -o comm= -p "$holder" || true)); set NAVI_CITUS_PORT"
    log "starting ${node} on ${port} (log: ${dir}/server.log)"
    detached runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t "$READY_TIMEOUT" \
        start </dev/null >/dev/null 2>&1 \
        || { tail -n 20 "$dir/server.log" >&2; die "${node} did not start"; }
    rm -f "$dir/navi-citus.conf.changed"
done
for i in "${!NODES[@]}"; do
    deadline=$((SECONDS + READY_TIMEOUT))
    until psql_q "${PORTS[$i]}" postgres 'select 1' >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "${NODES[$i]} not accepting connections on ${PORTS[$i]}"
        sleep 0.5
    done
done

# ---------------------------------------------------------------------------
# 5. Database navi_test on all three with citus; the coordinator knows every node
# ---------------------------------------------------------------------------
log "step 5/6: database ${DB_NAME} with citus on every node, cluster membership"
has_extension() { [[ "$(psql_q "$1" "$DB_NAME" "select count(*) from pg_extension where extname = '$2'")" == 1 ]]; }
for i in "${!NODES[@]}"; do
    port=${PORTS[$i]}
    if [[ "$(psql_q "$port" postgres "select count(*) from pg_database where datname = '${DB_NAME}'")" != 1 ]]; then
        log "creating ${DB_NAME} on ${NODES[$i]}"
        psql_q "$port" postgres "CREATE DATABASE ${DB_NAME}" >/dev/null
    fi
    # Once a worker is in the cluster it refuses DDL of its own (extensions included):
    # only what is missing is created here, the rest comes from the coordinator.
    has_extension "$port" citus || psql_q "$port" "$DB_NAME" "CREATE EXTENSION citus" >/dev/null
done
coord() { psql_q "$COORDINATOR_PORT" "$DB_NAME" "$1"; }
if [[ "$(coord "select count(*) from pg_dist_node where groupid = 0 and nodename = '${PG_HOST}' and nodeport = ${COORDINATOR_PORT}")" != 1 ]]; then
    log "citus_set_coordinator_host(${PG_HOST}, ${COORDINATOR_PORT})"
    coord "SELECT citus_set_coordinator_host('${PG_HOST}', ${COORDINATOR_PORT})" >/dev/null
fi
for port in "${PORTS[@]:1}"; do
    if [[ "$(coord "select count(*) from pg_dist_node where nodename = '${PG_HOST}' and nodeport = ${port} and isactive")" != 1 ]]; then
        log "citus_add_node(${PG_HOST}, ${port})"
        coord "SELECT citus_add_node('${PG_HOST}', ${port})" >/dev/null
    fi
done

# ---------------------------------------------------------------------------
# 6. vector and pg_trgm, created on the coordinator (Citus propagates them)
# ---------------------------------------------------------------------------
log "step 6/6: extensions vector, pg_trgm"
for ext in vector pg_trgm; do
    has_extension "$COORDINATOR_PORT" "$ext" || coord "CREATE EXTENSION $ext" >/dev/null
    for i in "${!NODES[@]}"; do
        has_extension "${PORTS[$i]}" "$ext" || die "extension $ext missing on ${NODES[$i]} (${PORTS[$i]})"
    done
done
log "nodes: $(coord "select string_agg(nodename || ':' || nodeport || case when groupid = 0 then ' (coordinator)' else '' end, ', ' order by nodeport) from pg_dist_node")"
log "$(coord 'select citus_version()')"
log "done in $((SECONDS - started)) s"
printf 'TEST_CITUS_URL=postgresql+psycopg://%s@%s:%s/%s\n' "$PG_USER" "$PG_HOST" "$COORDINATOR_PORT" "$DB_NAME" >&3

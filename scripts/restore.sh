#!/usr/bin/env bash
# Restore a backup of scripts/backup.sh into an empty database and an empty data
# directory (docs/operations.md, "Restoring"). Start the service afterwards: it migrates
# the restored schema to its head on start.
#
#   createdb -h db -U navi navi_restored
#   DATABASE_URL=postgresql://navi@db/navi_restored NAVI_DATA_DIR=/srv/navi scripts/restore.sh SRC
#
#   DATABASE_URL   the empty database to restore into (it must exist)
#   NAVI_DATA_DIR  the data directory (default .navi): SRC/session_files/ is copied to its
#                  session_files/, which must not exist or be empty
#   PG_BIN         the directory of pg_restore and psql (default: those on PATH), of the
#                  dump's pg_dump version or later
set -euo pipefail

src=${1:?usage: scripts/restore.sh SRC}
url=${DATABASE_URL:?DATABASE_URL: the empty database to restore into}
url=${url/#postgresql+psycopg:/postgresql:}
files=${NAVI_DATA_DIR:-.navi}/session_files
bin=${PG_BIN:+$PG_BIN/}

[[ -f $src/navi.dump ]] || { echo "restore: no $src/navi.dump" >&2; exit 2; }
if [[ -d $files ]] && [[ -n $(ls -A "$files") ]]; then
    echo "restore: $files is not empty" >&2
    exit 2
fi
# the extensions first, by whoever restores (pg_restore's own CREATE EXTENSION IF NOT
# EXISTS then does nothing): vector always, pg_trgm when the server has it
"${bin}psql" -X -q -v ON_ERROR_STOP=1 --dbname="$url" <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS vector;
SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') AS trgm \gset
\if :trgm
CREATE EXTENSION IF NOT EXISTS pg_trgm;
\endif
SQL
# everything but the extensions' comments: only an extension's owner may set one, and
# the restoring role need not own them (a superuser may have created them)
list=$(mktemp)
trap 'rm -f "$list"' EXIT
"${bin}pg_restore" --list "$src/navi.dump" | grep -v ' COMMENT - EXTENSION ' >"$list"
"${bin}pg_restore" --exit-on-error --no-owner --no-privileges --use-list="$list" \
    --dbname="$url" "$src/navi.dump"
mkdir -p "$files"
cp -a "$src/session_files/." "$files/"
echo "restore: $src into the database and $files; start the service (it migrates to head)"

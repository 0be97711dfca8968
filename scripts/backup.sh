#!/usr/bin/env bash
# Back up Navi: the database as a pg_dump custom-format file and a copy of the session
# files folder (docs/operations.md, "Backups"). The service may keep running.
#
#   DATABASE_URL=postgresql://navi@db/navi NAVI_DATA_DIR=/srv/navi scripts/backup.sh DEST
#
# Writes DEST/navi.dump and DEST/session_files/ (DEST must not exist yet).
#   DATABASE_URL   the service's (postgresql[+psycopg]://…); for the embedded server:
#                  postgresql://postgres@/postgres?host=<its socket directory>
#   NAVI_DATA_DIR  the service's data directory (default .navi): its session_files/
#   PG_BIN         the directory of pg_dump, of the server's major version or later
#                  (default: the one on PATH)
set -euo pipefail

dest=${1:?usage: scripts/backup.sh DEST}
url=${DATABASE_URL:?DATABASE_URL: the database to back up}
url=${url/#postgresql+psycopg:/postgresql:}
files=${NAVI_DATA_DIR:-.navi}/session_files
bin=${PG_BIN:+$PG_BIN/}

[[ -e $dest ]] && { echo "backup: $dest exists" >&2; exit 2; }
mkdir -p "$dest"
# the dump first, the files after it: every file the dump's sessions name is on disk
# by then (a file uploaded meanwhile is copied too, and harmless)
"${bin}pg_dump" --format=custom --file="$dest/navi.dump" --dbname="$url"
if [[ -d $files ]]; then
    cp -a "$files" "$dest/session_files"
else
    mkdir "$dest/session_files"
fi
echo "backup: $dest/navi.dump ($(du -h "$dest/navi.dump" | cut -f1)), $dest/session_files ($(find "$dest/session_files" -type f | wc -l) files)"

#!/usr/bin/env bash
# wrk, the C HTTP load generator `make bench-load` drives the server with (Debian's
# package). Idempotent: nothing to do when it is on PATH.
set -euo pipefail
if command -v wrk >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-wrk: wrk is missing; install the 'wrk' package (root and apt-get needed here)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q wrk

#!/usr/bin/env bash
# What a new user does, from a fresh clone of this repository's HEAD in a temp folder, with
# nothing but Python, Node and the package registries (make fresh-clone-check; CI):
#   1. `make dist` in the clone: the service's and the Python client's sdist + wheel, the
#      TypeScript client's npm tarball;
#   2. a live service: the service's wheel installed into a fresh venv and `navi serve`
#      started from outside the clone (embedded PostgreSQL in a temp folder, auth on), its
#      model the suite's fake Ollama from the clone (clients/typescript/test/fake_ollama.py,
#      standard library only), a user and a token of theirs;
#   3. the Python client as the READMEs install it (`pip install ./clients/python` from the
#      clone's root, fresh venv) and from its wheel (fresh venv): clients/python/README.md's
#      quickstart (its first ```python block) run as it is, from outside the clone;
#   4. the TypeScript client as the READMEs install it (`npm install <clone>/clients/typescript`
#      in a fresh `npm init -y` project) and from its tarball (another fresh project):
#      clients/typescript/README.md's quickstart (its first ```js block) run with node.
# Each quickstart must print a raw-history hit with the port it stored ("[raw] … 6543").
# Only committed files are checked (it is a clone): commit first.
#   scripts/fresh_clone_check.sh [--keep]      (--keep: leave the temp folder for a look)
# PYTHON: the Python that makes the venvs and runs the fake (default python3).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
KEEP=0
[ "${1:-}" = "--keep" ] && KEEP=1

WORK=$(mktemp -d "${TMPDIR:-/tmp}/navi-fresh-XXXXXX")
CLONE="$WORK/navi"
FAKE_PID=""
SERVE_PID=""
STATUS=1
T0=$(date +%s)

say() { echo "== fresh-clone-check [$(($(date +%s) - T0)) s] $*"; }

stop() { # stop() PID SECONDS: SIGTERM, then SIGKILL after SECONDS
  local pid=$1 n=$(($2 * 4))
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null && [ $n -gt 0 ]; do sleep 0.25; n=$((n - 1)); done
  kill -KILL "$pid" 2>/dev/null || true
}

finish() {
  stop "$SERVE_PID" 30 # the service stops its embedded PostgreSQL on the way out
  stop "$FAKE_PID" 5
  if [ "$STATUS" -ne 0 ]; then
    for log in serve fake-ollama; do
      [ -f "$WORK/$log.log" ] && { echo "--- $log log (last lines) ---"; tail -n 40 "$WORK/$log.log"; }
    done
    say "FAILED"
  fi
  if [ "$KEEP" = 1 ]; then echo "kept: $WORK"; else rm -rf "$WORK"; fi
}
trap finish EXIT

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

first_block() { # first_block FILE LANG → the first ```LANG block of FILE
  "$PY" - "$1" "$2" <<'EOF'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r"^```" + re.escape(sys.argv[2]) + r"\n(.*?)^```", text, flags=re.S | re.M)
if not m:
    sys.exit(f"{sys.argv[1]}: no ```{sys.argv[2]} block")
sys.stdout.write(m.group(1))
EOF
}

logged() { # logged NAME CMD…: CMD's output into $WORK/NAME.log, shown when it fails
  local name=$1
  shift
  "$@" >"$WORK/$name.log" 2>&1 || { tail -n 40 "$WORK/$name.log" >&2; echo "$name: failed" >&2; exit 1; }
}

expect_hit() { # expect_hit NAME OUTPUT_FILE: the quickstart found what it stored
  if grep -q '\[raw\].*6543' "$2"; then
    say "$1: ok — $(grep -m1 '\[raw\]' "$2" | cut -c1-110)"
  else
    echo "$1: no raw hit with 6543 in its output:" >&2
    cat "$2" >&2
    exit 1
  fi
}

if [ -n "$(git -C "$REPO" status --porcelain --untracked-files=no)" ]; then
  say "note: uncommitted changes in $REPO are not checked (a clone has HEAD only)"
fi
say "git clone $REPO → $CLONE ($(git -C "$REPO" rev-parse --short HEAD))"
git clone -q "$REPO" "$CLONE"

# make dist needs the repository's dev venv (build). The checkout's own serves when it was
# installed from the clone's pyproject.toml (its make stamp is there); otherwise the clone
# makes its own (a minute or two). `-o pyproject.toml`: the clone's copy is newer than the
# stamp, and make would otherwise reinstall the checkout's venv as an editable install of
# the clone — deleted at the end, leaving the checkout's `navi` pointing at nothing.
stamp="$REPO/.venv/.installed-$(sha1sum <"$CLONE/pyproject.toml" | cut -c1-12)"
if [ -x "$REPO/.venv/bin/python" ] && [ -f "$stamp" ]; then
  say "make dist (in the clone, with $REPO/.venv)"
  before=$(stat -c %Y "$stamp")
  logged dist make -s -C "$CLONE" -o pyproject.toml dist VENV="$REPO/.venv"
  [ "$(stat -c %Y "$stamp")" = "$before" ] || { echo "make dist reinstalled $REPO/.venv" >&2; exit 1; }
else
  say "make dist (in the clone, its own venv)"
  logged dist make -s -C "$CLONE" dist
fi
ls -1 "$CLONE/dist"
shopt -s nullglob
server_wheel=("$CLONE"/dist/navi-*-py3-none-any.whl)
client_wheel=("$CLONE"/dist/navi_client-*-py3-none-any.whl)
ts_tarball=("$CLONE"/dist/navi-client-*.tgz)
shopt -u nullglob
[ ${#server_wheel[@]} = 1 ] && [ ${#client_wheel[@]} = 1 ] && [ ${#ts_tarball[@]} = 1 ] || {
  echo "make dist did not build one of each: ${server_wheel[*]} ${client_wheel[*]} ${ts_tarball[*]}" >&2
  exit 1
}

say "the service: $(basename "${server_wheel[0]}") into a fresh venv"
"$PY" -m venv "$WORK/venv-server"
logged pip-server "$WORK/venv-server/bin/python" -m pip install --disable-pip-version-check "${server_wheel[0]}"

say "the fake Ollama and navi serve (embedded PostgreSQL in $WORK/data)"
fake_port=$(free_port)
(cd "$CLONE" && exec "$PY" clients/typescript/test/fake_ollama.py --port "$fake_port") >"$WORK/fake-ollama.log" 2>&1 &
FAKE_PID=$!
port=$(free_port)
URL="http://127.0.0.1:$port"
ADMIN_TOKEN="navi_fresh_$("$PY" -c 'import secrets; print(secrets.token_hex(24))')"
mkdir -p "$WORK/run"
(
  cd "$WORK/run" # outside the clone: the installed package only
  unset DATABASE_URL DATABASE_REPLICA_URL NAVI_PROFILES_FILE EMBEDDING_DIM
  export NAVI_AUTH_ENABLED=true NAVI_ADMIN_TOKEN="$ADMIN_TOKEN" WEB_CONCURRENCY=1 \
    NAVI_DATA_DIR="$WORK/data" OLLAMA_HOST="http://127.0.0.1:$fake_port" \
    OLLAMA_MODEL=fake-chat:latest EMBEDDING_PROVIDER=ollama EMBEDDING_MODEL=fake-embed:latest \
    LOG_JSON=false
  exec "$WORK/venv-server/bin/navi" serve --host 127.0.0.1 --port "$port"
) >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!

"$PY" - "$URL" "$SERVE_PID" <<'EOF'
import json, os, sys, time, urllib.request
url, pid = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 180
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("navi serve exited")
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
            if json.load(r).get("database") is True:
                sys.exit(0)
    except Exception:
        pass
    time.sleep(0.5)
sys.exit(f"{url}/health: not ready after 180 s")
EOF
say "service ready at $URL"

new_user_token() { # a user of its own for each quickstart, so none finds another's messages
  "$PY" - "$URL" "$ADMIN_TOKEN" "$1" <<'EOF'
import json, sys, urllib.request
url, admin, name = sys.argv[1:4]
def post(path, body):
    req = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"Bearer {admin}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)
user = post("/admin/users", {"name": name})
print(post(f"/admin/users/{user['id']}/tokens", {"name": "quickstart"})["token"])
EOF
}
export NAVI_URL="$URL" NAVI_TOKEN=""

first_block "$CLONE/clients/python/README.md" python >"$WORK/quickstart.py"
first_block "$CLONE/clients/typescript/README.md" js >"$WORK/quickstart.mjs"

say "Python client: pip install ./clients/python (from the clone's root, fresh venv)"
"$PY" -m venv "$WORK/venv-py-readme"
(cd "$CLONE" && logged pip-py-readme "$WORK/venv-py-readme/bin/python" -m pip install --disable-pip-version-check ./clients/python)
NAVI_TOKEN=$(new_user_token py-readme)
(cd "$WORK" && "$WORK/venv-py-readme/bin/python" quickstart.py) >"$WORK/py-readme.out"
expect_hit "Python quickstart (pip install ./clients/python)" "$WORK/py-readme.out"

say "Python client: $(basename "${client_wheel[0]}") (fresh venv)"
"$PY" -m venv "$WORK/venv-py-wheel"
logged pip-py-wheel "$WORK/venv-py-wheel/bin/python" -m pip install --disable-pip-version-check "${client_wheel[0]}"
NAVI_TOKEN=$(new_user_token py-wheel)
(cd "$WORK" && "$WORK/venv-py-wheel/bin/python" quickstart.py) >"$WORK/py-wheel.out"
expect_hit "Python quickstart (the wheel)" "$WORK/py-wheel.out"

say "TypeScript client: npm install $CLONE/clients/typescript (fresh npm project)"
mkdir "$WORK/ts-readme"
NAVI_TOKEN=$(new_user_token ts-readme)
(
  cd "$WORK/ts-readme"
  npm init -y >/dev/null
  logged npm-ts-readme npm install --no-audit --no-fund "$CLONE/clients/typescript"
  cp "$WORK/quickstart.mjs" . && node quickstart.mjs >"$WORK/ts-readme.out"
)
expect_hit "TypeScript quickstart (npm install <clone>/clients/typescript)" "$WORK/ts-readme.out"

say "TypeScript client: npm install $(basename "${ts_tarball[0]}") (fresh npm project)"
mkdir "$WORK/ts-tarball"
NAVI_TOKEN=$(new_user_token ts-tarball)
(
  cd "$WORK/ts-tarball"
  npm init -y >/dev/null
  logged npm-ts-tarball npm install --no-audit --no-fund "${ts_tarball[0]}"
  cp "$WORK/quickstart.mjs" . && node quickstart.mjs >"$WORK/ts-tarball.out"
)
expect_hit "TypeScript quickstart (the npm tarball)" "$WORK/ts-tarball.out"

STATUS=0
say "all green"

#!/usr/bin/env bash
# The one prepared check for a lent GPU machine (docs/discovery.md): `discover --local` of the host end to end, then
# `capture_node` of the real tool outputs as anonymised fixtures, each parsed again with `parse auto`.
#
#   OUT=/some/dir scripts/device-check.sh   run the check; everything it writes goes under $OUT (default var/device-check)
#   scripts/device-check.sh --prepare       here, before: fill var/device-wheels (~30 MB) from the package index
#
# The device machine has no internet, and .venv (~700 MB, its python a link into this host's pyenv) is too big to
# carry. So the check uses .venv only where it works, else builds var/device-venv from var/device-wheels (carry that
# folder). Each stage has a time limit and reports; a failing stage does not stop the later ones.
set -u
cd "$(dirname "$0")/.." || exit 2
WHEELS=var/device-wheels
VENV=var/device-venv # not under $OUT: ~200 MB that should not travel back with the results
# What manage.py needs to migrate, discover, capture and parse: no web server, PostgreSQL, SSH or test tools.
RUNTIME="django asgiref sqlparse djangorestframework drf-spectacular drf-spectacular-sidecar inflection uritemplate
pyyaml jsonschema jsonschema-specifications referencing rpds-py attrs typing-extensions django-filter celery kombu amqp
billiard vine click click-didyoumean click-plugins click-repl python-dateutil six tzlocal channels whitenoise plotly
narwhals packaging networkx"
COMPILED="pyyaml|rpds-py" # also fetched for Python 3.12 and 3.13, in case the device's Python is not this one

prepare() {
  mkdir -p "$WHEELS" || return 1
  # Pin what .venv has (names normalised: lower case, - for _), so the device runs the versions tested here.
  .venv/bin/pip freeze --all | tr 'A-Z_' 'a-z-' | grep -E "^($(echo $RUNTIME | tr ' ' '|'))==" >"$WHEELS/requirements.txt"
  .venv/bin/pip download -q --no-deps -d "$WHEELS" -r "$WHEELS/requirements.txt" || return 1
  for version in 3.12 3.13; do
    .venv/bin/pip download -q --no-deps --only-binary=:all: --python-version "$version" -d "$WHEELS" \
      $(grep -E "^($COMPILED)==" "$WHEELS/requirements.txt") || return 1
  done
  echo "$(wc -l <"$WHEELS/requirements.txt") packages, $(du -sh "$WHEELS" | cut -f1) in $WHEELS: carry it"
}
if [ "${1:-}" = "--prepare" ]; then prepare; exit $?; fi

OUT="${OUT:-var/device-check}"
mkdir -p "$OUT/logs" "$OUT/var" && OUT="$(cd "$OUT" && pwd)" || exit 2
export OUT
# The embedded wiring on a throwaway SQLite file: no Redis, no Celery worker (the commands run the job's shards).
unset REDIS_URL
export RACKPILOT_VAR_DIR="$OUT/var" DATABASE_URL="sqlite:///$OUT/var/rackpilot.sqlite3"
SUMMARY=()

note() { # note NAME RC START_NS: one line of the summary
  SUMMARY+=("$(printf '%-14s exit %-3s %6d ms' "$1" "$2" $((($(date +%s%N) - $3) / 1000000)))")
}

stage() { # stage NAME LIMIT_S COMMAND...: run it with a time limit, tee to logs/NAME.log, note its status and time
  local name=$1 limit=$2 start rc
  shift 2
  echo "== $name: ${*:1:4}"
  start=$(date +%s%N)
  timeout "$limit" "$@" 2>&1 | tee "$OUT/logs/$name.log"
  rc=${PIPESTATUS[0]}
  note "$name" "$rc" "$start"
  return "$rc"
}

find_python() { # sets PY: a python that can import Django
  PY=""
  for candidate in "${PYTHON:-}" .venv/bin/python "$VENV/bin/python"; do
    if [ -n "$candidate" ] && "$candidate" -c "import django" 2>/dev/null; then PY=$candidate && return 0; fi
  done
  if [ ! -f "$WHEELS/requirements.txt" ]; then
    echo "no usable .venv and no $WHEELS: run 'scripts/device-check.sh --prepare' where the index is reachable," \
      "then carry $WHEELS (or set PYTHON to a python that has the packages of pyproject.toml)"
    return 1
  fi
  python3 -m venv "$VENV" &&
    "$VENV/bin/pip" install -q --no-index --no-deps --find-links "$WHEELS" -r "$WHEELS/requirements.txt" &&
    PY="$VENV/bin/python" && echo "built $VENV from $WHEELS"
}

# parse auto on every captured file, in one Django process (one start-up, not one per file); JSON into $OUT/parsed/.
# An empty file (nvlink -s without NVLink) names no tool by design: it is parsed with the tool its name maps to.
PARSE_ALL='
import io, os, pathlib, sys
from django.core.management import call_command
from apps.parsers.registry import tool_for_fixture
root = pathlib.Path(os.environ["OUT"])
failed = 0
(root / "parsed").mkdir(exist_ok=True)
for path in sorted(p for p in (root / "h200-node").rglob("*") if p.is_file() and p.name != "README.md"):
    errors = io.StringIO()
    try:
        tool = "auto" if path.read_bytes().strip() else tool_for_fixture(path)
        with open(root / "parsed" / (path.name + ".json"), "w") as result:
            call_command("parse", tool, str(path), stdout=result, stderr=errors)
        print("parsed", path.relative_to(root), *([] if tool == "auto" else [f"(empty: parsed as {tool})"]))
    except (SystemExit, LookupError):
        failed += 1
        print("FAILED", path.relative_to(root), errors.getvalue().strip())
sys.exit(1 if failed else 0)
'

data_nics() { # interfaces backed by a device (real or virtio NICs), comma-separated
  local names=() dev
  for dev in /sys/class/net/*/device; do [ -e "$dev" ] && names+=("$(basename "$(dirname "$dev")")"); done
  (IFS=,; echo "${names[*]:-}")
}

echo "device check on $(uname -srm), $(nproc) CPUs; output under $OUT"
command -v nvidia-smi >/dev/null && timeout 30 nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
echo "== python"
start=$(date +%s%N)
find_python >"$OUT/logs/python.log" 2>&1
rc=$?
cat "$OUT/logs/python.log"
note python "$rc" "$start"
if [ -n "$PY" ]; then
  echo "using $PY ($("$PY" --version 2>&1))"
  stage migrate 120 "$PY" manage.py migrate --no-input -v 0
  stage discover 120 "$PY" manage.py discover --local
  NICS=$(data_nics)
  [ -n "$NICS" ] && stage discover-nics 120 "$PY" manage.py discover --local --interfaces "$NICS"
  stage capture 300 "$PY" manage.py capture_node "$OUT/h200-node"
  stage parse 120 "$PY" manage.py shell -v 0 -c "$PARSE_ALL"
fi
echo "== summary (logs in $OUT/logs, fixtures in $OUT/h200-node, parsed JSON in $OUT/parsed)"
printf '%s\n' "${SUMMARY[@]}"

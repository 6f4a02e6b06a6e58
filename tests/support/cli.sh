# The common part of the CLI tests (tests/cli/*.sh), sourced first:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" NAME "$@"
#
# Takes the script's arguments (<vbucket binary> <tests/data dir>) into $vbucket and $data,
# makes $tmp (removed at exit), and defines the check counters and helpers:
#   fail MESSAGE...   counts a failure and prints it on stderr
#   pass              counts a passed check
#   run ARGS...       runs vbucket with stdin closed, under `timeout` ($cli_timeout seconds,
#                     default 120: a hang fails the check instead of the whole test run);
#                     exit code in $rc, output in $tmp/stdout and $tmp/stderr
#   expect_ok NAME ARGS...
#                     the command succeeds and prints nothing on stderr
#   expect_error NAME CODE PATTERN ARGS...
#                     the command exits with CODE and exactly one stderr line, starting
#                     "vbucket <cmd>: error: " and containing PATTERN (a fixed string)
#   require_python3   exits (failing) unless python3 is there, for scripts that check output
#   json_check NAME ARGS...
#                     runs the script's own checker, python3 $tmp/check.py ARGS: a pass, or a
#                     failure with the checker's output
#   finish            prints "NAME.sh: N checks passed, M failed"; its status is the script's
cli_name=${1:?usage: source tests/support/cli.sh NAME <vbucket binary> <tests/data dir>}
shift
vbucket=${1:?usage: $cli_name.sh <vbucket binary> <tests/data dir>}
data=${2:?usage: $cli_name.sh <vbucket binary> <tests/data dir>}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vbucket-$cli_name-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cli_timeout=${cli_timeout:-120}

failures=0
checks=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
pass() { checks=$((checks + 1)); }

run() {
  timeout -k 5 "$cli_timeout" "$vbucket" "$@" </dev/null >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
}

expect_ok() {
  local name=$1
  shift
  run "$@"
  if [[ $rc -ne 0 ]]; then
    fail "$name: exit code $rc (stderr: $(cat "$tmp/stderr"))"
    return 1
  elif [[ -s $tmp/stderr ]]; then
    fail "$name: unexpected stderr: $(cat "$tmp/stderr")"
    return 1
  fi
  pass
}

expect_error() {
  local name=$1 code=$2 pattern=$3
  shift 3
  run "$@"
  local lines
  lines=$(wc -l <"$tmp/stderr")
  if [[ $rc -eq 0 ]]; then
    fail "$name: exit code 0, expected $code"
  elif [[ $rc -ne $code ]]; then
    fail "$name: exit code $rc, expected $code (stderr: $(cat "$tmp/stderr"))"
  elif [[ $lines -ne 1 ]]; then
    fail "$name: $lines lines on stderr, expected 1:"$'\n'"$(cat "$tmp/stderr")"
  elif ! grep -q '^vbucket\( [a-z-]*\)\?: error: ' "$tmp/stderr"; then
    fail "$name: stderr line has no 'vbucket <cmd>: error: ' prefix: $(cat "$tmp/stderr")"
  elif ! grep -qF -- "$pattern" "$tmp/stderr"; then
    fail "$name: stderr does not mention '$pattern': $(cat "$tmp/stderr")"
  else
    pass
  fi
}

require_python3() {
  if ! command -v python3 >/dev/null 2>&1; then
    echo "FAIL: python3 is needed to check the JSON lines" >&2
    exit 1
  fi
}

json_check() {
  local name=$1
  shift
  if python3 "$tmp/check.py" "$@" >"$tmp/check.out" 2>&1; then
    pass
  else
    fail "$name: $(cat "$tmp/check.out")"
  fi
}

finish() {
  echo "$cli_name.sh: $checks checks passed, $failures failed"
  ((failures == 0))
}

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

finish() {
  echo "$cli_name.sh: $checks checks passed, $failures failed"
  ((failures == 0))
}

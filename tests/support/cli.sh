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
#   expect_ok_warned NAME ARGS...
#                     as expect_ok, but stderr may hold `vbucket <cmd>: warning: ` lines
#   expect_error_absent
#                     when set to a path, expect_error also fails if that file exists after the
#                     command (an output a failing command must not leave behind)
#   require_python3   exits (failing) unless python3 is there, for scripts that check output
#   web_meta PATH SEED ROWS
#                     writes a metadata CSV of ROWS web-video-like rows to PATH (images and
#                     videos of common sizes and rates, a few too small for any bucket), drawn
#                     from SEED; needs python3
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

# expect_success WARNINGS NAME ARGS...: the command succeeds; stderr is empty (WARNINGS 0) or
# holds only `vbucket <cmd>: warning: ` lines (WARNINGS 1).
expect_success() {
  local warnings=$1 name=$2
  shift 2
  run "$@"
  if [[ $rc -ne 0 ]]; then
    fail "$name: exit code $rc (stderr: $(cat "$tmp/stderr"))"
    return 1
  elif [[ $warnings -eq 0 && -s $tmp/stderr ]] ||
    { [[ $warnings -ne 0 ]] && grep -qv '^vbucket [a-z-]*: warning: ' "$tmp/stderr"; }; then
    fail "$name: unexpected stderr: $(cat "$tmp/stderr")"
    return 1
  fi
  pass
}
expect_ok() { expect_success 0 "$@"; }
expect_ok_warned() { expect_success 1 "$@"; }

expect_error() {
  local name=$1 code=$2 pattern=$3
  shift 3
  [[ -n ${expect_error_absent:-} ]] && rm -f "$expect_error_absent"
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
  elif [[ -n ${expect_error_absent:-} && -e $expect_error_absent ]]; then
    fail "$name: $expect_error_absent was written although the command failed"
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

web_meta() {
  python3 - "$1" "$2" "$3" <<'EOF'
import sys
path, state, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sizes = [(1080, 1920), (720, 1280), (480, 854), (360, 640), (1920, 1080), (1080, 1080),
         (240, 426), (2160, 3840), (800, 1920), (64, 64)]
def rnd(n):
    global state
    state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
    return (state >> 33) % n
with open(path, "w") as f:
    f.write("path,num_frames,height,width,fps\n")
    for i in range(rows):
        h, w = sizes[rnd(len(sizes))]
        if rnd(100) < 15:
            f.write(f"img{i}.jpg,1,{h},{w},\n")
        else:
            f.write(f"v{i}.mp4,{20 + rnd(900)},{h},{w},{[24, 25, 30, 60][rnd(4)]}\n")
EOF
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

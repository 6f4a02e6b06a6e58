#!/usr/bin/env bash
# The bad-input contract of the `vbucket` CLI (docs/bad_input_contract.md), for every subcommand
# that `vbucket --help` lists: each malformed file and each impossible flag value must
#   - exit non-zero with the documented code (1 bad data, 2 bad usage), never by a signal
#     (exit code < 128: no crash, no sanitizer abort) and never hang (each call: timeout 20 s);
#   - print exactly one line on stderr, which names the file (and the key or row) or the flag;
#   - leave no output file behind.
# A header-only metadata file is valid input (exit 0). A subcommand whose usage line names a
# positional argument (scan DIR|LIST.txt, decode FILE) gets a good one from good_positional and
# the bad ones of positional_cases. Subcommands and their flags are read
# from --help, so a new subcommand is covered as soon as it is listed; a required flag this
# script cannot fill fails the test (add it to good_value below).
#
#   bash tests/cli/contract.sh <vbucket binary> <absolute path of tests/data>
set -uo pipefail

cli_timeout=20
source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" contract "$@"
mkdir -p "$tmp/in" "$tmp/out"

# The stderr of the last run, shortened for a failure message.
stderr_text() { head -c 600 "$tmp/stderr" | tr '\n' '|'; }

# expect_error NAME CODE OUT PATTERNS -- ARGS...: the call fails with exit code CODE and one
# stderr line containing every PATTERN (fixed strings); OUT (a path or "") must not exist after.
expect_error() {
  local name=$1 code=$2 out=$3
  shift 3
  local patterns=()
  while [[ $1 != "--" ]]; do
    patterns+=("$1")
    shift
  done
  shift
  run "$@"
  checks=$((checks + 1))
  local lines
  lines=$(awk 'END { print NR }' "$tmp/stderr")
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    fail "$name: hang (no answer within 20 s)"
  elif [[ $rc -ge 128 ]]; then
    fail "$name: killed by signal $((rc - 128)): $(stderr_text)"
  elif [[ $rc -eq 0 ]]; then
    fail "$name: exit code 0 for bad input (expected $code)"
  elif [[ $rc -ne $code ]]; then
    fail "$name: exit code $rc, expected $code: $(stderr_text)"
  elif [[ $lines -ne 1 ]]; then
    fail "$name: $lines lines on stderr, expected exactly 1: $(stderr_text)"
  elif [[ -n $out && -e $out ]]; then
    fail "$name: left the output file $out behind"
  else
    local p
    for p in "${patterns[@]}"; do
      if ! grep -qF -- "$p" "$tmp/stderr"; then
        fail "$name: stderr does not name '$p': $(stderr_text)"
        return
      fi
    done
  fi
}

# expect_ok NAME ARGS...: the call succeeds.
expect_ok() {
  local name=$1
  shift
  run "$@"
  checks=$((checks + 1))
  if [[ $rc -ne 0 ]]; then
    fail "$name: exit code $rc, expected 0: $(stderr_text)"
    return 1
  fi
}

# ---------------------------------------------------------------------------------------------
# Good inputs.
# ---------------------------------------------------------------------------------------------
good_config="$data/config_360p_example.json"
good_meta="$tmp/in/meta.csv"
cat >"$good_meta" <<'EOF'
path,num_frames,height,width,fps
a.mp4,300,1080,1920,30
b.jpg,1,720,1280,
c.mp4,500,1920,1080,24
d.mp4,120,360,640,nan
EOF
good_profile="$tmp/in/profile.csv"
awk 'BEGIN {
  print "resolution,frames,batch_size,peak_memory_gib,step_seconds"
  split("1 51 102 204 408", f, " "); split("905 11765 23530 46155 92310", t, " ")
  for (i = 1; i <= 5; i++)
    for (b = 1; b <= 4; b *= 2)
      printf "360p,%d,%d,%.9f,%.9f\n", f[i], b, 3 + b * (1e-4 * t[i] + 1e-10 * t[i] * t[i]),
        0.3 + b * (4e-6 * t[i] + 2e-11 * t[i] * t[i])
}' >"$good_profile"
header_only_meta="$tmp/in/header_only.csv"
echo "path,num_frames,height,width,fps" >"$header_only_meta"
# Valid as pandas and metadata tools write it: integers as floats (51.0), fps 0 (unknown),
# text after a closing quote (Python's csv keeps it).
pandas_metas=("$tmp/in/pandas_floats.csv" "$tmp/in/fps_zero.csv" "$tmp/in/after_quote.csv")
printf '%s\n' 'path,num_frames,height,width,fps' 'a.mp4,51.0,720.0,1280.0,30.0' >"${pandas_metas[0]}"
printf '%s\n' 'path,num_frames,height,width,fps' 'a.mp4,51,720,1280,0' >"${pandas_metas[1]}"
printf '%s\n' 'path,num_frames,height,width,fps,text' 'a.mp4,51,720,1280,30,"hi, you" ' \
  >"${pandas_metas[2]}"

out_counter=0

# Media for the FFmpeg subcommands (scan DIR|LIST.txt, decode FILE), made with the ffmpeg
# command when there is one.
mkdir -p "$tmp/in/media"
have_media=0
if command -v ffmpeg >/dev/null 2>&1 &&
  ffmpeg -nostdin -v error -y -f lavfi -i "testsrc=size=32x24:rate=10:duration=1" -c:v mpeg4 \
    "$tmp/in/media/clip.mp4" </dev/null; then
  have_media=1
  ffmpeg -nostdin -v error -y -f lavfi -i "sine=duration=0.5" -c:a aac "$tmp/in/audio_only.m4a" \
    </dev/null || true
  head -c 1200 "$tmp/in/media/clip.mp4" >"$tmp/in/truncated.mp4"
fi

# good_positional CMD WORD: a valid positional argument (WORD is the usage line's name for it).
# A clean one-rank ledger for `vbucket audit LOG...` (every drawn sample delivered once).
printf '%s\n' '#vbucket-ledger 1' 'E e=0 st=0 n=4 src=1 seed=1' \
  'S e=0 src=0 name=clips first=0 rows=4 drawn=4 draw=all weight=1' \
  'B e=0 s=0 st=0 r=0 w=1 p=0 b=0 ids=2,0' 'B e=0 s=1 st=0 r=0 w=1 p=1 b=0 ids=3,1' \
  >"$tmp/in/rank-00000.ledger"
good_positional() {
  case $1 in
    audit) echo "$tmp/in/rank-00000.ledger" ;;
    scan) echo "$tmp/in/media" ;;
    decode) ((have_media)) && echo "$tmp/in/media/clip.mp4" ;;
    *) return 1 ;;
  esac
}
# Bad positional inputs per command: "name|path|code|pattern" (pattern: a fixed string).
positional_cases() {
  case $1 in
    scan)
      printf 'a\0b\n' >"$tmp/in/binary_list.txt"
      echo "missing|$tmp/in/does-not-exist|1|$tmp/in/does-not-exist"
      echo "binary list|$tmp/in/binary_list.txt|1|$tmp/in/binary_list.txt"
      ;;
    decode)
      : >"$tmp/in/empty.mp4"
      printf 'not a video\n' >"$tmp/in/text.mp4"
      echo "missing|$tmp/in/does-not-exist.mp4|1|$tmp/in/does-not-exist.mp4"
      echo "empty|$tmp/in/empty.mp4|1|$tmp/in/empty.mp4"
      echo "text|$tmp/in/text.mp4|1|$tmp/in/text.mp4"
      echo "directory|$tmp/in|1|$tmp/in"
      [[ -e $tmp/in/truncated.mp4 ]] && echo "truncated|$tmp/in/truncated.mp4|1|$tmp/in/truncated.mp4"
      [[ -e $tmp/in/audio_only.m4a ]] && echo "audio only|$tmp/in/audio_only.m4a|1|audio only"
      ;;
  esac
  return 0
}

# good_value FLAG: a value of FLAG that makes a valid call (for the required flags).
good_value() {
  case $1 in
    config) echo "$good_config" ;;
    meta) echo "$good_meta" ;;
    profile) echo "$good_profile" ;;
    out) echo "$tmp/out/out$out_counter" ;;
    rule) echo "opensora-v2" ;;
    rng) echo "fast" ;;
    seed) echo 42 ;;
    epoch) echo 0 ;;
    world) echo 2 ;;
    rank) echo 0 ;;
    memory-gib) echo 80 ;;
    start) echo 0 ;;
    frames) echo 2 ;;
    interval) echo 1 ;;
    size) echo 16x16 ;;
    *) return 1 ;;
  esac
}

# ---------------------------------------------------------------------------------------------
# Bad files: "name|content" (content as printf's format), written to $tmp/in/<kind>-<name>.
# ---------------------------------------------------------------------------------------------
deep=$(head -c 100000 /dev/zero | tr '\0' '[')
config_cases=(
  'empty|'
  'not_json|hello\n'
  'truncated|{"360p": {"51": [0.5, 8]'
  'trailing_garbage|{"360p": {"51": [0.5, 8]}} x'
  'top_level_array|[1, 2]'
  'empty_object|{}'
  'resolution_not_object|{"360p": 5}'
  'no_frames_keys|{"360p": {}}'
  'unknown_resolution|{"999q": {"51": [0.5, 8]}}'
  'probability_above_1|{"360p": {"51": [1.5, 8]}}'
  'probability_negative|{"360p": {"51": [-0.1, 8]}}'
  'probability_string|{"360p": {"51": ["0.5", 8]}}'
  'probability_nan|{"360p": {"51": [NaN, 8]}}'
  'pair_of_three|{"360p": {"51": [[0.5, 0.5, 0.5], 8]}}'
  'entry_not_pair|{"360p": {"51": 0.5}}'
  'batch_zero|{"360p": {"51": [0.5, 0]}}'
  'batch_negative|{"360p": {"51": [0.5, -3]}}'
  'batch_fraction|{"360p": {"51": [0.5, 1.5]}}'
  'batch_string|{"360p": {"51": [0.5, "4"]}}'
  'batch_huge|{"360p": {"51": [0.5, 9223372036854775808]}}'
  'null_batch_nonzero_p|{"360p": {"51": [0.5, null]}}'
  'frames_not_integer|{"360p": {"abc": [0.5, 8]}}'
  'frames_zero|{"360p": {"0": [0.5, 8]}}'
  'frames_negative|{"360p": {"-5": [0.5, 8]}}'
  'frames_huge|{"360p": {"99999999999": [0.5, 8]}}'
  'duplicate_key|{"360p": {"51": [0.5, 8], "51": [0.2, 4]}}'
  'key_with_newline|{"36\\n0p": {"51": [0.5, 8]}}'
  'invalid_utf8|{"360p\xff": {"51": [0.5, 8]}}'
  'binary|\x00\x01\x02\xff\xfe'
  "deep_nesting|{\"360p\": ${deep}"
)
meta_cases=(
  'empty|'
  'missing_column|num_frames,height,width\n10,360,640\n'
  'duplicate_column|num_frames,height,width,fps,fps\n10,360,640,30,30\n'
  'frames_not_number|num_frames,height,width,fps\nabc,360,640,30\n'
  'frames_zero|num_frames,height,width,fps\n0,360,640,30\n'
  'height_negative|num_frames,height,width,fps\n10,-360,640,30\n'
  'width_huge|num_frames,height,width,fps\n10,360,99999999999999999999,30\n'
  'frames_fraction|num_frames,height,width,fps\n10.5,360,640,30\n'
  'fps_negative|num_frames,height,width,fps\n10,360,640,-1\n'
  'fps_infinite|num_frames,height,width,fps\n10,360,640,inf\n'
  'fps_text|num_frames,height,width,fps\n10,360,640,fast\n'
  'short_row|num_frames,height,width,fps\n10,360,640,30\n10,360\n'
  'long_row|num_frames,height,width,fps\n10,360,640,30,extra\n'
  'unterminated_quote|num_frames,height,width,fps\n"10,360,640,30\n'
  'nul_bytes|num_frames,height,width,fps\n10,3\x0060,640,30\n'
  'nul_in_ignored_column|path,num_frames,height,width,fps\na\x00b.mp4,10,360,640,30\n'
  'binary|\x00\x01\x02\xff\xfe\n'
)
profile_cases=(
  'empty|'
  'missing_column|resolution,frames,batch_size\n360p,51,2\n'
  'batch_not_number|resolution,frames,batch_size,peak_memory_gib,step_seconds\n360p,51,two,10,0.5\n'
  'memory_negative|resolution,frames,batch_size,peak_memory_gib,step_seconds\n360p,51,2,-10,0.5\n'
  'short_row|resolution,frames,batch_size,peak_memory_gib,step_seconds\n360p,51,2\n'
  'binary|\x00\x01\x02\xff\xfe\n'
)

# Rows named in messages for the metadata cases whose problem is in a data row.
declare -A meta_row=(
  [frames_not_number]="row 1" [frames_zero]="row 1" [height_negative]="row 1"
  [width_huge]="row 1" [frames_fraction]="row 1" [fps_negative]="row 1" [fps_infinite]="row 1"
  [fps_text]="row 1" [short_row]="row 2" [long_row]="row 1" [nul_bytes]="row 1"
  [nul_in_ignored_column]="row 1"
)
# Keys named in messages for the config cases whose problem is under one key.
declare -A config_key=(
  [unknown_resolution]="999q" [probability_above_1]="51" [probability_negative]="51"
  [probability_string]="51" [pair_of_three]="51" [entry_not_pair]="51" [batch_zero]="51"
  [batch_negative]="51" [batch_fraction]="51" [batch_string]="51" [batch_huge]="51"
  [null_batch_nonzero_p]="51" [frames_not_integer]="abc" [frames_zero]="0"
  [frames_negative]="-5" [frames_huge]="99999999999" [duplicate_key]="51"
)

write_cases() {  # write_cases KIND CASES...: writes the files, prints "name path" per case
  local kind=$1
  shift
  local c name content
  for c in "$@"; do
    name=${c%%|*}
    content=${c#*|}
    # shellcheck disable=SC2059 # the content is a printf format on purpose (\n, \xNN)
    printf -- "$content" >"$tmp/in/$kind-$name"
    echo "$name $tmp/in/$kind-$name"
  done
}

# Bad values per flag (code 2: bad usage). Flags without an entry get none.
declare -A bad_values=(
  [seed]="-1|abc||1.5| 42"
  [epoch]="-1|abc|18446744073709551616"
  [world]="0|-1|abc|99999999999"
  [rank]="-1|abc|2|99999999999"
  [fps-max]="0|-1|nan|inf|abc|"
  [frame-interval]="0|-1|abc|99999999999999999999"
  [threads]="-1|abc|99999999999999999999"
  [rule]="opensora-v3|"
  [rng]="python|"
  [policy]="shuffle|"
  [start-step]="-1|abc|18446744073709551616"
  [consumed-batches]="-1|abc|18446744073709551616"
  [balance-group]="-1|abc"
  [memory-gib]="0|-1|nan|inf|abc"
  [margin]="1|-0.1|nan|abc"
  [reference]="360p|360p:0|360p:abc|:51"
  [temporal-compression]="0|abc|99999"
  [spatial-compression]="0|abc|99999"
  [start]="-1|abc|99999999999999999999"
  [frames]="0|-1|abc|99999999"
  [interval]="0|-1|abc"
  [size]="0x16|16x0|abc|16|x16|16x|-1x16|99999x16|16x16x16"
  [layout]="hwc|"
  [filter]="lanczos|"
)

# ---------------------------------------------------------------------------------------------
# Top level.
# ---------------------------------------------------------------------------------------------
expect_error "no command" 2 "" "command" -- 
expect_error "unknown command" 2 "" "frobnicate" -- frobnicate --config x

if ! expect_ok "--help" --help; then
  echo "contract: vbucket --help failed; nothing else can be checked" >&2
  exit 1
fi
mapfile -t commands < <(awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }' "$tmp/stdout")
if ((${#commands[@]} == 0)); then
  fail "vbucket --help lists no commands"
fi

# ---------------------------------------------------------------------------------------------
# Every subcommand.
# ---------------------------------------------------------------------------------------------
for cmd in "${commands[@]}"; do
  if ! expect_ok "$cmd --help" "$cmd" --help; then continue; fi
  usage=$(grep -m1 '^usage:' "$tmp/stdout")
  # Required flags: those of the usage line outside [...]; all flags: the flag list.
  mapfile -t required < <(sed 's/\[[^]]*\]//g' <<<"$usage" | grep -o -- '--[a-z][a-z0-9-]*' |
    sed 's/^--//')
  mapfile -t all_flags < <(grep -oE '^  --[a-z][a-z0-9-]*' "$tmp/stdout" | sed 's/^  --//')
  # A positional argument: a word right after the command that is not a flag (scan, decode).
  positional_word=$(awk '{ print $4 }' <<<"$usage")
  positional=""
  if [[ -n $positional_word && $positional_word != -* && $positional_word != "["* ]]; then
    if ! positional=$(good_positional "$cmd" "$positional_word"); then
      echo "contract: $cmd: no good $positional_word (no ffmpeg command to make media?); skipped" >&2
      continue
    fi
  fi

  # base_args [FLAG VALUE]: the required flags with good values, FLAG's replaced by VALUE.
  base_args=()
  base_out=""
  base_ok=1
  make_args() {
    local replace=${1:-} value=${2:-} f v
    base_args=()
    base_out=""
    out_counter=$((out_counter + 1))  # a fresh output path per call
    [[ -n $positional ]] && base_args+=("$positional")
    for f in "${required[@]}"; do
      if [[ $f == "$replace" ]]; then
        v=$value
      elif ! v=$(good_value "$f"); then
        fail "$cmd: contract.sh has no good value for required flag --$f (add it to good_value)"
        base_ok=0
        return 1
      fi
      [[ $f == out ]] && base_out=$v
      base_args+=("--$f" "$v")
    done
  }
  make_args || continue
  if ! expect_ok "$cmd: valid call" "$cmd" "${base_args[@]}"; then continue; fi
  ((base_ok)) || continue

  # Usage errors that every subcommand shares.
  expect_error "$cmd: no flags" 2 "" "--" -- "$cmd"
  make_args
  expect_error "$cmd: unknown flag" 2 "$base_out" "no-such-flag" -- "$cmd" "${base_args[@]}" --no-such-flag 1
  make_args
  expect_error "$cmd: stray argument" 2 "$base_out" "stray" -- "$cmd" "${base_args[@]}" stray
  make_args
  if ((${#required[@]} > 0)); then  # (audit takes its ledgers only, no required flag)
    last_flag=${required[${#required[@]} - 1]}
    expect_error "$cmd: --$last_flag without a value" 2 "" "$last_flag" -- \
      "$cmd" "${base_args[@]:0:${#base_args[@]}-1}"
  fi

  has_flag() {
    local f
    for f in "${all_flags[@]}"; do [[ $f == "$1" ]] && return 0; done
    return 1
  }
  is_required() {
    local f
    for f in "${required[@]}"; do [[ $f == "$1" ]] && return 0; done
    return 1
  }
  # with_flag FLAG VALUE: base args with FLAG set to VALUE (replaced if required, else added).
  with_flag() {
    if is_required "$1"; then
      make_args "$1" "$2"
    else
      make_args
      base_args+=("--$1" "$2")
    fi
  }

  # Bad positional inputs (files and directories the command cannot use).
  if [[ -n $positional ]]; then
    while IFS='|' read -r name path code pattern; do
      [[ -n $name ]] || continue
      saved=$positional
      positional=$path
      make_args
      positional=$saved
      expect_error "$cmd: $positional_word $name" "$code" "$base_out" "$pattern" -- \
        "$cmd" "${base_args[@]}"
    done < <(positional_cases "$cmd")
  fi

  # Malformed files.
  for kind in config meta profile; do
    has_flag "$kind" || continue
    case $kind in
      config) cases=("${config_cases[@]}") ;;
      meta) cases=("${meta_cases[@]}") ;;
      profile) cases=("${profile_cases[@]}") ;;
    esac
    while read -r name path; do
      patterns=("$path")
      if [[ $kind == config && -n ${config_key[$name]:-} ]]; then
        patterns+=("\"${config_key[$name]}\"")
      elif [[ $kind == meta && -n ${meta_row[$name]:-} ]]; then
        patterns+=("${meta_row[$name]}")
      fi
      with_flag "$kind" "$path"
      expect_error "$cmd: --$kind $name" 1 "$base_out" "${patterns[@]}" -- "$cmd" "${base_args[@]}"
    done < <(write_cases "$kind" "${cases[@]}")
    with_flag "$kind" "$tmp/in/does-not-exist.$kind"
    expect_error "$cmd: --$kind missing file" 1 "$base_out" "$tmp/in/does-not-exist.$kind" -- \
      "$cmd" "${base_args[@]}"
    with_flag "$kind" "$tmp/in"
    expect_error "$cmd: --$kind directory" 1 "$base_out" "$tmp/in" -- "$cmd" "${base_args[@]}"
  done
  if has_flag meta; then
    with_flag meta "$header_only_meta"
    expect_ok "$cmd: header-only metadata is valid" "$cmd" "${base_args[@]}"
    for pandas_file in "${pandas_metas[@]}"; do
      with_flag meta "$pandas_file"
      expect_ok "$cmd: $(basename "$pandas_file") is valid metadata" "$cmd" "${base_args[@]}"
    done
  fi

  # Impossible values.
  for flag in "${all_flags[@]}"; do
    [[ -n ${bad_values[$flag]+x} ]] || continue
    IFS='|' read -r -a values <<<"${bad_values[$flag]}|"
    for value in "${values[@]}"; do
      with_flag "$flag" "$value"
      expect_error "$cmd: --$flag '$value'" 2 "$base_out" "$flag" -- "$cmd" "${base_args[@]}"
    done
  done
  if has_flag out; then
    with_flag out "$tmp/no/such/dir/out"
    expect_error "$cmd: --out in a missing directory" 1 "" "$tmp/no/such/dir/out" -- \
      "$cmd" "${base_args[@]}"
    with_flag out "$tmp/in"
    expect_error "$cmd: --out is a directory" 1 "" "$tmp/in" -- "$cmd" "${base_args[@]}"
  fi
done

if ((failures > 0)); then
  echo "contract: $failures of $checks checks FAILED (commands: ${commands[*]})" >&2
  exit 1
fi
echo "contract: $checks checks passed (commands: ${commands[*]})"

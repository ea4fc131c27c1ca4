#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Without a device, every GPU suite skips every test and says why: exit 77, no test passed
# or failed, the reason on the suite's own line (what scripts/gpu-check.sh reads), and no
# mode line (a mode counted without a device would be a verdict about nothing). Where a
# device answers, the suites themselves run under ctest -L gpu: exit 77 here.
# Usage: suites_skip_test.sh NAME=BINARY...
set -uo pipefail
failures=0
for pair in "$@"; do
  name=${pair%%=*} binary=${pair#*=}
  output=$("$binary" 2>&1)
  status=$?
  if grep -qE "^device [0-9]+: " <<<"$output"; then
    echo "$name: a device answered; the suite runs under ctest -L gpu"
    exit 77
  fi
  problems=()
  [ $status -eq 77 ] || problems+=("exit $status, expected 77")
  grep -qE "^$name: skipped: no [A-Za-z]+ device: \[[A-Za-z]+\]\[[A-Za-z0-9 ]+\]" <<<"$output" ||
    problems+=("no line \"$name: skipped: <reason>\" naming the runtime's call and error")
  grep -qE "^\[  (PASSED|FAILED)  \] [1-9]" <<<"$output" && problems+=("a test passed or failed")
  grep -qE "^\[  SKIPPED \] [1-9][0-9]* test\(s\), listed below" <<<"$output" ||
    problems+=("no test reported skipped")
  grep -qE "^$name: (mode |summary: )" <<<"$output" && problems+=("it printed mode or summary lines")
  if [ ${#problems[@]} -eq 0 ]; then
    echo "ok: $name skips: $(grep -E "^$name: skipped: " <<<"$output" | head -n 1)"
  else
    failures=$((failures + 1))
    printf '%s: %s\n' "$name" "${problems[@]}"
    echo "---- output:"; echo "$output"; echo "----"
  fi
done
exit $((failures > 0))

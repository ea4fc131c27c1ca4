#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The one-file distribution, checked as a vendoring project uses it: generated twice
# (same bytes), each file compiled with nothing but `cc -std=c11 -Wall -Wextra -Wpedantic -Werror -c`
# under gcc and clang, a consumer linked and run on the simulated device, the exports of
# a library holding a copy, and two such libraries in one process (no interposition).
# Usage: tests/amalgamation/check.sh WORK_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$1
here=tests/amalgamation
rm -rf "$work" && mkdir -p "$work"
python3 scripts/amalgamate.py --out "$work/dist"
python3 scripts/amalgamate.py --out "$work/again"
diff -r "$work/dist" "$work/again" >/dev/null || { echo "amalgamation: not deterministic" >&2; exit 1; }
ls "$work/dist" | tr '\n' ' ' | sed 's/^/amalgamation: /; s/ $/\n/'
head -n 1 "$work/dist/dlsync.c" | grep -q "SPDX-License-Identifier: Apache-2.0"
grep -q "dlsync $(sed -n 's/^#define DL_SYNC_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
  include/dlsync/version.h | paste -sd.)" "$work/dist/dlsync.h"

for cc in gcc clang; do
  out=$work/$cc
  mkdir -p "$out"
  (cd "$work/dist" && $cc -std=c11 -Wall -Wextra -Wpedantic -Werror -c dlsync.c -o "../$cc/dlsync.o" &&
    $cc -std=c11 -Wall -Wextra -Wpedantic -Werror -c dlsync_sim.c -o "../$cc/dlsync_sim.o")
  # Only the versioned tensor-event deleters keep default visibility in the object.
  visible=$(readelf -sW "$out/dlsync.o" | awk '$5 == "GLOBAL" && $6 == "DEFAULT" && $7 != "UND" {print $8}' | sort | tr '\n' ' ')
  [ "$visible" = "dl_sync_legacy_tensor_event_deleter_v1 dl_sync_tensor_event_deleter_v1 " ] ||
    { echo "amalgamation ($cc): dlsync.o exports: $visible" >&2; exit 1; }
  $cc -std=c11 -Wall -Wextra -Werror -I"$work/dist" $here/smoke.c "$out/dlsync.o" "$out/dlsync_sim.o" \
    -lpthread -ldl -o "$out/smoke"
  "$out/smoke" | sed "s/^/amalgamation ($cc): /"
  for kind in copy exported; do
    defines=()
    [ $kind = exported ] && defines=(-DDL_SYNC_BUILDING_SHARED)
    for x in a b; do
      $cc -std=c11 -Wall -Wextra -Werror -fPIC -shared "${defines[@]}" -I"$work/dist" $here/copy.c \
        "$work/dist/dlsync.c" -o "$out/${kind}_$x.so" -lpthread -ldl
    done
  done
  exports=$(nm -D --defined-only "$out/copy_a.so" | awk '{print $3}' | sort | tr '\n' ' ')
  [ "$exports" = "amalgamation_copy dl_sync_legacy_tensor_event_deleter_v1 dl_sync_tensor_event_deleter_v1 " ] ||
    { echo "amalgamation ($cc): a library with a copy exports: $exports" >&2; exit 1; }
  $cc -std=c11 -Wall -Wextra -Werror -I"$work/dist" $here/interposition.c -o "$out/interposition" -ldl
  "$out/interposition" "$out/copy_a.so" "$out/copy_b.so" | sed "s/^/amalgamation ($cc): /"
  # The negative control: copies that export their API do interpose.
  "$out/interposition" "$out/exported_a.so" "$out/exported_b.so" --expect-interposition >/dev/null
done
echo "amalgamation: passed"

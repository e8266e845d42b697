#!/usr/bin/env bash
# scripts/reproduce end to end at the smallest scale: every preset submitted
# to an embedded coordinator with one real worker, every sweep finished, and
# the report written with one index row per sweep of `ranksweep presets`,
# each DONE with every cell done, and every plot the page shows on disk.
#
#   check_reproduce.sh BUILD_DIR
set -euo pipefail
BUILD_DIR="$1"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT=$(mktemp -d /tmp/ranksweep-reproduce-test.XXXXXX)
LOGS=""
cleanup() {
  rm -rf "$OUT"
  [ -n "$LOGS" ] && rm -rf "$LOGS"
  return 0
}
trap cleanup EXIT
fail() { echo "check_reproduce: $*" >&2; exit 1; }

status=0
env -u RANKSWEEP_ADDR RANKSWEEP_BUILD_DIR="$BUILD_DIR" RANKSWEEP_TORCH_THREADS=1 \
  "$ROOT/scripts/reproduce" --scale 0.01 -o "$OUT/report" >"$OUT/stdout" 2>"$OUT/stderr" ||
  status=$?
LOGS=$(sed -n 's/^logs: //p' "$OUT/stderr")
case "$LOGS" in /tmp/ranksweep-reproduce.*) ;; *) LOGS="" ;; esac
[ "$status" -eq 0 ] || { cat "$OUT/stderr" >&2; fail "scripts/reproduce exited $status"; }

page="$OUT/report/report.md"
# An index row: "| 1 | `sw-...` | NAME | DATASET | STATE | DONE/TOTAL |".
# shellcheck disable=SC2016  # the backquotes are Markdown, not a command
index_row='^\| [0-9]+ \| `sw-[0-9a-f]+` \| '
[ -f "$page" ] || fail "no $page"
want=$("$BUILD_DIR/bin/ranksweep" presets | awk 'NR > 1 { n += $2 } END { print n }')
rows=$(grep -cE "$index_row" "$page" || true)
[ "$rows" -eq "$want" ] || fail "$rows sweeps in the index, want $want (the presets' sweeps)"
done_rows=$(grep -E "$index_row" "$page" |
  awk -F' \\| ' '$5 == "DONE" { split($6, c, "/"); if (c[1] + 0 == c[2] + 0 && c[2] > 0) n++ }
                END { print n + 0 }')
[ "$done_rows" -eq "$want" ] || fail "$done_rows of $want sweeps DONE with every cell done"
sections=$(grep -c '^### Transition ranks$' "$page" || true)
[ "$sections" -eq "$want" ] || fail "$sections sweep sections, want $want"
plots=0
while read -r svg; do
  [ -s "$OUT/report/$svg" ] || fail "the page shows $svg, which is not written"
  plots=$((plots + 1))
done < <(sed -n 's/^!\[.*\](\(.*\.svg\))$/\1/p' "$page")
[ "$plots" -ge "$want" ] || fail "$plots plots, want at least one per sweep ($want)"
grep -q "^wrote $OUT/report/report.md ($want sweeps, $plots plots)$" "$OUT/stderr" ||
  fail "the report's last line is not the page and its counts"
echo "ok: $want sweeps DONE, $plots plots"

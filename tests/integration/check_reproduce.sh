#!/usr/bin/env bash
# scripts/reproduce end to end at the smallest scale with --one-recipe: every
# preset submitted to an embedded coordinator with one real worker, every
# sweep finished, and the report written with one index row per sweep of
# `ranksweep presets`, each DONE with every cell done, the ood sweeps with
# one recipe (a third of their cells, no recipe labels), and every plot the
# page shows on disk. First, a bad --slots is refused before anything starts.
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
env -u RANKSWEEP_ADDR RANKSWEEP_BUILD_DIR="$BUILD_DIR" "$ROOT/scripts/reproduce" --slots 0 \
  -o "$OUT/never" >"$OUT/stdout" 2>"$OUT/stderr" || status=$?
[ "$status" -eq 1 ] || fail "--slots 0 exited $status, want 1"
[ "$(cat "$OUT/stderr")" = 'reproduce: --slots must be an integer in 1..64, got "0"' ] ||
  fail "--slots 0 said: $(cat "$OUT/stderr")"
[ ! -e "$OUT/never" ] || fail "--slots 0 wrote a report"

status=0
env -u RANKSWEEP_ADDR RANKSWEEP_BUILD_DIR="$BUILD_DIR" RANKSWEEP_TORCH_THREADS=1 \
  "$ROOT/scripts/reproduce" --scale 0.01 --one-recipe -o "$OUT/report" \
  >"$OUT/stdout" 2>"$OUT/stderr" || status=$?
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
# The ood-tokens presets sweep three learning rates; --one-recipe keeps the
# first, so each has a third of its cells and the page no lr labels.
cells() {  # the cells `submit --dry-run` counts for preset $1 (flags $2...)
  "$BUILD_DIR/bin/ranksweep" submit --preset "$1" --scale 0.01 "${@:2}" --dry-run 2>&1 >/dev/null |
    sed -n "s/^$1-s0.01: \([0-9]*\) cells.*$/\1/p"
}
for p in ood-tokens-small ood-tokens-medium ood-tokens-large; do
  one=$(cells "$p" --one-recipe)
  all=$(cells "$p")
  if [ -z "$one" ] || [ $((one * 3)) -ne "$all" ]; then
    fail "$p: $one cells of $all with --one-recipe, want a third"
  fi
  total=$(grep -E "$index_row" "$page" | awk -F' \\| ' -v n="$p-s0.01" \
    '$3 == n { split($6, c, "/"); print c[2] + 0 }')
  [ "$total" = "$one" ] || fail "$p-s0.01 has \"$total\" cells in the index, want $one"
done
! grep -q "lr=" "$page" || fail "a recipe label on the page: $(grep -m1 "lr=" "$page")"
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

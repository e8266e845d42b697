#!/usr/bin/env bash
# cmake/BuildId.cmake: the build id is VERSION+COMMIT.HASH, with the commit
# and the source hash read when the script runs (every build), so that a new
# commit or an uncommitted edit changes it, and an unchanged id leaves the
# header untouched (nothing recompiles).
set -euo pipefail
script="$(cd "$(dirname "$0")/../.." && pwd)/cmake/BuildId.cmake"
tmp=$(mktemp -d)
export GIT_CEILING_DIRECTORIES="$tmp"  # "plain" below must not find a repository above it
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

repo="$tmp/repo"
mkdir -p "$repo"
git -C "$repo" init -q
echo "int f() { return 1; }" >"$repo/trainer.cc"
echo "$repo/trainer.cc" >"$tmp/sources.txt"
g() { git -C "$repo" -c user.name=test -c user.email=test@example.invalid "$@"; }
g add trainer.cc
g commit -qm one
id() {
  cmake -DVERSION=9.8.7 -DSOURCE_DIR="$1" -DSOURCES_FILE="$tmp/sources.txt" \
    -DOUT="$tmp/id.h" -P "$script"
  sed -n 's/^#define RANKSWEEP_BUILD_ID "\(.*\)"$/\1/p' "$tmp/id.h"
}

rev1=$(git -C "$repo" rev-parse --short=12 HEAD)
id1=$(id "$repo")
[[ "$id1" =~ ^9\.8\.7\+${rev1}\.[0-9a-f]{12}$ ]] || fail "first id '$id1' is not 9.8.7+$rev1.<hash>"

# Same commit, same sources: same id, header not rewritten.
touch -d "2000-01-01" "$tmp/id.h"
[ "$(id "$repo")" = "$id1" ] || fail "the id changed without a change"
[ "$(stat -c %Y "$tmp/id.h")" = "$(date -d 2000-01-01 +%s)" ] || fail "an unchanged id rewrote the header"

# A new commit (sources unchanged): new commit in the id, same hash.
g commit -q --allow-empty -m two
rev2=$(git -C "$repo" rev-parse --short=12 HEAD)
id2=$(id "$repo")
[ "$id2" = "9.8.7+${rev2}.${id1##*.}" ] || fail "after a commit: '$id2', want 9.8.7+$rev2.${id1##*.}"

# An uncommitted edit of a source: same commit, new hash.
echo "int f() { return 2; }" >"$repo/trainer.cc"
id3=$(id "$repo")
[[ "$id3" == "9.8.7+${rev2}."* ]] || fail "after an edit: '$id3' lost the commit"
[ "${id3##*.}" != "${id1##*.}" ] || fail "an edited source kept the hash"

# No git repository: "+unknown".
plain="$tmp/plain"
mkdir -p "$plain"
id4=$(id "$plain")
[ "$id4" = "9.8.7+unknown.${id3##*.}" ] || fail "without git: '$id4', want 9.8.7+unknown.${id3##*.}"
echo "build id checks passed: $id1 -> $id2 -> $id3; $id4"

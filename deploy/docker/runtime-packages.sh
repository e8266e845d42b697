#!/bin/sh
# Prints, one per line, the dpkg packages that own the shared libraries the
# given executables load (ldd), sorted and without the architecture suffix.
# Libraries that belong to no package (a LibTorch unpacked under /opt) are
# skipped; so is libcuda, which the NVIDIA driver provides at run time.
# Used by Dockerfile.cuda to install a runtime stage's libraries, and by
# tests/deploy/check_dockerfiles.py (with --bin-dir) to check Dockerfile's lists.
set -eu
[ $# -gt 0 ] || { echo "usage: $0 EXECUTABLE..." >&2; exit 64; }
missing=$(ldd "$@" | awk '$2 == "=>" && $3 == "not" { print $1 }' \
            | grep -v '^libcuda\.so' | sort -u || true)
if [ -n "$missing" ]; then
  echo "runtime-packages: unresolved libraries: $missing" >&2
  exit 1
fi
# dpkg records a path either under /lib or under /usr/lib, and ldd may print
# either one; BLAS and LAPACK are reached through /etc/alternatives symlinks.
# So ask dpkg (once, it is slow) about every spelling of every library.
ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
while read -r lib; do
  rel=${lib#/usr}
  real=$(realpath "$lib")
  printf '%s\n' "$rel" "/usr$rel" "$real" "${real#/usr}"
done | sort -u | xargs -r dpkg -S 2>/dev/null | grep -v '^diversion ' | cut -d: -f1 | sort -u

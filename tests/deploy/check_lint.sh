#!/usr/bin/env bash
# Lints the deployment files without a container engine:
#   - yamllint --strict (with .yamllint) on every YAML file of the repository;
#   - shellcheck on the deployment shell scripts.
# Exits non-zero, naming the files and problems, when any check fails.
set -euo pipefail
cd "$(dirname "$0")/../.."

fail() { echo "FAIL: $*" >&2; exit 1; }

command -v yamllint >/dev/null 2>&1 ||
  fail "yamllint not found: install Debian's yamllint package (scripts/install-deps)"
command -v shellcheck >/dev/null 2>&1 ||
  fail "shellcheck not found: install Debian's shellcheck package (scripts/install-deps)"

# Fuzz corpora are deliberately odd inputs, not files anyone maintains.
mapfile -t yaml_files < <(find . -type d \( -name '.git' -o -name 'build*' -o -name node_modules \
                                    -o -name '.whl' -o -name '.gl' -o -path ./fuzz/corpus \) -prune -o \
                                 -type f \( -name '*.yml' -o -name '*.yaml' -o -name .yamllint \) \
                                 -print | sort)
[ ${#yaml_files[@]} -gt 0 ] || fail "no YAML files found"
echo "yamllint $(yamllint --version | awk '{print $2}') on ${#yaml_files[@]} files:"
printf '  %s\n' "${yaml_files[@]}"
yamllint --strict -c .yamllint "${yaml_files[@]}" || fail "yamllint found problems (above)"
echo "ok: yamllint"

shell_files=(deploy/docker/entrypoint.sh deploy/docker/runtime-packages.sh
             deploy/slurm/*.sbatch tests/deploy/*.sh)
echo "shellcheck $(shellcheck --version | awk '/^version/ {print $2}') on ${#shell_files[@]} files:"
printf '  %s\n' "${shell_files[@]}"
shellcheck "${shell_files[@]}" || fail "shellcheck found problems (above)"
echo "ok: shellcheck"
echo "lint checks passed"

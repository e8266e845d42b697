#!/usr/bin/env bash
# Validates docker-compose.yml without a container engine:
#   - `docker-compose config -q` (Debian's docker-compose 1.29) with and
#     without the gpu profile;
#   - every service's build points at a Dockerfile that exists and at a stage
#     (`target`) that Dockerfile defines;
#   - no service sets a literal token in its environment (secrets or
#     ${VAR} interpolation from the host only).
# Exits non-zero, with the reason, on the first kind of failure.
set -euo pipefail
cd "$(dirname "$0")/../.."

fail() { echo "FAIL: $*" >&2; exit 1; }

command -v docker-compose >/dev/null 2>&1 ||
  fail "docker-compose not found: install Debian's docker-compose package (scripts/install-deps)"
echo "using $(docker-compose version --short 2>/dev/null || docker-compose version | head -n1)"

# Interpolation defaults must be enough: run without the caller's overrides.
unset RANKSWEEP_IMAGE_PREFIX RANKSWEEP_TAG RANKSWEEP_PORT RANKSWEEP_METRICS_PORT RANKSWEEP_GPU_SLOTS \
  RANKSWEEP_CUDA_ARCH
export COMPOSE_PROJECT_NAME=ranksweep-check

out=$(docker-compose -f docker-compose.yml config -q 2>&1) ||
  fail "docker-compose config -q rejects docker-compose.yml: $out"
[ -z "$out" ] || fail "docker-compose config -q warns: $out"
echo "ok: docker-compose config -q"

out=$(docker-compose -f docker-compose.yml --profile gpu config -q 2>&1) ||
  fail "docker-compose --profile gpu config -q rejects docker-compose.yml: $out"
[ -z "$out" ] || fail "docker-compose --profile gpu config -q warns: $out"
echo "ok: docker-compose --profile gpu config -q"

services=$(docker-compose -f docker-compose.yml --profile gpu config --services)
for want in ranksweepd worker worker-gpu; do
  grep -qx "$want" <<<"$services" || fail "service $want missing from docker-compose.yml"
done
echo "ok: services: $(tr '\n' ' ' <<<"$services")"

# The resolved file, read with the interpreter docker-compose itself runs on
# (it has PyYAML), to check builds, secrets and environment.
py=$(head -n1 "$(command -v docker-compose)" | sed -n 's/^#! *\([^ ]*python[^ ]*\).*/\1/p')
[ -n "$py" ] || py=/usr/bin/python3
# shellcheck disable=SC2016  # the single-quoted program is Python, not shell
docker-compose -f docker-compose.yml --profile gpu config | "$py" -c '
import os, re, sys, yaml
cfg = yaml.safe_load(sys.stdin)
problems = []
for name, svc in sorted(cfg["services"].items()):
    env = svc.get("environment") or {}
    for key, value in (env.items() if isinstance(env, dict) else []):
        if re.search("TOKEN", key) and not key.endswith("_FILE") and value:
            problems.append(f"service {name} sets a literal {key}; use the worker_token secret or ${{VAR}} from the host")
    build = svc.get("build")
    if not build:
        continue
    dockerfile = os.path.join(build["context"], build.get("dockerfile", "Dockerfile"))
    if not os.path.isfile(dockerfile):
        problems.append(f"service {name}: no Dockerfile {dockerfile}")
        continue
    stages = re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", open(dockerfile).read(), re.M | re.I)
    target = build.get("target")
    if target and target not in stages:
        problems.append(f"service {name}: target {target} is not a stage of {dockerfile} ({stages})")
    else:
        print(f"ok: service {name} builds {os.path.relpath(dockerfile)} target {target or stages[-1]}")
for name, sec in (cfg.get("secrets") or {}).items():
    f = sec.get("file", "")
    if f and not os.path.relpath(f).startswith("deploy/secrets/"):
        problems.append(f"secret {name} file {f} is outside the gitignored deploy/secrets/")
    else:
        print(f"ok: secret {name} comes from {os.path.relpath(f)} (gitignored)")
for p in problems:
    print("FAIL: " + p, file=sys.stderr)
sys.exit(1 if problems else 0)
' || fail "docker-compose.yml does not match the Dockerfiles (see above)"

git check-ignore -q deploy/secrets/worker_token 2>/dev/null ||
  [ ! -d .git ] || fail "deploy/secrets/worker_token is not gitignored"
grep -qx '/deploy/secrets/' .dockerignore ||
  fail ".dockerignore does not keep deploy/secrets/ out of the build context"
echo "ok: tokens are gitignored and outside the build context"
echo "compose checks passed"

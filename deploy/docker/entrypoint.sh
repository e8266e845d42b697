#!/bin/sh
# Entry point of every ranksweep image: runs the given program, first loading
# the bearer token from RANKSWEEP_TOKEN_FILE (a compose secret, a mounted k8s
# Secret) into RANKSWEEP_TOKEN when that is not set already. The token thus
# never sits in the image, in `docker inspect` or on a command line.
set -eu
if [ -z "${RANKSWEEP_TOKEN:-}" ] && [ -n "${RANKSWEEP_TOKEN_FILE:-}" ]; then
  if [ ! -r "$RANKSWEEP_TOKEN_FILE" ]; then
    echo "ranksweep-entrypoint: cannot read RANKSWEEP_TOKEN_FILE=$RANKSWEEP_TOKEN_FILE" \
         "as uid $(id -u); make it readable by uid 10001 (see docs/DEPLOY.md)" >&2
    exit 78
  fi
  RANKSWEEP_TOKEN=$(tr -d ' \t\r\n' < "$RANKSWEEP_TOKEN_FILE")
  if [ -z "$RANKSWEEP_TOKEN" ]; then
    echo "ranksweep-entrypoint: $RANKSWEEP_TOKEN_FILE is empty" >&2
    exit 78
  fi
  export RANKSWEEP_TOKEN
fi
exec "$@"

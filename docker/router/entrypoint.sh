#!/bin/sh
# `smg launch "$@"`, with the API key read from the file SPECSERVE_ROUTER_API_KEY_FILE names (an
# empty file: no key, the router and its workers open):
# the router takes the key only as --api-key (no environment variable, no file), so it is
# added here rather than in the container's command, which `docker inspect` shows.
set -eu
if [ -n "${SPECSERVE_ROUTER_API_KEY_FILE:-}" ]; then
  if [ ! -r "$SPECSERVE_ROUTER_API_KEY_FILE" ]; then
    echo "specserve-router: SPECSERVE_ROUTER_API_KEY_FILE=$SPECSERVE_ROUTER_API_KEY_FILE is not readable by uid $(id -u); mount the key file readable by the router's user" >&2
    exit 2
  fi
  key=$(cat "$SPECSERVE_ROUTER_API_KEY_FILE")
  if [ -n "$key" ]; then
    exec smg launch "$@" --api-key "$key"
  fi
fi
exec smg launch "$@"

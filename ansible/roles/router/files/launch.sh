#!/bin/sh
# The router's worker list is the deployment's rotation, read each time the process starts:
# the file SPECSERVE_ROUTER_ROTATION_FILE names (one http(s)://HOST:PORT a line, '#' comments;
# ansible/plugins/modules/specserve_rotation.py writes it) becomes --worker-urls. So a router
# that Docker restarts after a crash, or that a deploy starts again after `docker kill`, comes
# back with the nodes the deploy last put in, never with one out for its replacement; a list
# in the container's command would bring every node back. Then the image's entrypoint
# (specserve-router: smg launch, the API key from its file).
set -eu
set -f
file=${SPECSERVE_ROUTER_ROTATION_FILE:-}
if [ -z "$file" ] || [ ! -r "$file" ]; then
  echo "specserve-router: the rotation file '${file}' (SPECSERVE_ROUTER_ROTATION_FILE) is not readable by uid $(id -u); re-run the deploy, which writes it (router_dir/rotation)" >&2
  exit 2
fi
urls=""
count=0
malformed=0
while IFS= read -r line || [ -n "$line" ]; do
  # Surrounding blanks (a CR included) go, as in the module's reader.
  line=${line#"${line%%[![:space:]]*}"}
  line=${line%"${line##*[![:space:]]}"}
  case "$line" in
    '' | '#'*) continue ;;
  esac
  if printf '%s\n' "$line" | grep -Eq '^https?://[^/[:space:]]+:[0-9]+$'; then
    urls="$urls $line"
    count=$((count + 1))
  else
    malformed=$((malformed + 1))
  fi
done < "$file"
echo "specserve-router: $count worker(s) from the rotation $file, $malformed malformed line(s) skipped" >&2
if [ "$count" -gt 0 ]; then
  # shellcheck disable=SC2086 # validated URLs, no spaces; globbing is off (set -f)
  set -- "$@" --worker-urls $urls
fi
exec specserve-router "$@"

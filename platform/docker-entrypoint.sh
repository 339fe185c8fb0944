#!/bin/sh
# memdesk container entrypoint: optional migrations, a clean metrics dir, then
# exec the command (so it receives SIGTERM from `docker stop` directly).
set -eu

# prometheus_client multiprocess mode keeps one file per process in this dir
# and sums them at scrape time. Files left by a previous run would be added
# to the new counters (and a reused pid would even reopen its old file), so
# the dir must start empty. It must also be private to this container: pids
# of different containers collide, so never share it through a volume.
if [ -n "${PROMETHEUS_MULTIPROC_DIR:-}" ]; then
    mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
    find "$PROMETHEUS_MULTIPROC_DIR" -mindepth 1 -maxdepth 1 -name '*.db' -delete
fi

# Compose runs migrations in its one-shot `migrate` service instead; this
# switch is for platforms without one (a single container, a Kubernetes init
# container running the same image).
if [ "${MEMDESK_MIGRATE:-0}" = "1" ]; then
    python manage.py migrate --noinput
fi

exec "$@"

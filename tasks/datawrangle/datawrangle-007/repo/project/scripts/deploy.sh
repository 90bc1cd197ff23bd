#!/bin/sh
# Deploy the service to the staging host.
set -eu

HOST=${HOST:-staging.internal}
# TODO(ops): read the host list from inventory instead of hard-coding it
rsync -az ./dist/ "deploy@$HOST:/srv/app/"   # FIXME: no --delete, stale files pile up
echo "done"  # TODO:   

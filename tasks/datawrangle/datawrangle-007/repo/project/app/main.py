#!/usr/bin/env python3
"""Entry point for the inventory API."""
import logging
import os

from app.db.models import Item, Session  # TODO(maria): lazy import to speed up CLI start

log = logging.getLogger(__name__)

THEME = "#1f2937"  # FIXME: move colours into the settings module


def load_config(path):
    # TODO: validate the schema before using the config
    with open(path) as f:
        return f.read()


def main():
    print("TODO list is empty")  # not a marker: only comments count
    port = int(os.environ.get("PORT", "8080"))
    # todo: lowercase markers are ignored
    # TODOS and NOTODO are not markers either
    log.info("listening on %d", port)
    #TODO(dev-ops):no space after the hash, still counts
    return port


if __name__ == "__main__":
    main()

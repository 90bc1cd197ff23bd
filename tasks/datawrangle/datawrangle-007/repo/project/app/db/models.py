from dataclasses import dataclass


@dataclass
class Item:
    sku: str
    name: str
    qty: int = 0  # TODO(maria): qty must never go negative


class Session:
    def __init__(self, url):
        self.url = url  # XXX: not a tracked marker

    def close(self):
        pass  # FIXME: connections leak when close() raises
        # TODO: FIXME: both tags on one line - the first one wins

"""Counts a real server's API-token lookups in the database (tests and bench/connection_flood.py).

Put this directory first on PYTHONPATH and name a file in CORRAL_COUNT_TOKEN_LOOKUPS: every
`TokenStore.lookup` the server makes adds a line to that file. Nothing happens without the variable.
"""

import os

_PATH = os.environ.get("CORRAL_COUNT_TOKEN_LOOKUPS")
if _PATH:
    from corral.store.tokens import TokenStore

    _lookup = TokenStore.lookup

    def _counted(self, *args, **kwargs):
        with open(_PATH, "a") as f:
            f.write("lookup\n")
        return _lookup(self, *args, **kwargs)

    TokenStore.lookup = _counted

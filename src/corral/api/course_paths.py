"""Where the course tracker's routes live (`api/course_tracker.py`), for the middleware that guards them.

A module of its own: `api/identity.py` needs the paths and `api/course_tracker.py` needs `identity`.
"""

from __future__ import annotations

COURSE_PREFIX = "/tracker"
"""`TRACKER_API=http://host:8765/tracker`."""
COURSE_BARE_PATHS = ("/experiments/", "/runs/", "/webhooks/")
"""The same routes at the root (`TRACKER_API=http://host:8765`): POSTs only, so they need a caller
where the dashboard's GET pages (`/runs/{id}`) need none."""
COURSE_OPEN_PATHS = (f"{COURSE_PREFIX}/webhooks/", "/webhooks/")
"""The epilog's routes check their own credential: the webhook secret, or a caller as any route's."""

"""The composition root: the one place that wires a server together (stores, backend, services, monitor, API).

It sits above the edges it builds (`api`, `web`) and below `cli`, whose `corral up` runs it; nothing else imports it.
"""

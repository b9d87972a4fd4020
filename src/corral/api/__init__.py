"""The HTTP API: FastAPI routers, request schemas, and the one mapping of errors to statuses."""

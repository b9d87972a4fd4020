"""The Python client for a corral server (what the CLI uses too).

    from corral import Client
    client = Client()                      # finds the server of ~/.corral (or $CORRAL_URL)
    job = client.submit(["python", "train.py"], gpus=2, time="2h")
    client.wait(job["id"])

Here: `Client` (`client`: a method per API call), on `transport.Transport` (the connection: `http.client` over
TCP or the home's Unix socket); an error answer comes back as corral's own error (`corral.errors.error_from_answer`).
`TERMINAL` (the ended states' names) and `find_server` are public too.
"""

from __future__ import annotations

from corral.client.client import TERMINAL, Client
from corral.server_address import find_server

__all__ = ["TERMINAL", "Client", "find_server"]

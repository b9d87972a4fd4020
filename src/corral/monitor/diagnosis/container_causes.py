"""Causes of a container job that never ran its program: its image could not be brought in, or it asked
to see a path of the host its owner may not open."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from corral.core.monitoring.findings import CRITICAL, Finding
from corral.monitor.diagnosis.log_lines import LogLine, cited, clip, matching

_PULL_FAILED = re.compile(r"^corral: cannot bring in the image ")


def image_unavailable(job: Mapping[str, Any], lines: Sequence[LogLine]) -> Finding | None:
    reason = job.get("reason") or ""
    if job.get("state") != "FAILED" or not job.get("image") or not reason.startswith("cannot bring in the image"):
        return None
    matches = matching(lines, _PULL_FAILED)
    evidence = cited(matches) if matches else [clip(reason)]
    image = str(job["image"])
    return Finding(
        cause="image_unavailable", title=f"Its image {image} could not be brought in",
        evidence=tuple(evidence),
        fixes=(
            "Check the image's name and tag (podman search, or the registry's page); Pyxis's registry#image is "
            "taken too.",
            "A registry image is pulled by the server's machine: it must reach the registry (network, proxy) "
            "and, for a private one, be logged in (the admin's podman login, or REGISTRY_AUTH_FILE).",
            "Or bring the image yourself: podman save -o image.tar IMAGE on a machine that has it, then "
            "--container-image docker-archive:/path/to/image.tar (a file you may read).",
        ),
        severity=CRITICAL,
    )


def mount_refused(job: Mapping[str, Any]) -> Finding | None:
    reason = job.get("reason") or ""
    if job.get("state") != "FAILED" or not job.get("image") or not reason.startswith(("container_mounts: ", "image: ")):
        return None
    field = reason.partition(":")[0]
    return Finding(
        cause="container_path_refused", title="Its container asked for a host path its owner may not open",
        evidence=(clip(reason),),
        fixes=(
            f"Change --{field.replace('_', '-') if field != 'image' else 'container-image'}: a container sees "
            "only host paths you may read yourself, outside corral's home.",
            "Copy the data somewhere you own, or ask its owner for read access (chmod, a shared group).",
        ),
        severity=CRITICAL,
    )

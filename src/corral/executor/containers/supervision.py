"""A container job's supervisor's part before and after the run: `check_container` (every host path the
container would see opened as the owner, and held for its root runtime) and `end_container` (the container
and its leftover cgroups removed; why it could not run, when it could not).

The supervisor imports this for a container job alone.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.executor import files

if TYPE_CHECKING:
    from corral.executor.containers.held import HeldPaths
    from corral.executor.launch_config import LaunchConfig


def check_container(config: LaunchConfig, job_dir: str) -> tuple[HeldPaths | None, str | None]:
    """What the job's container is given of the host, or why it may not start: every path it would see of the
    host (and an image file) must be the owner's to open, and none may be corral's own but the job's checkpoints
    and script.

    The runtime runs as root, so this is the only place the owner's rights are asked; what was opened
    is what the runtime gets (`containers.held`), held until the supervisor's `finish`."""
    from corral.executor.containers import ContainerLaunch
    from corral.executor.containers.held import hold_paths
    from corral.executor.containers.mounts import MountRefused

    launch = ContainerLaunch.from_json(config.container or {})
    home = os.path.dirname(os.path.dirname(os.path.abspath(job_dir)))
    allowed = (config.env.get("CORRAL_CHECKPOINT_DIR", ""), os.path.join(job_dir, files.SCRIPT))
    try:
        return hold_paths(launch, config, job_dir, home, allowed), None
    except MountRefused as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"cannot hand the container runtime the job's host paths: {exc}"


def end_container(config: LaunchConfig, job_dir: str, status: int,
                  log: Callable[[str], None]) -> tuple[str | None, float | None]:
    """Remove what is left of the container; why it could not run, when it could not, and the seconds it took to
    bring the image in (None: not timed)."""
    import subprocess

    from corral.executor.containers import ContainerLaunch, driver_for
    from corral.executor.containers.start import CANNOT_START, read_state

    launch = ContainerLaunch.from_json(config.container or {})
    remove = driver_for(launch.runtime, launch.rootless).remove_argv(launch)
    if remove is not None:
        try:
            subprocess.run(remove, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=sys.stderr,
                           env=dict(launch.runtime_env), timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log(f"cannot remove the container {launch.name}: {exc}")
    for leftover in launch.leftover_cgroups:
        from corral.executor.cgroups import remove_tree

        try:
            remove_tree(leftover)
        except OSError as exc:
            log(f"cannot remove the cgroup {leftover}: {exc}")
    state = read_state(job_dir)
    pull_s = state.get("pull_s")
    image_pull_s = float(pull_s) if isinstance(pull_s, int | float) else None
    if isinstance(state.get("error"), str):
        return str(state["error"]), image_pull_s
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == CANNOT_START:
        return (f"{launch.runtime} could not run the job's container (exit status {CANNOT_START}); "
                "its own message is in the job's stderr"), image_pull_s
    return None, image_pull_s

"""A container job's own process, between the supervisor's fork and the runtime: bring the image in
when it is absent (its progress in the job's stderr, its time recorded apart from the run), write the
container's environment, then exec the runtime's `run`.

It runs in the forked child, after the job's stdio and cgroup are in place: a cancel or the time limit
during a pull reaches the pull as it would the job. Standard library only (the supervisor's import).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, NoReturn

from corral.executor.containers import ContainerLaunch, Driver, ImageFacts, driver_for

if TYPE_CHECKING:
    from corral.executor.cgroups import JobCgroup
    from corral.executor.launch_config import LaunchConfig

STATE = "container.json"
"""In the job's directory: the image, whether it was pulled and how long that took, or why it failed."""
ENV_FILE = "container.env"
CANNOT_START = 125
"""The job's exit status when its image cannot be brought in (Podman's and Docker's own for their errors)."""
PULL_TAIL_LINES = 20


class ImageUnavailable(Exception):
    """The image is not here and could not be brought in; the message says why, in the runtime's words."""


def exec_container(config: LaunchConfig, cgroup: JobCgroup | None, job_dir: str,
                   launch: ContainerLaunch | None = None) -> NoReturn:
    """In the forked child: become the runtime running the job's argv in its image. Never returns.

    `launch`: the job's, with its host paths as the supervisor holds them (`held.hold_paths`)."""
    from corral.executor.job_owner import become_owner

    assert config.container is not None
    launch = launch or ContainerLaunch.from_json(config.container)
    driver = driver_for(launch.runtime, launch.rootless)
    job_env = dict(config.env)
    if driver.runs_as_owner:
        job_env = become_owner(config, cgroup)  # the runtime itself is the owner's process
        runtime_env = dict(job_env)
    else:
        runtime_env = dict(launch.runtime_env)
        owner = config.run_as
        if owner:
            job_env.update(HOME=owner["home"], USER=owner["name"], LOGNAME=owner["name"], SHELL=owner["shell"])
    state: dict[str, object] = {"image": launch.image, "runtime": launch.runtime}
    image = driver.reference(launch.held_image or launch.image)
    facts = ImageFacts()
    if driver.inspects:
        began = time.monotonic()
        try:
            image, facts, pulled = bring_in(driver, launch, image, runtime_env)
        except ImageUnavailable as exc:
            state["error"] = f"cannot bring in the image {launch.image} with {launch.runtime}: {exc}"
            _write_state(job_dir, state)
            _say(f"corral: {state['error']}")
            os._exit(CANNOT_START)
        state.update(pulled=pulled, pull_s=round(time.monotonic() - began, 3) if pulled else 0.0)
    _write_state(job_dir, state)
    env = container_environment(job_env, facts.env_names, launch.env_names)
    if driver.passes_environment:
        # Apptainer passes its own environment in, the image's winning; a --container-env name wins over that
        runtime_env.update({f"APPTAINERENV_{k}": env[k] for k in launch.env_names if k in env})
        runtime_env.update({f"SINGULARITYENV_{k}": env[k] for k in launch.env_names if k in env})
        env_file = None
    else:
        env_file = os.path.join(job_dir, ENV_FILE)
        _write_env_file(env_file, env)
    if driver.runs_as_owner:
        try:
            os.chdir(config.cwd)
        except OSError as exc:
            _say(f"corral: cannot enter the working directory {config.cwd}: {exc.strerror}")
            os._exit(1)
    argv = driver.run_argv(launch, image, config.argv, env_file, facts.entrypoint)
    try:
        os.execve(argv[0], argv, runtime_env)
    except OSError as exc:
        _say(f"corral: cannot run the container runtime {argv[0]}: {exc.strerror}")
        os._exit(CANNOT_START)


def bring_in(driver: Driver, launch: ContainerLaunch, image: str,
             env: Mapping[str, str]) -> tuple[str, ImageFacts, bool]:
    """The image as the run names it, what the runtime says of it, and whether it had to be pulled.

    Raises:
        ImageUnavailable: it is absent and the pull failed (no such image, no network, no permission).
    """
    if launch.archive is None:
        facts = _inspect(driver, launch, image, env)
        if facts is not None:
            return image, facts, False
    _say(f"corral: pulling {launch.image} with {launch.runtime}")
    began = time.monotonic()
    pulled = _pull(driver, launch, image, env)
    facts = _inspect(driver, launch, pulled, env)
    if facts is None:
        raise ImageUnavailable(f"{launch.runtime} pulled it, but cannot find {pulled} after the pull")
    _say(f"corral: pulled {launch.image} in {time.monotonic() - began:.1f} s")
    return pulled, facts, True


def container_environment(job_env: Mapping[str, str], image_env: tuple[str, ...],
                          forced: tuple[str, ...]) -> dict[str, str]:
    """The job's variables inside: the image's own win (its PATH, its CUDA), as in Pyxis, but for those the
    job names with --container-env, and corral's and Slurm's, which say where the job runs."""
    return {key: value for key, value in job_env.items()
            if key not in image_env or key in forced or key.startswith(("CORRAL_", "SLURM_", "CUDA_VISIBLE"))}


def _inspect(driver: Driver, launch: ContainerLaunch, image: str, env: Mapping[str, str]) -> ImageFacts | None:
    try:
        done = subprocess.run(driver.inspect_argv(launch, image), stdin=subprocess.DEVNULL, capture_output=True,
                              env=dict(env), timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ImageUnavailable(f"cannot ask {launch.binary} about it: {exc}") from None
    if done.returncode != 0:
        return None
    try:
        return ImageFacts.from_config(json.loads(done.stdout.decode(errors="replace").strip() or "null"))
    except ValueError:
        return ImageFacts()


def _pull(driver: Driver, launch: ContainerLaunch, image: str, env: Mapping[str, str]) -> str:
    """Pull, its output passed on to the job's stderr line by line; the pulled image's id."""
    try:
        child = subprocess.Popen(driver.pull_argv(launch, image), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, env=dict(env))
    except OSError as exc:
        raise ImageUnavailable(f"cannot run {launch.binary}: {exc.strerror}") from None
    assert child.stdout is not None
    tail: list[str] = []
    for raw in child.stdout:
        os.write(2, raw)
        line = raw.decode(errors="replace").strip()
        if line:
            tail = [*tail[-PULL_TAIL_LINES:], line]
    if child.wait() != 0 or not tail:
        errors = [line for line in tail if line.lower().startswith("error")] or tail[-1:] or ["the pull failed"]
        raise ImageUnavailable(errors[-1])
    return tail[-1]  # Podman and Docker end with the image's id (Docker with its digest line)


def _write_env_file(path: str, env: Mapping[str, str]) -> None:
    """The container's variables, for --env-file: never on the runtime's command line, where `ps` shows
    them to everyone, nor in its own environment, which a root runtime would obey."""
    lines = []
    for key, value in env.items():
        if "\n" in value or "\0" in value or "=" in key or not key:
            _say(f"corral: {key} holds a line break, which a container's environment file cannot carry; left out")
            continue
        lines.append(f"{key}={value}\n")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, "".join(lines).encode())
    finally:
        os.close(fd)


def _write_state(job_dir: str, state: Mapping[str, object]) -> None:
    try:
        fd = os.open(os.path.join(job_dir, STATE), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, json.dumps(state).encode())
        finally:
            os.close(fd)
    except OSError:
        pass  # an owner-run runtime may not write the job's directory: the pull time is then unrecorded


def read_state(job_dir: str) -> dict[str, object]:
    """What `exec_container` recorded ({} when nothing was)."""
    try:
        with open(os.path.join(job_dir, STATE)) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _say(message: str) -> None:
    try:
        os.write(2, (message + "\n").encode())
    except OSError:
        pass

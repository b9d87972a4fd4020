#!/usr/bin/env bash
# Make sure the container runtime the container tests run jobs with is installed: Debian's Podman with
# runc (this kind of machine's cgroups are hybrid v1, which crun refuses), and busybox-static, from which
# the tests build their images (nothing is pulled: tests/containers.py). As root it installs what is
# missing; otherwise it only reports.
set -euo pipefail
# POSIX message queues, which every systemd host mounts and Podman binds into a container that shares the host's
# IPC in a user namespace (--container-remap-root); a bare container of a machine may lack them.
if [ "$(id -u)" = 0 ] && [ ! -d /dev/mqueue ]; then
  mkdir -p /dev/mqueue && mount -t mqueue mqueue /dev/mqueue || echo "containers.sh: cannot mount /dev/mqueue" >&2
fi
if command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 && [ -x /bin/busybox ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "containers.sh: the container tests need podman, runc and busybox-static (apt-get install podman runc busybox-static)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq podman runc busybox-static >/dev/null
echo "containers.sh: installed $(podman --version)"

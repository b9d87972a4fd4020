#!/usr/bin/env bash
# Make sure a Chromium the dashboard's browser tests can drive is installed (Debian's `chromium`
# package; Playwright's Python package drives it through executable_path, so nothing is downloaded
# at test time). As root it installs the package when missing; otherwise it only reports.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "browser.sh: chromium is not installed; the dashboard's browser tests need it (apt-get install chromium)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "browser.sh: installed $(chromium --version 2>/dev/null | head -1)"

#!/usr/bin/env bash
# Vendor the dashboard's third-party front-end code into the package, at a pinned version.
#
# uPlot 1.6.32 (MIT): the charting library. Chosen because it is made for time series, fast
# (a million points draw in tens of milliseconds on a canvas) and small (~50 KB minified, no
# dependencies), so the run page stays interactive with many long metrics.
#
# The copied files are committed: the installed package serves the dashboard offline, and no
# build step runs at install or run time. Run this again only to change the pinned version.
set -euo pipefail
UPLOT_VERSION=1.6.32

cd "$(dirname "$0")/.."
dest=src/corral/web/static/vendor/uplot
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$tmp" && npm pack --silent "uplot@$UPLOT_VERSION" >/dev/null)
tar -xzf "$tmp/uplot-$UPLOT_VERSION.tgz" -C "$tmp"
mkdir -p "$dest"
cp "$tmp/package/dist/uPlot.iife.min.js" "$tmp/package/dist/uPlot.min.css" "$tmp/package/LICENSE" "$dest/"
echo "uPlot $UPLOT_VERSION copied into $dest"

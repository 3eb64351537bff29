#!/usr/bin/env bash
# A simulated multi-node cluster on this machine: network namespaces, shaped links, a throttled
# shared filesystem. `scripts/sim-cluster.sh --help` and docs/PERFORMANCE.md ("Many hosts").
# Needs root. Uses Debian's system Python (stdlib only) and gnuplot for the sweep's plots.
exec /usr/bin/python3 "$(dirname "$0")/sim/main.py" "$@"

#!/usr/bin/env bash
# Builds what the other scripts measure: the release binary and the probe.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --bin convo --example perf_probe --example load

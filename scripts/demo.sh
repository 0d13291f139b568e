#!/usr/bin/env bash
# The main job: set up and build attngen, then run the demo (tutorial examples and MHA forwards
# checked against the float64 reference, with the time per call).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh" "$@"
exec "${ATTNGEN_BUILD_DIR:-$root/build}/examples/attngen_demo"

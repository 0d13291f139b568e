#!/usr/bin/env bash
# Set up and build attngen, then run the whole test suite with CTest. Exits non-zero when any
# test fails. Pass a CTest label to run one suite only, e.g. scripts/test.sh -L host.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${ATTNGEN_BUILD_DIR:-$root/build}
"$root/scripts/setup.sh"
export PATH=$root/.venv/bin:$PATH
ctest --test-dir "$build_dir" --output-on-failure -j "${ATTNGEN_JOBS:-$(nproc)}" "$@"

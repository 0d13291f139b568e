#!/usr/bin/env bash
# Set up and build attngen, then run the whole test suite with CTest. Exits non-zero when any
# test fails. Pass a CTest label to run one suite only, e.g. scripts/test.sh -L host.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${ATTNGEN_BUILD_DIR:-$root/build}
# The sanitized suite and the fuzzer are on by default where the tools exist; CI insists on them
# (setup.sh installs clang and its runtime), so a missing tool fails instead of skipping them.
"$root/scripts/setup.sh" -DATTNGEN_SANITIZER_TESTS=ON -DATTNGEN_FUZZ=ON
export PATH=$root/.venv/bin:$PATH
ctest --test-dir "$build_dir" --output-on-failure -j "${ATTNGEN_JOBS:-$(nproc)}" "$@"

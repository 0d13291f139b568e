#!/usr/bin/env bash
# Sets up everything attngen needs on a Debian 12 machine and builds it:
#   1. the Debian packages it needs (only the missing ones; needs root or sudo),
#   2. a project-local virtual environment (.venv) with Halide 21, CMake and Ninja from PyPI,
#   3. a configured and built tree in build/ (or $ATTNGEN_BUILD_DIR), reused on later runs.
# Extra arguments are passed to the CMake configure step.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${ATTNGEN_BUILD_DIR:-$root/build}
jobs=${ATTNGEN_JOBS:-$(nproc)}

debian_packages=(
    build-essential pkg-config python3 python3-venv python3-dev
    libgtest-dev libgmock-dev libbenchmark-dev googletest
    g++-aarch64-linux-gnu qemu-user
    clang-14 libclang-rt-14-dev
    pocl-opencl-icd ocl-icd-opencl-dev libopenblas-dev
    nlohmann-json3-dev libcli11-dev
)

install_debian_packages() {
    local missing=()
    for p in "${debian_packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "==> Installing Debian packages: ${missing[*]}"
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || {
            echo "error: need root or sudo to install: ${missing[*]}" >&2
            exit 1
        }
        sudo=sudo
    fi
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}"
}

make_venv() {
    local venv=$root/.venv
    local requirements=$root/scripts/requirements-build.txt
    local stamp=$venv/.attngen-requirements
    if [ ! -x "$venv/bin/python" ]; then
        echo "==> Creating the virtual environment $venv"
        python3 -m venv "$venv"
    fi
    # Reinstall only when the requirements changed since the last successful install.
    if ! cmp -s "$requirements" "$stamp"; then
        echo "==> Installing Halide 21, CMake and Ninja from PyPI into $venv"
        "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
        cp "$requirements" "$stamp"
    fi
}

install_debian_packages
make_venv
export PATH=$root/.venv/bin:$PATH

echo "==> Configuring $build_dir"
cmake -G Ninja -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
echo "==> Building with $jobs jobs"
cmake --build "$build_dir" -j "$jobs"

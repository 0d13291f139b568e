#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds examples/consumer (a separate
# project: find_package(attngen) + attngen_add_library) against it and runs it: for the host
# natively and, when the install has the aarch64 library, for aarch64 under qemu-aarch64. A
# self-contained install (ATTNGEN_INSTALL_HALIDE) is moved to another directory first: its
# generator must load the libHalide installed beside it, not the build's.
# usage: check_consumer.sh <build dir> <source dir> <cmake> <generator>
#                          <self-contained | uses-build-halide>
set -euo pipefail
build=$1 source=$2 cmake=$3 generator=$4 kind=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$cmake" --install "$build" --prefix "$work/install" >/dev/null
prefix="$work/install"
if [ "$kind" = self-contained ]; then
    echo "== the install moved: it carries its own Halide"
    mv "$work/install" "$work/moved"
    prefix="$work/moved"
    for lib in libHalide.so libautoschedule_li2018.so HALIDE_LICENSE.txt; do
        [ -e "$prefix/libexec/attngen/$lib" ] ||
            { echo "FAIL: the install has no libexec/attngen/$lib"; exit 1; }
    done
    halide=$(ldd "$prefix/libexec/attngen/attngen_generators" | awk '/libHalide/ {print $3}')
    [ "$halide" = "$prefix/libexec/attngen/libHalide.so" ] ||
        { echo "FAIL: the moved generator loads libHalide from '$halide'"; exit 1; }
    echo "ok  : the moved generator loads $halide"
fi
package="$prefix/lib/cmake/attngen"

echo "== host"
"$cmake" -G "$generator" -S "$source/examples/consumer" -B "$work/host" \
    -Dattngen_DIR="$package" >/dev/null
"$cmake" --build "$work/host" >/dev/null
"$work/host/consumer"

echo "== host, SCHEDULE tuned from a file"
echo '{"params": {"gemm_rows": 4, "query_block": 16}}' >"$work/tuned.json"
"$cmake" -G "$generator" -S "$source/examples/consumer" -B "$work/tuned" \
    -Dattngen_DIR="$package" -DCONSUMER_TUNED_FILE="$work/tuned.json" >/dev/null
"$cmake" --build "$work/tuned" >/dev/null
"$work/tuned/consumer"

# A malformed tuned file stops the configure with a message naming the file and the fault.
expect_configure_failure() {  # <file content> <expected message part>
    echo "$1" >"$work/bad.json"
    if "$cmake" -G "$generator" -S "$source/examples/consumer" -B "$work/bad" \
        -Dattngen_DIR="$package" -DCONSUMER_TUNED_FILE="$work/bad.json" >"$work/bad.log" 2>&1; then
        echo "FAIL: configure accepted the tuned file: $1"; exit 1
    fi
    grep -q "bad.json" "$work/bad.log" && grep -q "$2" "$work/bad.log" ||
        { echo "FAIL: no message naming bad.json and '$2':"; cat "$work/bad.log"; exit 1; }
    echo "ok  : tuned file '$1' rejected: $2"
    rm -rf "$work/bad"
}
expect_configure_failure 'not json' "is malformed"
expect_configure_failure '{"params": {"gemm_rowz": 4}}' 'gemm_rowz'
expect_configure_failure '{"params": {"gemm_rows": -4}}' 'non-negative'

# attngen_add_library's own arguments, configure only: a keyword given no value is refused (it
# would have built the generic kernel), and a relative TUNED_FILE is found beside the
# CMakeLists.txt that names it.
mkdir -p "$work/args"
echo '{"params": {"query_block": 16}}' >"$work/args/knobs.json"
configure_args_project() {  # <arguments of attngen_add_library>
    printf 'cmake_minimum_required(VERSION 3.25)\nproject(args LANGUAGES CXX)\n%s\n%s\n' \
        'find_package(attngen 0.2 REQUIRED)' "attngen_add_library(k TARGETS host $1)" \
        >"$work/args/CMakeLists.txt"
    rm -rf "$work/args/build"
    "$cmake" -G "$generator" -S "$work/args" -B "$work/args/build" -Dattngen_DIR="$package" \
        >"$work/args.log" 2>&1
}
if configure_args_project 'HEAD_DIM ${UNSET_VARIABLE} NUM_HEADS 4'; then
    echo "FAIL: attngen_add_library accepted HEAD_DIM without a value"; exit 1
fi
grep -q "no value given for HEAD_DIM" "$work/args.log" ||
    { echo "FAIL: no message naming HEAD_DIM:"; cat "$work/args.log"; exit 1; }
echo "ok  : HEAD_DIM without a value rejected"
configure_args_project 'HEAD_DIM 16 SCHEDULE tuned TUNED_FILE knobs.json' ||
    { echo "FAIL: a TUNED_FILE relative to its CMakeLists.txt was not found:"
      cat "$work/args.log"; exit 1; }
echo "ok  : a relative TUNED_FILE is read beside its CMakeLists.txt"

if [ -e "$prefix/lib/attngen/aarch64-linux-gnu/libattngen.a" ]; then
    echo "== aarch64 (qemu)"
    "$cmake" -G "$generator" -S "$source/examples/consumer" -B "$work/aarch64" \
        -DCMAKE_TOOLCHAIN_FILE="$source/cmake/toolchains/aarch64-linux-gnu.cmake" \
        -Dattngen_DIR="$package" >/dev/null
    "$cmake" --build "$work/aarch64" >/dev/null
    file "$work/aarch64/consumer" | grep -q "ARM aarch64" ||
        { echo "the aarch64 consumer is not an aarch64 binary"; exit 1; }
    qemu-aarch64 -L /usr/aarch64-linux-gnu "$work/aarch64/consumer"
else
    echo "== aarch64: not in this install (ATTNGEN_ENABLE_AARCH64=OFF)"
fi

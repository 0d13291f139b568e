#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, checks the layout of DESIGN.md and that
# libattngen.so exports exactly the C API, then builds and runs a downstream project against it.
# usage: check_install.sh <build dir> <source dir> <cmake> <generator>
set -euo pipefail
build=$1 source=$2 cmake=$3 generator=$4
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT

"$cmake" --install "$build" --prefix "$prefix/install" >/dev/null
for f in include/attngen/attngen.h include/attngen/attngen.hpp lib/libattngen.a \
         lib/libattngen.so lib/cmake/attngen/attngenConfig.cmake \
         lib/cmake/attngen/attngenConfigVersion.cmake lib/pkgconfig/attngen.pc; do
    [ -e "$prefix/install/$f" ] || { echo "missing from the install: $f"; exit 1; }
done

expected=$(grep -oE '^ATTNGEN_API [^(]*\b(attngen_[a-z_]+)\(' "$source/include/attngen/attngen.h" |
           grep -oE 'attngen_[a-z_]+\($' | tr -d '(' | sort)
exported=$(nm -D --defined-only "$prefix/install/lib/libattngen.so" | awk '{print $3}' | sort)
if [ "$expected" != "$exported" ]; then
    echo "libattngen.so exports differ from the C API"
    diff <(echo "$expected") <(echo "$exported") || true
    exit 1
fi

"$cmake" -G "$generator" -S "$source/tests/package" -B "$prefix/consumer" \
    -DCMAKE_PREFIX_PATH="$prefix/install" \
    -DEXAMPLE_SOURCE="$source/examples/c_api/main.c" >/dev/null
"$cmake" --build "$prefix/consumer" >/dev/null
"$prefix/consumer/c_static"
LD_LIBRARY_PATH="$prefix/install/lib" "$prefix/consumer/c_shared"
echo "install layout, exports and find_package(attngen): ok"

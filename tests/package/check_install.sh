#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, checks the layout of DESIGN.md and that
# libattngen.so exports exactly the C API, then builds and runs a downstream project against it,
# and the C example with cc and pkg-config alone (static and shared).
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

# The C example built with cc and pkg-config alone, from the installed attngen.pc: it must
# point into this prefix (relocatable), and list what a static link of libattngen.a needs.
export PKG_CONFIG_PATH="$prefix/install/lib/pkgconfig"
pkg-config --exists attngen || { echo "pkg-config does not find the installed attngen.pc"; exit 1; }
pc_prefix=$(pkg-config --variable=prefix attngen)
[ "$(realpath -m "$pc_prefix")" = "$(realpath "$prefix/install")" ] ||
    { echo "attngen.pc: prefix $pc_prefix is not the install prefix $prefix/install"; exit 1; }
example="$source/examples/c_api/main.c"
read -ra cflags <<<"$(pkg-config --cflags attngen)"
# Static: libattngen.so lies beside the archive, so -lattngen is made to take the .a.
read -ra static_libs <<<"$(pkg-config --static --libs attngen)"
linked=()
for arg in "${static_libs[@]}"; do
    if [ "$arg" = -lattngen ]; then linked+=(-Wl,-Bstatic -lattngen -Wl,-Bdynamic); else linked+=("$arg"); fi
done
cc -std=c11 "${cflags[@]}" "$example" -o "$prefix/pc_static" "${linked[@]}"
if grep -q 'NEEDED.*libattngen' <<<"$(readelf -d "$prefix/pc_static")"; then
    echo "pkg-config static link: the program needs libattngen.so"; exit 1
fi
env -u LD_LIBRARY_PATH "$prefix/pc_static" >/dev/null
read -ra shared_libs <<<"$(pkg-config --libs attngen)"
cc -std=c11 "${cflags[@]}" "$example" -o "$prefix/pc_shared" "${shared_libs[@]}"
grep -q 'NEEDED.*libattngen\.so' <<<"$(readelf -d "$prefix/pc_shared")" ||
    { echo "pkg-config shared link: the program does not need libattngen.so"; exit 1; }
LD_LIBRARY_PATH="$prefix/install/lib" "$prefix/pc_shared" >/dev/null
echo "cc and pkg-config (attngen.pc), static and shared: ok"

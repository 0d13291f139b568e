# Cross-compiling to 64-bit ARM Linux with Debian's g++-aarch64-linux-gnu; programs run under
# qemu-user (Debian's qemu-user), so CTest can run the cross-built test suite on an x86 host.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(ATTNGEN_QEMU_AARCH64 qemu-aarch64)
if (ATTNGEN_QEMU_AARCH64)
    set(CMAKE_CROSSCOMPILING_EMULATOR "${ATTNGEN_QEMU_AARCH64};-L;/usr/aarch64-linux-gnu")
endif ()

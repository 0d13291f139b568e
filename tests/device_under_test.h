// Which GPU API the device suite tests (ATTNGEN_TEST_DEVICE=cuda|opencl; OpenCL by default),
// and whether a missing device fails the suite instead of skipping it
// (ATTNGEN_TEST_REQUIRE_DEVICE=1; CI sets it for OpenCL, which PoCL provides on any machine).
#ifndef ATTNGEN_TESTS_DEVICE_UNDER_TEST_H
#define ATTNGEN_TESTS_DEVICE_UNDER_TEST_H

#include <attngen/attngen.h>

#include <cstdlib>
#include <cstring>

namespace attngen_test {

inline attngen_device DeviceUnderTest() {
    const char *name = std::getenv("ATTNGEN_TEST_DEVICE");
    if (name != nullptr && std::strcmp(name, "cuda") == 0) return ATTNGEN_DEVICE_CUDA;
    return ATTNGEN_DEVICE_OPENCL;
}

inline bool DeviceRequired() {
    const char *required = std::getenv("ATTNGEN_TEST_REQUIRE_DEVICE");
    return required != nullptr && std::strcmp(required, "1") == 0;
}

}  // namespace attngen_test

#endif  // ATTNGEN_TESTS_DEVICE_UNDER_TEST_H

// Which GPU API the device suite tests (ATTNGEN_TEST_DEVICE=cuda|opencl; OpenCL by default),
// and whether a missing device fails the suite instead of skipping it
// (ATTNGEN_TEST_REQUIRE_DEVICE=1; CI sets it for OpenCL, which PoCL provides on any machine).
#ifndef ATTNGEN_TESTS_DEVICE_UNDER_TEST_H
#define ATTNGEN_TESTS_DEVICE_UNDER_TEST_H

#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

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

// Why the device cannot run here, or "" when it can: a handle is created once.
inline const std::string &DeviceUnavailableReason() {
    static const std::string reason = [] {
        attngen_mha_config config{
            8, 2,   0, 0, 0, 1, DeviceUnderTest(), 0, 0, ATTNGEN_PRECISION_F32, ATTNGEN_ROPE_NONE,
            0, 0.0f};
        attngen_mha *m = nullptr;
        const attngen_status s = attngen_mha_create(&config, &m);
        attngen_mha_destroy(m);
        if (s == ATTNGEN_OK) return std::string();
        return std::string(attngen_status_string(s)) + ": " + attngen_last_error();
    }();
    return reason;
}

// Skips (or, where the device is required, fails) every test where the device is unavailable.
class DeviceAvailableTest : public ::testing::Test {
  protected:
    void SetUp() override {
        const std::string &reason = DeviceUnavailableReason();
        if (reason.empty()) return;
        if (DeviceRequired()) FAIL() << "the device is required but unavailable: " << reason;
        GTEST_SKIP() << "no usable device: " << reason;
    }
};

}  // namespace attngen_test

#endif  // ATTNGEN_TESTS_DEVICE_UNDER_TEST_H

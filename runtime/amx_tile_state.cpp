#include "amx_tile_state.h"

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace attngen::rt {
namespace {

#if defined(__x86_64__) && defined(__linux__)
// CPUID leaf 7, EDX; CPUID leaf 1, ECX; XCR0 (Intel SDM, vol. 1, 13.2 and vol. 2, CPUID).
constexpr unsigned kAmxBf16 = 1u << 22, kAmxTile = 1u << 24, kOsXsave = 1u << 27;
constexpr unsigned long long kXcr0TileCfg = 1ull << 17, kXcr0TileData = 1ull << 18;
// arch/x86/include/uapi/asm/prctl.h and fpu/types.h.
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;

bool cpu_and_kernel_enable_amx() {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || (c & kOsXsave) == 0) return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || (d & kAmxTile) == 0 || (d & kAmxBf16) == 0) {
        return false;
    }
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    const unsigned long long xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
    return (xcr0 & kXcr0TileCfg) != 0 && (xcr0 & kXcr0TileData) != 0;
}

bool ask_for_tile_data() {
    return cpu_and_kernel_enable_amx() &&
           syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}
#else
bool ask_for_tile_data() {
    return false;
}
#endif

}  // namespace

bool amx_tile_state_granted() {
    static const bool granted = ask_for_tile_data();
    return granted;
}

}  // namespace attngen::rt

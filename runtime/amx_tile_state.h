// Whether this process may run Intel AMX's tile instructions.
#ifndef ATTNGEN_RUNTIME_AMX_TILE_STATE_H
#define ATTNGEN_RUNTIME_AMX_TILE_STATE_H

namespace attngen::rt {

// True where the CPU has AMX-TILE and AMX-BF16, the kernel enables their state (XCR0's tile
// bits), and Linux grants this process the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM,
// which it asks once, for every thread of the process). A tile instruction without the grant
// raises SIGILL: the bfloat16 kernels' AMX variant is taken only where this holds
// (runtime/cpu_dispatch.cpp). False elsewhere, and on other architectures.
bool amx_tile_state_granted();

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_AMX_TILE_STATE_H

// Options the generators pass to LLVM, through Halide's HL_LLVM_ARGS, which Halide reads when it
// first compiles a pipeline: set here, before main, so that every build of the kernels (this
// project's, and the installed package's attngen_add_library) compiles them alike.
//
// -vectorize-slp=false: Halide vectorizes each loop as its schedule says, and LLVM's SLP
// vectorizer then packed the scalar address arithmetic of the projections' register tiles into
// vector registers. The rows' broadcast addresses were computed in a ymm register every step,
// extracted one by one (vpaddq, vpsllq, vmovq, vpextrq, vextracti32x4), where four base registers
// and one index do: the bfloat16 6 x 4 tile's step 46-48 instructions against 38, the 4 x 4
// tile's 36 against 28 (AVX512-BF16 variant, the assembly Halide writes for the bfloat16 forward).
// Whether LLVM did so changed with unrelated code around the loop: the query projection's second
// direct path had it while the key projection's did not, and one more loop-invariant offset moved
// it to the key projection (its loop 11% slower, attngen_parallel_timeline bert-128 bf16).
//
// -disable-loop-idiom-memcpy, -disable-loop-idiom-memset: LLVM turned loops that copy or clear a
// few hundred bytes (the flash state's first key block, the running sums' zeros) into calls to
// memcpy and memset. In a function that uses AMX tiles, the tile configuration must be loaded
// again after every call (ldtilecfg): one copy per query row put 12% of the samples of
// mha_forward_bf16/bert-512's attention task on ldtilecfg (perf, Intel Xeon with AMX). The
// generated attention and projection functions had 35 ldtilecfg with the calls, 13 without (after
// halide_malloc and halide_free, once per task). scripts/paired_ab.py, Intel Xeon with AMX, 2
// threads, old/new: mha_forward_bf16/ bert-128 1.106x, bert-512 1.072x, bert-512-b8 1.063x (6 of
// 6 pairs each), the rest 0.99-1.02x (gpt2-decode 0.989x in 12 pairs); float32, where the calls
// cost no ldtilecfg, level (0.98-1.05x in 6 pairs). A register tile whose zeros a loop writes
// then stays on the stack (the memset had let LLVM keep it in registers): the schedules write
// their tiles' zeros unrolled (schedule_cpu_tiles.h, TileCopy; schedule_cpu_projection.cpp).
// Until they did, the AVX512-BF16 variant's forward lost up to 6% on a Zen 4 (bench/RESULTS.md,
// session 89).
#include <cstdlib>
#include <string>

namespace {

constexpr const char *kLlvmArgs[] = {"-vectorize-slp=false", "-disable-loop-idiom-memcpy",
                                     "-disable-loop-idiom-memset"};

// Appends to what the caller's environment already asks of LLVM; an option the caller names
// (with any value) is left as the caller set it.
const bool llvm_args_set = [] {
    const char *given = std::getenv("HL_LLVM_ARGS");
    std::string args = given != nullptr ? given : "";
    for (const std::string arg : kLlvmArgs) {
        const std::string name = arg.substr(0, arg.find('='));
        if (args.find(name) == std::string::npos) args += (args.empty() ? "" : " ") + arg;
    }
    setenv("HL_LLVM_ARGS", args.c_str(), 1);
    return true;
}();

}  // namespace

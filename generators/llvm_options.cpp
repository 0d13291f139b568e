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
#include <cstdlib>
#include <string>

namespace {

constexpr const char *kLlvmArgs = "-vectorize-slp=false";

// Appends to what the caller's environment already asks of LLVM.
const bool llvm_args_set = [] {
    const char *given = std::getenv("HL_LLVM_ARGS");
    std::string args = given != nullptr ? given : "";
    if (args.find("vectorize-slp") == std::string::npos) {
        args = args.empty() ? kLlvmArgs : args + " " + kLlvmArgs;
        setenv("HL_LLVM_ARGS", args.c_str(), 1);
    }
    return true;
}();

}  // namespace

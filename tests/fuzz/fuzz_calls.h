// The fuzzed parts of the C API, each reading its call (or calls) from the fuzzer's bytes and
// checking them (see fuzz_capi.cpp). v2: the 0.2 API too.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include "fuzz_common.h"

namespace attngen_fuzz {

// attngen_linear (fuzz_linear_sdpa.cpp).
void FuzzLinear(FuzzedDataProvider &in, DataSource &src);
// attngen_sdpa, or (v2) attngen_sdpa_gqa with grouped key/value heads (fuzz_linear_sdpa.cpp).
void FuzzSdpa(FuzzedDataProvider &in, DataSource &src, bool v2);
// An MHA handle through its life, and (v2) its KV caches (fuzz_mha.cpp, fuzz_kv_cache.cpp).
void FuzzMha(FuzzedDataProvider &in, DataSource &src, bool v2);

}  // namespace attngen_fuzz

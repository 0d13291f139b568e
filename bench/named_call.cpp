// named_call (named_call.h).
#include "named_call.h"

#include <cstring>
#include <memory>

#include "decode_step.h"
#include "mha_forward_call.h"

namespace attngen_bench {

std::function<attngen_status()> named_call(const char *name, attngen_precision precision,
                                           std::string &error) {
    for (const attngen::DecodeShape &s : attngen::decode_shapes()) {
        if (std::strcmp(s.name, name) != 0) continue;
        auto stepper = std::make_shared<DecodeStepper>(s, precision, ATTNGEN_DEVICE_CPU);
        error = stepper->error();
        if (!error.empty()) return {};
        return [stepper] { return stepper->step(); };
    }
    for (const attngen::NamedShape &s : attngen::named_shapes()) {
        if (std::strcmp(s.name, name) != 0) continue;
        auto forward = std::make_shared<MhaForwardCall>(s, precision);
        error = forward->error();
        if (!error.empty()) return {};
        return [forward] { return (*forward)(); };
    }
    error = std::string("no decode or MHA shape named ") + name;
    return {};
}

}  // namespace attngen_bench

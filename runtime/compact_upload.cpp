#include "compact_upload.h"

#include <string>

#include "device.h"
#include "errors.h"
#include "mask_buffers.h"

namespace attngen::rt {

CompactUpload::~CompactUpload() {
    KernelContext context;  // a failure to free leaks device memory; there is no one to tell
    context.gpu = gpu_;
    for (auto &c : copies_) {
        if (c->uploaded != nullptr) detach_device_address(device_, c->uploaded, gpu_);
        if (c->compact.device != 0) halide_device_free(&context, &c->compact);
    }
}

attngen_status CompactUpload::upload(halide_buffer_t *buf, const char *name) {
    if (buf->dimensions > int(std::tuple_size<decltype(Copy::dims)>::value)) {
        return fail(ATTNGEN_ERROR_INTERNAL, std::string(name) + " has too many dimensions");
    }
    auto copy = std::make_unique<Copy>();
    copy->compact = *buf;
    copy->compact.device = 0;
    copy->compact.device_interface = nullptr;
    copy->compact.dim = copy->dims.data();
    int d = 0;
    for (int k = 0; k < buf->dimensions; ++k) {
        if (buf->dim[k].stride != 0) copy->dims[d++] = buf->dim[k];
    }
    if (d == 0) copy->dims[d++] = halide_dimension_t{0, 1, 1, 0};  // a single element
    copy->compact.dimensions = d;
    copy->compact.flags = halide_buffer_flag_host_dirty;
    copies_.push_back(std::move(copy));
    Copy &c = *copies_.back();

    KernelContext context;
    context.gpu = gpu_;
    const int code = halide_copy_to_device(&context, &c.compact, gpu_interface_or_fail(device_));
    if (code != 0) return kernel_failure((std::string("copy of ") + name).c_str(), code, context);
    ATTNGEN_RETURN_IF_ERROR(
        wrap_device_address(device_, buf, device_address_of(device_, &c.compact), name, gpu_));
    c.uploaded = buf;
    buf->flags = 0;  // host and device agree
    return ATTNGEN_OK;
}

attngen_status upload_masks(CompactUpload &upload, MaskBuffers &masks) {
    ATTNGEN_RETURN_IF_ERROR(upload.upload(masks.kv_lengths(), "kv_lengths"));
    ATTNGEN_RETURN_IF_ERROR(upload.upload(masks.bool_mask(), "bool_mask"));
    return upload.upload(masks.additive(), "additive");
}

}  // namespace attngen::rt

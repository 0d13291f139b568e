#include "mask_buffers.h"

namespace attngen::rt {
namespace {

const attngen_mask kNoMask{};

const attngen_mask &or_no_mask(const attngen_mask *mask) {
    return mask ? *mask : kNoMask;
}

}  // namespace

MaskBuffers::MaskBuffers(const attngen_mask *mask, int32_t batch, int32_t heads, int32_t q_len,
                         int32_t kv_len)
    : causal_(static_cast<int32_t>(or_no_mask(mask).causal)),
      all_keys_(or_no_mask(mask).kv_lengths ? 0 : batch, kv_len),
      unmasked_row_(or_no_mask(mask).bool_mask ? 0 : kv_len, 0),
      zero_row_(or_no_mask(mask).additive ? 0 : kv_len, 0.0f),
      has_bool_mask_(or_no_mask(mask).bool_mask != nullptr),
      has_additive_(or_no_mask(mask).additive != nullptr),
      kv_lengths_(or_no_mask(mask).kv_lengths ? or_no_mask(mask).kv_lengths : all_keys_.data(),
                  {batch}),
      bool_mask_(
          has_bool_mask_ ? or_no_mask(mask).bool_mask : unmasked_row_.data(),
          {batch, q_len, kv_len},
          {!has_bool_mask_ || or_no_mask(mask).bool_mask_batch == 1, !has_bool_mask_, false}),
      additive_(has_additive_ ? or_no_mask(mask).additive : zero_row_.data(),
                {batch, heads, q_len, kv_len},
                {!has_additive_ || or_no_mask(mask).additive_batch == 1,
                 !has_additive_ || or_no_mask(mask).additive_heads == 1, !has_additive_, false}) {}

}  // namespace attngen::rt

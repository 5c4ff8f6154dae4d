/* SPDX-License-Identifier: BSD-3-Clause */
/* fp16 and bf16 host arithmetic in 256-bit vectors (x86-64 AVX2 + F16C, core/reduce_simd16.cc), where the processor
 * has them; reduce.cc's portable path otherwise. Same results bit for bit. dst may alias the inputs exactly.
 * `type` is vcclFloat16 or vcclBfloat16. */
#ifndef VCCL_CORE_REDUCE_SIMD16_H_
#define VCCL_CORE_REDUCE_SIMD16_H_

#include <cstddef>
#include <cstdint>

#include "vccl.h"

namespace vccl {

/* Whether the functions below may be called. */
bool simd16_available();
/* dst[i] = a[i] op b[i]; vcclAvg adds (its division comes after). */
void reduce_simd16(vcclDataType_t type, uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t count,
                   vcclRedOp_t op);
/* buf[i] /= divisor. */
void divide_simd16(vcclDataType_t type, uint16_t* buf, size_t count, float divisor);
/* dst[i] = src[i] * scalar. */
void multiply_simd16(vcclDataType_t type, uint16_t* dst, const uint16_t* src, size_t count, float scalar);

} // namespace vccl

#endif

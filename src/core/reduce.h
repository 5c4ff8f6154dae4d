/* SPDX-License-Identifier: BSD-3-Clause */
/* Host reductions for every datatype and op. fp16/bf16/fp8 are computed in float and rounded once per call. */
#ifndef VCCL_CORE_REDUCE_H_
#define VCCL_CORE_REDUCE_H_

#include <cstddef>
#include <cstdint>

#include "vccl.h"

namespace vccl {

/* dst[i] = a[i] op b[i] for i < count. dst may alias a or b. vcclAvg reduces as vcclSum; the division by
 * the rank count is applied once at the end with scale_avg_host(). */
void reduce_host(void* dst, const void* a, const void* b, size_t count, vcclDataType_t type, vcclRedOp_t op);

/* buf[i] /= nranks (integer division for integer types), the last step of vcclAvg. */
void scale_avg_host(void* buf, size_t count, vcclDataType_t type, int nranks);

/* dst[i] = src[i] * scalar, the first step of PreMulSum (algo/premul.h); `scalar_bits` holds one element of type
 * in its low bytes. Integers wrap; fp16, bf16 and fp8 are multiplied in float (exact for two of them) and rounded
 * once, as a native multiplication would (fp8 saturating: see core/dtype.h). dst may alias src. */
void premul_host(void* dst, const void* src, size_t count, vcclDataType_t type, uint64_t scalar_bits);

/* reduce_host's fp16 and bf16 reduction by its portable loops, whatever the processor has (reduce_host takes 256-bit
 * vectors where present, core/reduce_simd16.h): the tests compare the two. Other types: nothing. */
void reduce_16bit_portable(void* dst, const void* a, const void* b, size_t count, vcclDataType_t type, vcclRedOp_t op);

} // namespace vccl

#endif

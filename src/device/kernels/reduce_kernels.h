/* SPDX-License-Identifier: BSD-3-Clause */
/* Reductions on device memory for every datatype and op, in one compact kernel per (type, op). */
#ifndef VCCL_DEVICE_KERNELS_REDUCE_KERNELS_H_
#define VCCL_DEVICE_KERNELS_REDUCE_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "device/kernels/premul_arg.h"
#include "vccl.h"

namespace vccl {

/* Limits of one reduction on the device. */
constexpr int kMaxReduceSources = 64;

/* dst[i] = srcs[0][i] op srcs[1][i] op ... for i < count, on `stream` (no host wait). fp16 and bf16 are
 * accumulated in float and rounded once. vcclAvg sums and, when divide_by > 0, divides by it at the end.
 * dst may alias any source (each element is read from every source before it is written). At most max_ctas thread
 * blocks (VCCL_MAX_CTAS) are used. `first` on: each element of srcs[0] is first multiplied by PreMulSum's scalar and
 * rounded to the type (the value device_premul would have stored), so this rank's own part needs no scaled copy. */
vcclResult_t device_reduce(void* dst, const void* const* srcs, int nsrcs, size_t count, vcclDataType_t type,
                           vcclRedOp_t op, int divide_by, int max_ctas, vcclStream_t stream,
                           const PreMulArg& first = PreMulArg());

/* dst[i] = src[i] * scalar for i < count on `stream` (PreMulSum's first step, algo/premul.h): the scalar is read
 * on the device from `device_scalar` when not NULL, else it is the element in the low bytes of `host_bits`.
 * Integers wrap; fp16 and bf16 are multiplied in float and rounded once. dst may alias src. */
vcclResult_t device_premul(void* dst, const void* src, size_t count, vcclDataType_t type, const void* device_scalar,
                           uint64_t host_bits, int max_ctas, vcclStream_t stream);

} // namespace vccl

#endif

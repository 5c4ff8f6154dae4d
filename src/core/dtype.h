/* SPDX-License-Identifier: BSD-3-Clause */
/* Datatypes and reduction ops: fp16/bf16 conversions; sizes, names and validity come from core/names.h. */
#ifndef VCCL_CORE_DTYPE_H_
#define VCCL_CORE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/names.h"
#include "vccl.h"

namespace vccl {

/* IEEE binary16 <-> float, round to nearest even. */
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
/* bfloat16 <-> float, round to nearest even; NaN stays NaN. */
inline float bf16_to_float(uint16_t b) {
    uint32_t u = uint32_t(b) << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}
inline uint16_t float_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40); // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
}

} // namespace vccl

#endif

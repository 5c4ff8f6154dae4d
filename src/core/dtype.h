/* SPDX-License-Identifier: BSD-3-Clause */
/* Datatypes and reduction ops: fp16/bf16/fp8 conversions; sizes, names and validity come from core/names.h. */
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

/* OCP FP8 <-> float. Decoding is exact (every fp8 value is a float). Encoding rounds to nearest even and saturates
 * as CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) does, bit for bit: a magnitude that would round past the
 * largest finite value, infinity included, gives that value with the sign (e4m3 +-448 = 0x7E/0xFE, e5m2 +-57344 =
 * 0x7B/0xFB); a NaN gives 0x7F in both formats; a magnitude at or below half the smallest subnormal gives a zero
 * of the same sign. e4m3 has no infinity (0x7F/0xFF are its NaNs); e5m2 decodes 0x7C/0xFC as infinities and
 * 0x7D-0x7F/0xFD-0xFF as NaNs. */
struct Fp8Table {
    float value[256];
};
extern const Fp8Table kFp8e4m3Values; // constant-initialised: usable from any static initialiser
extern const Fp8Table kFp8e5m2Values;
inline float fp8e4m3_to_float(uint8_t v) { return kFp8e4m3Values.value[v]; }
inline float fp8e5m2_to_float(uint8_t v) { return kFp8e5m2Values.value[v]; }
uint8_t float_to_fp8e4m3(float f);
uint8_t float_to_fp8e5m2(float f);

} // namespace vccl

#endif

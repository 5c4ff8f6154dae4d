/* SPDX-License-Identifier: BSD-3-Clause */
#include "dtype.h"

#include <cmath>

namespace vccl {

float half_to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { // subnormal: normalise
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | (exp + 127 - 15) << 23 | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

uint16_t float_to_half(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    uint16_t sign = uint16_t((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u); // NaN
    if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u); // overflow (rounds to inf) or inf
    if (abs < 0x38800000u) { // result is subnormal or zero
        if (abs < 0x33000000u) return sign; // below half of the smallest subnormal
        uint32_t exp = abs >> 23;
        uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - exp; // 14 - (exp - 127) + ... gives the subnormal scaling
        uint32_t half_mant = mant >> (shift - 0); // keep bits for rounding below
        uint32_t rem = mant & ((1u << shift) - 1);
        uint32_t halfway = 1u << (shift - 1);
        half_mant = mant >> shift;
        if (rem > halfway || (rem == halfway && (half_mant & 1u))) half_mant++;
        return uint16_t(sign | half_mant);
    }
    uint32_t exp = (abs >> 23) - 127 + 15;
    uint32_t mant = abs & 0x7fffffu;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; // may carry into the exponent: correct
    return uint16_t(sign | h);
}

} // namespace vccl

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

namespace {

/* One fp8 format: mantissa bits, exponent bias, the code of the largest finite magnitude. */
template <int kMant, int kBias, uint32_t kMaxCode>
uint8_t float_to_fp8(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    const uint32_t sign = (u >> 24) & 0x80u;
    const uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return 0x7fu; // NaN: CUDA's canonical NaN, without the sign
    const int exp = int(abs >> 23) - 127; // infinity lands far above the largest code and saturates below
    if ((abs >> 23) == 0) return uint8_t(sign); // float zero or subnormal: far below fp8's smallest subnormal
    const uint64_t mant = (abs & 0x7fffffu) | 0x800000u; // with the leading bit
    constexpr int kMinExp = 1 - kBias;
    uint64_t code;
    uint64_t rem, half;
    if (exp >= kMinExp) { // normal: exponent and mantissa fields, the leading bit dropped
        const int drop = 23 - kMant;
        code = (uint64_t(exp + kBias) << kMant) | ((mant & 0x7fffffu) >> drop);
        rem = mant & ((uint64_t(1) << drop) - 1);
        half = uint64_t(1) << (drop - 1);
    } else { // subnormal: the value in units of the smallest subnormal, 2^(kMinExp - kMant)
        const int drop = 23 - kMant + (kMinExp - exp);
        if (drop > 40) return uint8_t(sign); // below a quarter of the smallest subnormal
        code = mant >> drop;
        rem = mant & ((uint64_t(1) << drop) - 1);
        half = uint64_t(1) << (drop - 1);
    }
    if (rem > half || (rem == half && (code & 1u))) code++; // a carry into the exponent is correct
    if (code > kMaxCode) code = kMaxCode; // saturate to the largest finite value
    return uint8_t(sign | uint32_t(code));
}

/* 2^e, exactly, at compile time. */
constexpr float pow2(int e) {
    float r = 1.0f;
    for (; e > 0; --e) r *= 2.0f;
    for (; e < 0; ++e) r *= 0.5f;
    return r;
}

template <int kMant, int kBias, bool kHasInf>
constexpr float fp8_to_float(uint32_t v) {
    const uint32_t exp = (v & 0x7fu) >> kMant;
    const uint32_t mant = v & ((1u << kMant) - 1);
    const float sign = (v & 0x80u) ? -1.0f : 1.0f;
    const uint32_t top_exp = 0x7fu >> kMant;
    if (kHasInf && exp == top_exp) return mant == 0 ? sign * __builtin_inff() : __builtin_nanf("");
    if (!kHasInf && (v & 0x7fu) == 0x7fu) return __builtin_nanf("");
    if (exp == 0) return sign * float(mant) * pow2(1 - kBias - kMant); // zero or subnormal
    return sign * float(mant | (1u << kMant)) * pow2(int(exp) - kBias - kMant);
}

template <int kMant, int kBias, bool kHasInf>
constexpr Fp8Table make_fp8_table() {
    Fp8Table t = {};
    for (uint32_t v = 0; v < 256; ++v) t.value[v] = fp8_to_float<kMant, kBias, kHasInf>(v);
    return t;
}

} // namespace

const Fp8Table kFp8e4m3Values = make_fp8_table<3, 7, false>();
const Fp8Table kFp8e5m2Values = make_fp8_table<2, 15, true>();

uint8_t float_to_fp8e4m3(float f) { return float_to_fp8<3, 7, 0x7eu>(f); }
uint8_t float_to_fp8e5m2(float f) { return float_to_fp8<2, 15, 0x7bu>(f); }

} // namespace vccl

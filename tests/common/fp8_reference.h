/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An FP8 (OCP E4M3 and E5M2) encoder and decoder for tests, written apart from the library's (src/core/dtype.cc)
 * and by another method: a code is decoded from its fields with ldexp, and a value is encoded by searching every
 * finite code for the nearest one (ties to the code whose last bit is 0), then saturating as CUDA's
 * __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) does: past the largest finite magnitude (infinity included)
 * the result is that magnitude with the sign, a NaN is 0x7F. Slow (256 decodes per encode) and obvious on
 * purpose. Header-only: host tests, MPI tests and GPU tests include it.
 */
#ifndef VCCL_TESTS_COMMON_FP8_REFERENCE_H_
#define VCCL_TESTS_COMMON_FP8_REFERENCE_H_

#include <cmath>
#include <cstdint>

namespace fp8ref {

/* One format: mantissa bits, exponent bias, largest finite code, whether the top exponent is infinity/NaN. */
struct Format {
    int mant_bits;
    int bias;
    uint8_t max_code;
    bool ieee_specials; // e5m2: exponent 31 is infinity (mantissa 0) or NaN; e4m3: only S.1111.111 is NaN
};
constexpr Format kE4M3 = {3, 7, 0x7e, false};
constexpr Format kE5M2 = {2, 15, 0x7b, true};

inline double decode(uint8_t code, const Format& f) {
    const int exp_field = (code & 0x7f) >> f.mant_bits;
    const int mant = code & ((1 << f.mant_bits) - 1);
    const double sign = (code & 0x80) ? -1.0 : 1.0;
    const int top = 0x7f >> f.mant_bits;
    if (f.ieee_specials && exp_field == top) return mant == 0 ? sign * INFINITY : NAN;
    if (!f.ieee_specials && (code & 0x7f) == 0x7f) return NAN;
    if (exp_field == 0) return sign * std::ldexp(double(mant), 1 - f.bias - f.mant_bits);
    return sign * std::ldexp(double(mant + (1 << f.mant_bits)), exp_field - f.bias - f.mant_bits);
}

inline uint8_t encode(double v, const Format& f) {
    if (std::isnan(v)) return 0x7f;
    const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
    const double a = std::fabs(v);
    if (a >= decode(f.max_code, f)) return uint8_t(sign | f.max_code);
    uint8_t best = 0;
    double best_err = INFINITY;
    for (int c = 0; c <= f.max_code; ++c) {
        const double err = std::fabs(decode(uint8_t(c), f) - a);
        if (err < best_err || (err == best_err && (c & 1) == 0)) {
            best = uint8_t(c);
            best_err = err;
        }
    }
    return uint8_t(sign | best);
}

inline double e4m3_to_double(uint8_t c) { return decode(c, kE4M3); }
inline double e5m2_to_double(uint8_t c) { return decode(c, kE5M2); }
inline uint8_t double_to_e4m3(double v) { return encode(v, kE4M3); }
inline uint8_t double_to_e5m2(double v) { return encode(v, kE5M2); }

} // namespace fp8ref

#endif

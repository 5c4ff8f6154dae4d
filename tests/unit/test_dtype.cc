/* SPDX-License-Identifier: BSD-3-Clause */
#include <gtest/gtest.h>
#include <cmath>
#include <cstring>

#include "core/dtype.h"

using namespace vccl;

TEST(Dtype, SizesNamesAndValidity) {
    EXPECT_EQ(dtype_size(vcclInt8), 1u);
    EXPECT_EQ(dtype_size(vcclBfloat16), 2u);
    EXPECT_EQ(dtype_size(vcclFloat16), 2u);
    EXPECT_EQ(dtype_size(vcclFloat32), 4u);
    EXPECT_EQ(dtype_size(vcclUint64), 8u);
    EXPECT_EQ(dtype_size(vcclDataType_t(99)), 0u);
    EXPECT_FALSE(dtype_valid(vcclDataType_t(-1)));
    EXPECT_FALSE(dtype_valid(vcclNumTypes));
    EXPECT_FALSE(op_valid(vcclNumOps));
    EXPECT_EQ(dtype_from_name("bf16"), int(vcclBfloat16));
    EXPECT_EQ(dtype_from_name("nope"), -1);
    EXPECT_EQ(op_from_name("avg"), int(vcclAvg));
    EXPECT_STREQ(dtype_name(vcclFloat64), "double");
}

TEST(Dtype, HalfRoundTripsEveryValue) {
    // Every finite half converts to float and back unchanged; NaNs stay NaN.
    for (uint32_t h = 0; h < 0x10000u; ++h) {
        float f = half_to_float(uint16_t(h));
        if (std::isnan(f)) {
            EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f))));
            continue;
        }
        EXPECT_EQ(float_to_half(f), uint16_t(h)) << std::hex << h;
    }
}

TEST(Dtype, HalfRoundsToNearestEven) {
    EXPECT_EQ(half_to_float(float_to_half(1.0f)), 1.0f);
    EXPECT_EQ(float_to_half(65504.0f), 0x7bffu);
    EXPECT_EQ(float_to_half(65520.0f), 0x7c00u); // rounds up to infinity
    EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048), 0x3c00u); // halfway, even stays
    EXPECT_EQ(float_to_half(1.0f + 3.0f / 2048), 0x3c02u); // halfway, odd rounds up
    EXPECT_EQ(float_to_half(5.9604645e-8f), 0x0001u); // smallest subnormal
    EXPECT_EQ(float_to_half(2.9802322e-8f), 0x0000u); // exactly half of it: ties to even (0)
    EXPECT_EQ(float_to_half(-0.0f), 0x8000u);
}

TEST(Dtype, Bfloat16RoundsToNearestEven) {
    EXPECT_EQ(float_to_bf16(1.0f), 0x3f80u);
    EXPECT_EQ(bf16_to_float(0x3f80u), 1.0f);
    float x;
    uint32_t bits = 0x3f808000u; // halfway between 0x3f80 and 0x3f81: even stays
    memcpy(&x, &bits, 4);
    EXPECT_EQ(float_to_bf16(x), 0x3f80u);
    bits = 0x3f818000u; // halfway, odd rounds up
    memcpy(&x, &bits, 4);
    EXPECT_EQ(float_to_bf16(x), 0x3f82u);
    EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
    for (uint32_t b = 0; b < 0x10000u; ++b) {
        float f = bf16_to_float(uint16_t(b));
        if (!std::isnan(f)) {
            EXPECT_EQ(float_to_bf16(f), uint16_t(b));
        }
    }
}

/* SPDX-License-Identifier: BSD-3-Clause */
// libvccl_util (src/core/names.h, src/core/parse_size.h): the type/op name table and the size parser that
// the library and the tools share. Linked against libvccl_util alone: it needs nothing else of vccl.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/names.h"
#include "core/parse_size.h"

using namespace vccl;

namespace {

constexpr vcclDataType_t kTypes[] = {vcclInt8,   vcclUint8,   vcclInt32,    vcclUint32,     vcclInt64,     vcclUint64,
                                     vcclFloat16, vcclFloat32, vcclFloat64, vcclBfloat16, vcclFloat8e4m3, vcclFloat8e5m2};
constexpr vcclRedOp_t kOps[] = {vcclSum, vcclProd, vcclMax, vcclMin, vcclAvg};

struct Spelling {
    const char* name;
    vcclDataType_t type;
};
// Every spelling that the library's table (src/core/dtype.cc) or vccl-perf's -d (src/tools/perf/options.cc)
// accepted before they became one table (the two accepted the same nineteen), and the FP8 ones.
const Spelling kSpellings[] = {
    {"int8", vcclInt8},         {"char", vcclInt8},        {"uint8", vcclUint8},     {"int32", vcclInt32},
    {"int", vcclInt32},         {"uint32", vcclUint32},    {"int64", vcclInt64},     {"uint64", vcclUint64},
    {"half", vcclFloat16},      {"float16", vcclFloat16},  {"fp16", vcclFloat16},    {"float", vcclFloat32},
    {"float32", vcclFloat32},   {"fp32", vcclFloat32},     {"double", vcclFloat64},  {"float64", vcclFloat64},
    {"fp64", vcclFloat64},      {"bfloat16", vcclBfloat16}, {"bf16", vcclBfloat16},
    {"f8e4m3", vcclFloat8e4m3}, {"float8e4m3", vcclFloat8e4m3}, {"fp8e4m3", vcclFloat8e4m3}, {"e4m3", vcclFloat8e4m3},
    {"f8e5m2", vcclFloat8e5m2}, {"float8e5m2", vcclFloat8e5m2}, {"fp8e5m2", vcclFloat8e5m2}, {"e5m2", vcclFloat8e5m2},
};

std::string upper(const char* s) {
    std::string u(s);
    for (char& c : u) c = char(toupper(static_cast<unsigned char>(c)));
    return u;
}

bool size_of(const char* text, uint64_t* out) {
    *out = 0xdeadbeefull;
    return parse_size(text, out);
}

} // namespace

TEST(Names, CanonicalTypeNamesAreThePrintedOnes) {
    // What vccl-perf prints in its tables and JSON (nccl-tests spelling) and what log messages name.
    const char* const expected[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                                    "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
    for (size_t i = 0; i < sizeof(kTypes) / sizeof(kTypes[0]); ++i) EXPECT_STREQ(dtype_name(kTypes[i]), expected[i]);
    EXPECT_STREQ(dtype_name(vcclNumTypes), "invalid");
    EXPECT_STREQ(dtype_name(vcclDataType_t(-1)), "invalid");
}

TEST(Names, EverySpellingOfEveryType) {
    for (const Spelling& s : kSpellings) {
        EXPECT_EQ(dtype_from_name(s.name), int(s.type)) << s.name;
        EXPECT_EQ(dtype_from_name(upper(s.name).c_str()), int(s.type)) << upper(s.name); // case-insensitive
    }
    EXPECT_EQ(dtype_from_name("bF16"), int(vcclBfloat16));
    // A bare "fp8" or "float8" does not say which of the two formats.
    for (const char* bad :
         {"", "nope", "float8", "int16", "uint", "fp8", "f8", "e4m2", "bf", " float", "float ", "floatx"})
        EXPECT_EQ(dtype_from_name(bad), -1) << "'" << bad << "'";
    EXPECT_EQ(dtype_from_name(nullptr), -1);
}

TEST(Names, TypeRoundTrips) {
    for (vcclDataType_t t : kTypes) EXPECT_EQ(dtype_from_name(dtype_name(t)), int(t)) << dtype_name(t);
    // Any spelling goes to the type and back to that type's canonical name.
    for (const Spelling& s : kSpellings) {
        int t = dtype_from_name(s.name);
        ASSERT_GE(t, 0) << s.name;
        EXPECT_STREQ(dtype_name(vcclDataType_t(t)), dtype_name(s.type)) << s.name;
        EXPECT_EQ(dtype_from_name(dtype_name(vcclDataType_t(t))), t) << s.name;
    }
}

TEST(Names, Ops) {
    const char* const names[] = {"sum", "prod", "max", "min", "avg"};
    for (size_t i = 0; i < 5; ++i) {
        EXPECT_STREQ(op_name(kOps[i]), names[i]);
        EXPECT_EQ(op_from_name(names[i]), int(kOps[i])) << names[i];
        EXPECT_EQ(op_from_name(upper(names[i]).c_str()), int(kOps[i])) << upper(names[i]);
        EXPECT_EQ(op_from_name(op_name(kOps[i])), int(kOps[i])); // round trip
    }
    EXPECT_STREQ(op_name(vcclNumOps), "invalid"); // a communicator's PreMulSum op has no name here
    EXPECT_STREQ(op_name(vcclRedOp_t(-1)), "invalid");
    // vccl-perf's "premulsum" is an option of its own, not an operation of the table.
    for (const char* bad : {"", "premulsum", "add", "average", "mul", "sum "}) EXPECT_EQ(op_from_name(bad), -1) << bad;
    EXPECT_EQ(op_from_name(nullptr), -1);
}

TEST(Names, SizesAndValidity) {
    const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        EXPECT_TRUE(dtype_valid(kTypes[i]));
        EXPECT_EQ(dtype_size(kTypes[i]), sizes[i]) << dtype_name(kTypes[i]);
    }
    EXPECT_EQ(int(vcclNumTypes), 12) << "FP8 appended after bfloat16, with NCCL's values";
    EXPECT_FALSE(dtype_valid(vcclNumTypes));
    EXPECT_FALSE(dtype_valid(vcclDataType_t(-1)));
    EXPECT_EQ(dtype_size(vcclNumTypes), 0u);
    for (vcclRedOp_t op : kOps) EXPECT_TRUE(op_valid(op));
    EXPECT_FALSE(op_valid(vcclNumOps));
    EXPECT_FALSE(op_valid(vcclRedOp_t(-1)));
}

TEST(ParseSize, PlainNumbers) {
    uint64_t v;
    EXPECT_TRUE(size_of("0", &v)); EXPECT_EQ(v, 0u);
    EXPECT_TRUE(size_of("1", &v)); EXPECT_EQ(v, 1u);
    EXPECT_TRUE(size_of("17", &v)); EXPECT_EQ(v, 17u);
    EXPECT_TRUE(size_of("007", &v)); EXPECT_EQ(v, 7u); // decimal, not octal
    EXPECT_TRUE(size_of("18446744073709551615", &v)); EXPECT_EQ(v, UINT64_MAX);
}

TEST(ParseSize, Suffixes) {
    struct Case {
        const char* text;
        uint64_t value;
    };
    const Case cases[] = {
        {"1k", 1ull << 10},   {"1K", 1ull << 10},   {"64k", 64ull << 10}, {"4KB", 4ull << 10}, {"4kb", 4ull << 10},
        {"4Kb", 4ull << 10},  {"1m", 1ull << 20},   {"1M", 1ull << 20},   {"32M", 32ull << 20}, {"1MB", 1ull << 20},
        {"1mB", 1ull << 20},  {"1g", 1ull << 30},   {"1G", 1ull << 30},   {"2GB", 2ull << 30}, {"2gb", 2ull << 30},
        {"0K", 0},            {"0M", 0},            {"0G", 0},            {"16G", 16ull << 30},
    };
    for (const Case& c : cases) {
        uint64_t v;
        EXPECT_TRUE(size_of(c.text, &v)) << c.text;
        EXPECT_EQ(v, c.value) << c.text;
    }
}

TEST(ParseSize, Overflow) {
    uint64_t v;
    EXPECT_FALSE(size_of("18446744073709551616", &v)); // 2^64
    EXPECT_FALSE(size_of("99999999999999999999G", &v));
    EXPECT_TRUE(size_of("17179869183G", &v)); EXPECT_EQ(v, 17179869183ull << 30); // 2^64 - 2^30
    EXPECT_FALSE(size_of("17179869184G", &v)); // 2^34 G = 2^64
    EXPECT_TRUE(size_of("17592186044415M", &v)); EXPECT_EQ(v, 17592186044415ull << 20);
    EXPECT_FALSE(size_of("17592186044416M", &v));
    EXPECT_TRUE(size_of("18014398509481983K", &v)); EXPECT_EQ(v, 18014398509481983ull << 10);
    EXPECT_FALSE(size_of("18014398509481984K", &v));
}

TEST(ParseSize, JunkIsRejectedAndLeavesTheOutputAlone) {
    for (const char* bad : {"", "-1", "-0", "-1K", "abc", "K", "M", "1T", "1P", "1.5M", "1e3", "1 M", "1M ",
                            "1MBB", "1MBx", "1B", "1b", "64KiB", "0x10", "1,024", "1_000", "12a"}) {
        uint64_t v = 42;
        EXPECT_FALSE(parse_size(bad, &v)) << "'" << bad << "'";
        EXPECT_EQ(v, 42u) << "'" << bad << "'";
    }
    uint64_t v = 42;
    EXPECT_FALSE(parse_size(nullptr, &v));
    EXPECT_EQ(v, 42u);
}

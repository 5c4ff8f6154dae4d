/* SPDX-License-Identifier: BSD-3-Clause */
#include <gtest/gtest.h>
#include <cstdlib>
#include <set>
#include <string>

#include "core/env.h"

using namespace vccl;

TEST(Env, EveryVariableIsDeclaredOnceWithDocAndValidDefault) {
    size_t n = 0;
    const env::Var* vars = env::vars(&n);
    ASSERT_GT(n, 5u);
    std::set<std::string> names;
    for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(int(vars[i].id), int(i));
        EXPECT_TRUE(names.insert(vars[i].name).second) << vars[i].name;
        EXPECT_EQ(std::string(vars[i].name).rfind("VCCL_", 0), 0u) << vars[i].name;
        EXPECT_GT(strlen(vars[i].doc), 10u) << vars[i].name;
        int64_t iv; bool bv; uint64_t sv;
        switch (vars[i].type) {
        case env::Type::Int: EXPECT_TRUE(env::parse_int(vars[i].default_value, &iv)) << vars[i].name; break;
        case env::Type::Bool: EXPECT_TRUE(env::parse_bool(vars[i].default_value, &bv)) << vars[i].name; break;
        case env::Type::Size: EXPECT_TRUE(env::parse_size(vars[i].default_value, &sv)) << vars[i].name; break;
        case env::Type::Str: break;
        }
    }
}

TEST(Env, ParseInt) {
    int64_t v = 7;
    EXPECT_TRUE(env::parse_int("42", &v)); EXPECT_EQ(v, 42);
    EXPECT_TRUE(env::parse_int("-3", &v)); EXPECT_EQ(v, -3);
    v = 7;
    EXPECT_FALSE(env::parse_int("", &v));
    EXPECT_FALSE(env::parse_int("12abc", &v));
    EXPECT_FALSE(env::parse_int("abc", &v));
    EXPECT_FALSE(env::parse_int("99999999999999999999999", &v));
    EXPECT_EQ(v, 7); // untouched on failure
}

TEST(Env, ParseBool) {
    bool b = false;
    EXPECT_TRUE(env::parse_bool("YES", &b)); EXPECT_TRUE(b);
    EXPECT_TRUE(env::parse_bool("off", &b)); EXPECT_FALSE(b);
    EXPECT_TRUE(env::parse_bool("1", &b)); EXPECT_TRUE(b);
    EXPECT_FALSE(env::parse_bool("maybe", &b));
    EXPECT_FALSE(env::parse_bool("", &b));
}

TEST(Env, ParseSize) {
    uint64_t s = 0;
    EXPECT_TRUE(env::parse_size("1M", &s)); EXPECT_EQ(s, 1ull << 20);
    EXPECT_TRUE(env::parse_size("64k", &s)); EXPECT_EQ(s, 64ull << 10);
    EXPECT_TRUE(env::parse_size("2GB", &s)); EXPECT_EQ(s, 2ull << 30);
    EXPECT_TRUE(env::parse_size("17", &s)); EXPECT_EQ(s, 17u);
    EXPECT_FALSE(env::parse_size("-1", &s));
    EXPECT_FALSE(env::parse_size("1T", &s));
    EXPECT_FALSE(env::parse_size("99999999999999999999G", &s));
    EXPECT_FALSE(env::parse_size("", &s));
}

TEST(Env, ValuesComeFromTheEnvironmentAndFallBackOnGarbage) {
    setenv("VCCL_CHUNK_SIZE", "256K", 1);
    setenv("VCCL_OP_TIMEOUT_MS", "not-a-number", 1);
    env::reload();
    EXPECT_EQ(env::get_size(env::kChunkSize), 256u << 10);
    EXPECT_TRUE(env::is_set(env::kChunkSize));
    EXPECT_EQ(env::get_int(env::kOpTimeoutMs), 600000); // the default, with a warning
    unsetenv("VCCL_CHUNK_SIZE");
    unsetenv("VCCL_OP_TIMEOUT_MS");
    env::reload();
    EXPECT_FALSE(env::is_set(env::kChunkSize));
    EXPECT_EQ(env::get_size(env::kChunkSize), 1u << 20);
}

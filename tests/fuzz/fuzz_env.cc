/* SPDX-License-Identifier: BSD-3-Clause */
// libFuzzer target: the environment-variable parsers (src/core/env.h parse_int, parse_bool, parse_size).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/env.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size); // an environment value ends at its first NUL
    const char* s = text.c_str();
    int64_t i = 0x5a5a;
    if (!vccl::env::parse_int(s, &i) && i != 0x5a5a) abort(); // outputs untouched on failure
    bool b = false;
    (void)vccl::env::parse_bool(s, &b);
    uint64_t z = 0x5a5a;
    if (vccl::env::parse_size(s, &z)) {
        // A size is a number with an optional k/m/g[b] suffix: the value must not have wrapped.
        char* end = nullptr;
        unsigned long long v = strtoull(s, &end, 10);
        if (z < v) abort();
    } else if (z != 0x5a5a) {
        abort();
    }
    return 0;
}

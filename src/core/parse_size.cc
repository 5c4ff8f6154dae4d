/* SPDX-License-Identifier: BSD-3-Clause */
#include "core/parse_size.h"

#include <cerrno>
#include <cstdlib>

namespace vccl {

bool parse_size(const char* text, uint64_t* out) {
    if (text == nullptr || *text == '\0' || *text == '-') return false;
    errno = 0;
    char* end = nullptr;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text) return false;
    uint64_t mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1ull << 10; end++; break;
    case 'm': case 'M': mult = 1ull << 20; end++; break;
    case 'g': case 'G': mult = 1ull << 30; end++; break;
    default: break;
    }
    if (mult != 1 && (*end == 'b' || *end == 'B')) end++;
    if (*end != '\0') return false;
    if (v != 0 && mult > UINT64_MAX / v) return false;
    *out = uint64_t(v) * mult;
    return true;
}

} // namespace vccl

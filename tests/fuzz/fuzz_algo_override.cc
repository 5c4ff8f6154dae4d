/* SPDX-License-Identifier: BSD-3-Clause */
// libFuzzer target: the VCCL_ALGO parser (vccl::algo_parse_override in src/algo/algo.h). The first input byte
// picks the error buffer's size (0-255 bytes: truncation of long messages must stay inside it), the rest is
// the value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "algo/algo.h"
#include "algo/device/device_algo.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    size_t error_len = data[0];
    std::string spec(reinterpret_cast<const char*>(data + 1), size - 1);
    const vccl::Algorithm* chosen[int(vccl::CollType::kCount)];
    const vccl::DeviceAlgorithm* device[int(vccl::CollType::kCount)];
    for (auto& c : chosen) c = nullptr;
    std::vector<char> error(error_len + 1, '\x7f'); // one guard byte past the size given
    (void)vccl::algo_parse_override(spec.c_str(), chosen, error_len ? error.data() : nullptr, error_len, device);
    if (error[error_len] != '\x7f') abort();
    if (error_len > 0 && memchr(error.data(), '\0', error_len) == nullptr && error[0] != '\x7f') abort();
    for (int c = 0; c < int(vccl::CollType::kCount); ++c) {
        if (chosen[c] != nullptr && int(chosen[c]->coll) != c) abort();
        if (device[c] != nullptr && int(device[c]->coll) != c) abort();
    }
    return 0;
}

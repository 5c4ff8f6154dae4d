/* SPDX-License-Identifier: BSD-3-Clause */
// libFuzzer target: vccl::uid::decode (the bytes of a vcclUniqueId, which users pass around by any means).
// Each input is decoded as given, then again with its checksum fixed so that the fuzzer gets past it; an id
// that decodes must encode back to the same 128 bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "bootstrap/tcp/unique_id.h"

namespace {
uint64_t fnv1a64(const uint8_t* p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void check(const vcclUniqueId& id) {
    vccl::uid::Info info;
    if (vccl::uid::decode(id, &info) != vcclSuccess) return;
    (void)info.root.to_string();
    vcclUniqueId again;
    vccl::uid::encode(info, &again);
    if (memcmp(&again, &id, sizeof(id)) != 0) abort(); // decode accepted bytes that encode does not produce
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    vcclUniqueId id;
    memset(&id, 0, sizeof(id));
    memcpy(&id, data, size < sizeof(id) ? size : sizeof(id));
    check(id);
    uint8_t* raw = reinterpret_cast<uint8_t*>(id.internal);
    uint64_t sum = fnv1a64(raw, vccl::uid::kChecksumOffset);
    for (int i = 0; i < 8; ++i) raw[vccl::uid::kChecksumOffset + i] = uint8_t(sum >> (8 * i));
    check(id);
    return 0;
}

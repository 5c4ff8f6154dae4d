/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The content of a vcclUniqueId (128 bytes, opaque to users). Layout, format version 1 (little-endian):
 *
 *   offset  size  field
 *        0     4  magic 0x44494356 ("VCID")
 *        4     2  format version (1)
 *        6     2  reserved, zero
 *        8    20  root address (wire::Writer::addr: family, 0, port, 16 address bytes)
 *       28    16  secret: 128 random bits; only holders of the id can join the bootstrap
 *       44     8  checksum: FNV-1a 64 of bytes [0, 44)
 *       52    76  reserved, zero
 *
 * FNV-1a changes its state bijectively on every byte, so any change confined to one byte of [0, 44) always
 * changes the checksum; the reserved bytes must be zero. Together every single-byte corruption is caught.
 */
#ifndef VCCL_BOOTSTRAP_TCP_UNIQUE_ID_H_
#define VCCL_BOOTSTRAP_TCP_UNIQUE_ID_H_

#include <cstddef>
#include <cstdint>

#include "bootstrap/tcp/socket_util.h"
#include "bootstrap/tcp/wire.h"
#include "vccl.h"

namespace vccl {
namespace uid {

constexpr uint32_t kMagic = 0x44494356u;
constexpr uint16_t kVersion = 1;
constexpr size_t kChecksumOffset = 44;
constexpr size_t kHeaderBytes = 52; // the region with meaning; the rest is reserved

struct Info {
    sock::SockAddr root;
    uint8_t secret[wire::kSecretBytes] = {0};
};

void encode(const Info& info, vcclUniqueId* out);
/* vcclInvalidArgument with "not a vccl unique id (...)" when the bytes were not produced by encode(). */
vcclResult_t decode(const vcclUniqueId& id, Info* out);

/* Fills buf with bytes from the kernel's CSPRNG (getrandom, else /dev/urandom). */
vcclResult_t random_bytes(void* buf, size_t bytes);

} // namespace uid
} // namespace vccl

#endif

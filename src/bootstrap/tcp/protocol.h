/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Messages of the TCP bootstrap.
 *
 * Registration (rank -> root, one connection per rank):
 *   hello  = magic "HELO", protocol version, secret[16], rank, nranks, the rank's listen address  (52 bytes)
 *   reply  = magic "TABL", status, nranks, ranks registered                                        (16 bytes)
 *            followed, when status is kOk, by nranks addresses (the table, in rank order).
 *   A hello with a wrong magic or secret gets no reply: the root closes the connection.
 *
 * Peer traffic (rank s -> rank d, one connection per ordered pair, written only by s):
 *   preamble = magic "PEER", protocol version, secret[16], s, d                                     (32 bytes)
 *   then messages: header {tag u64, bytes u64} followed by the payload.
 *   Authenticating once per connection is enough: a TCP stream cannot be joined by a third party.
 */
#ifndef VCCL_BOOTSTRAP_TCP_PROTOCOL_H_
#define VCCL_BOOTSTRAP_TCP_PROTOCOL_H_

#include <cstddef>
#include <cstdint>

#include "bootstrap/tcp/wire.h"

namespace vccl {
namespace tcpproto {

constexpr uint32_t kHelloMagic = 0x4f4c4548u; // "HELO"
constexpr uint32_t kTableMagic = 0x4c424154u; // "TABL"
constexpr uint32_t kPeerMagic = 0x52454550u;  // "PEER"
constexpr uint32_t kVersion = 1;

constexpr size_t kHelloBytes = 4 + 4 + wire::kSecretBytes + 4 + 4 + wire::kAddrBytes;
constexpr size_t kReplyBytes = 16;
constexpr size_t kPreambleBytes = 4 + 4 + wire::kSecretBytes + 4 + 4;
constexpr size_t kMsgHeaderBytes = 16;

/* Far above any real job; bounds what a (secret-holding but confused) client can make the root allocate. */
constexpr uint32_t kMaxRanks = 1u << 20;
/* Largest single bootstrap message accepted from a peer (bootstrap data is small; this only guards
 * against a corrupted header making us allocate without bound). */
constexpr uint64_t kMaxMessageBytes = 1ull << 34;

enum RootStatus : uint32_t {
    kOk = 0,
    kBadRank = 1,        // rank outside [0, nranks) or nranks outside [1, kMaxRanks]
    kNranksMismatch = 2, // another rank registered with a different nranks
    kDuplicateRank = 3,  // this rank already registered
    kRootTimedOut = 4,   // the root stopped waiting for the missing ranks
    kBadVersion = 5,     // a different protocol version
};

inline const char* root_status_text(uint32_t s) {
    switch (s) {
    case kOk: return "ok";
    case kBadRank: return "rank or nranks out of range";
    case kNranksMismatch: return "nranks differs from the nranks other ranks registered with";
    case kDuplicateRank: return "another process already registered with this rank";
    case kRootTimedOut: return "the root gave up waiting for the missing ranks";
    case kBadVersion: return "the root speaks a different bootstrap protocol version";
    default: return "unknown status";
    }
}

} // namespace tcpproto
} // namespace vccl

#endif

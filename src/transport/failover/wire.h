/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the failover layer puts on each path (one UCX transport per path, 44-bit tags per sender).
 *
 * Tag = kind (2 bits) | message id (30 bits) | chunk index (12 bits). Message ids count the messages from
 * one rank to another (per direction, never reused before 2^30 more messages), so a chunk that arrives
 * late on a path that was given up matches no receive and can never corrupt a later message.
 *
 *   kEnvelope  one per message: the caller's tag, length and chunking, plus the data itself when small.
 *   kData      chunk i of message m, straight into the receiver's buffer.
 *   kControl   acknowledgements, resume requests and probes (Control below), any path.
 */
#ifndef VCCL_TRANSPORT_FAILOVER_WIRE_H_
#define VCCL_TRANSPORT_FAILOVER_WIRE_H_

#include <cstddef>
#include <cstdint>

namespace vccl {
namespace failover {

enum class Kind : uint64_t { kEnvelope = 0, kData = 1, kControl = 2 };

constexpr int kChunkBits = 12;
constexpr int kIdBits = 30;
constexpr uint32_t kIdMask = (1u << kIdBits) - 1;
constexpr uint32_t kMaxChunks = (1u << kChunkBits) - 1;

inline uint64_t wire_tag(Kind kind, uint32_t id, uint32_t chunk) {
    return (uint64_t(kind) << (kIdBits + kChunkBits)) | (uint64_t(id & kIdMask) << kChunkBits) | chunk;
}

/* Data up to this size travels inside the envelope: one message instead of two for small transfers. */
constexpr size_t kInlineBytes = 4096;
/* Chunks are at least this large; larger messages use larger chunks to stay within kMaxChunks. */
constexpr size_t kMinChunkBytes = 1u << 20;

struct Envelope {
    uint32_t magic;
    uint32_t id;
    uint64_t tag;      // the caller's tag
    uint64_t bytes;    // message length
    uint64_t chunk_bytes;
    uint32_t nchunks;  // 0: the data (if any) follows the envelope inline
    uint32_t flags;    // kEnvelopeSplit: the chunks' paths follow the envelope
};
/* Spray: one bit per chunk follows the envelope (chunk c's bit is bit c % 8 of byte c / 8): set, chunk c
 * travels on path 1, clear, on path 0. The receiver posts each chunk's receive on that path. */
constexpr uint32_t kEnvelopeSplit = 1;
inline size_t split_bytes(uint32_t nchunks) { return (size_t(nchunks) + 7) / 8; }
constexpr uint32_t kEnvelopeMagic = 0x76656e76; // "venv"

enum class ControlType : uint32_t {
    kAck = 1,       // envelopes below `upto` arrived; `ids` completed at the receiver; `nonce`: the receiver's
                    // measured arrival speed per path, KiB/s, path 0 in the low 32 bits (0: not measured)
    kResume = 2,    // "I moved to `path` at `epoch`; resend to me from these points" (receiver driven);
                    // `nonce` bits: kResumeWantsAnswer, kResumeFailback
    kProbe = 3,     // is this path alive? (answered on the same path); `path`: the prober's active path;
                    // `count` 1: also asks whether message `epoch` (prober to replier) completed there
    kProbeReply = 4, // `path` as in the probe; `upto`: ms since the replier last received anything from the
                     // prober on that path (kNeverReceived: nothing yet), so a one-way loss is told from a
                     // slow or busy path; `count` 1: the message asked about completed here
};

struct ResumePoint {
    uint32_t id;          // a message the receiver has matched or buffered but not completed
    uint32_t first_chunk; // resend from this chunk on
};

constexpr size_t kControlItems = 120;

struct Control {
    uint32_t magic;
    uint32_t type;   // ControlType
    uint32_t epoch;  // kResume: the switch it belongs to
    uint32_t path;   // kResume: the path both sides use from now on
    uint32_t upto;   // kAck: envelopes with smaller ids arrived. kResume: first envelope not received
    uint32_t count;  // items that follow
    uint64_t nonce;  // kProbe / kProbeReply
    union {
        uint32_t ids[2 * kControlItems];       // kAck
        ResumePoint points[kControlItems];     // kResume
    };
};
constexpr uint32_t kControlMagic = 0x7663746c; // "vctl"
constexpr uint32_t kNeverReceived = 0xffffffffu;
constexpr uint64_t kResumeWantsAnswer = 1; // the sender still waits for the receiver's RESUME
constexpr uint64_t kResumeFailback = 2;    // a voluntary move back to the primary: the path left still works
constexpr uint64_t kResumeSpray = 4;       // spray: the path stays, the other one was lost (close it, resend there)
constexpr size_t kControlHeader = offsetof(Control, ids);

} // namespace failover
} // namespace vccl

#endif

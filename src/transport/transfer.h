/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One send or receive with one peer, as every layer below the communicator speaks of it: the API's vcclSend and
 * vcclRecv, the transfers the device collectives are made of, and what the transports carry. Device memory is
 * moved in the order of its stream; host memory is done when the batch returns.
 */
#ifndef VCCL_TRANSPORT_TRANSFER_H_
#define VCCL_TRANSPORT_TRANSFER_H_

#include <cstddef>
#include <cstdint>

#include "transport/transport.h"
#include "vccl.h"

namespace vccl {

struct Transfer {
    enum Kind : uint8_t { Send, Recv };
    Kind kind = Send;
    int peer = 0;
    MemType mem = MemType::Host;
    vcclStream_t stream = nullptr;
    const void* sendbuf = nullptr; // Send
    void* recvbuf = nullptr;       // Recv
    size_t bytes = 0;
    // Send on the direct device path: the peer's receive buffer is known to be free, because this stream already
    // waited for something the peer's stream did after it reached this transfer's collective (the all-gather of an
    // AllReduce, after the reduce-scatter's DONE waits): the READY wait is left out (IpcP2p::post_send).
    bool peer_buffer_free = false;
    // Captured into a CUDA graph (the stream is capturing): the direct path's graph protocol, or an error
    // (transport/cuda_ipc/ipc_p2p.h).
    bool captured = false;
};

/* Tags of point-to-point traffic on a communicator's host transport: bit 43 set marks it (collectives use their
 * sequence number below it). Descriptors exchanged before direct device transfers take one tag per direction of
 * the described transfer; pieces after the first of a large message (host_batch.h) kP2pTagBit | kP2pPieceTagBit | k. */
constexpr uint64_t kP2pTagBit = 1ull << (kTagBits - 1);
constexpr uint64_t kP2pSendDescTag = kP2pTagBit | 1;
constexpr uint64_t kP2pRecvDescTag = kP2pTagBit | 2;
constexpr uint64_t kP2pPieceTagBit = 1ull << 32;

inline bool ranges_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
    auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
    return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

} // namespace vccl

#endif

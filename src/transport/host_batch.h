/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A batch of sends and receives over the host transport: every receive posted, then every send, then all of
 * them waited for, so that peers may post in any order. Host memory only (the staged path copies device buffers
 * to and from pinned memory around it). Messages over the staging chunk travel as pieces with tags of their own,
 * so that a staged peer can move one piece while its stream copies the next and still match a peer that posts
 * the whole message at once.
 */
#ifndef VCCL_TRANSPORT_HOST_BATCH_H_
#define VCCL_TRANSPORT_HOST_BATCH_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/scratch_arena.h"
#include "transport/staging/staged_pieces.h"
#include "transport/transfer.h"
#include "transport/transport.h"

namespace vccl {

/* What a batch runs with: the communicator's transport and limits. */
struct HostBatchEnv {
    Transport* transport = nullptr;
    int64_t op_timeout_ms = 0;                 // VCCL_OP_TIMEOUT_MS (0: no limit)
    const std::atomic<bool>* aborted = nullptr; // vcclCommAbort ends the waits
    ScratchArena* scratch = nullptr;           // copies of sends whose buffer a receive of the batch writes
    uint64_t piece_bytes = 0;                  // VCCL_STAGING_CHUNK_BYTES (agreed by all ranks)
};

/* Waits for every request (they stay owned by the caller), honouring abort and VCCL_OP_TIMEOUT_MS. */
vcclResult_t host_wait_all(const HostBatchEnv& env, const std::vector<TransportRequest*>& reqs);
/* Runs the batch; `only_piece`: that piece of each transfer (those with fewer are left out), or all when
 * negative. */
vcclResult_t host_batch_run(const HostBatchEnv& env, const std::vector<const Transfer*>& batch, long only_piece = -1);
/* How a message of `bytes` is cut into pieces. */
inline PieceCut host_batch_pieces(const HostBatchEnv& env, size_t bytes) { return staged_cut(bytes, 1, env.piece_bytes); }

} // namespace vccl

#endif

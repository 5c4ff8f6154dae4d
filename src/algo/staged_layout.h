/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where a collective on device buffers staged through host memory puts its data: the copies between the
 * caller's device buffers and one pinned slot, and the host collective that runs on the slot between them,
 * piece by piece (transport/staging/staged_pieces.h says how the count is cut). Both staging paths (the asynchronous queue
 * and the synchronous one in comm/enqueue.cc) run the same plan, so ranks on either path exchange the same
 * messages.
 *
 * AllReduce, Broadcast, Reduce: one region of the count's elements; piece k runs on elements [first, first +
 * count) of it. AllGather, ReduceScatter, AlltoAll: piece k takes elements [first, first + count) of every
 * rank's block (a column), packed into its own area of the slot so its host collective sees contiguous blocks;
 * the copies of a column are 2-D (one row per rank), or plain with one piece.
 *
 * The host collective runs in place except AlltoAll, whatever the call's placement: every input is copied in
 * before any output is copied back, so the caller's aliasing cannot matter, and these are the host algorithms'
 * cheaper forms (an out-of-place AllGather copies its own block across; an in-place AlltoAll copies its whole
 * input aside first). The slot is one region, two for AlltoAll.
 */
#ifndef VCCL_ALGO_STAGED_LAYOUT_H_
#define VCCL_ALGO_STAGED_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algo/algo.h"
#include "transport/staging/staging_buffer.h"

namespace vccl {

/* Bytes a collective reads from sendbuf and writes to recvbuf on `rank` of `nranks`. */
void coll_io_bytes(int nranks, int rank, const CollArgs& a, size_t* in, size_t* out);

/* One piece: its copies into the slot (before its host collective) and out of it (after). */
struct StagedPiece {
    std::vector<StagedCopy> in, out;
    size_t send_offset = 0, recv_offset = 0; // the host collective's buffers, as offsets into the slot
    size_t count = 0;                        // and its count
};

struct StagedPlan {
    size_t slot_bytes = 0;
    std::vector<StagedPiece> pieces; // at least one; they run in order on every rank
};

/* The plan of collective `a` (device buffers) on `rank` of `nranks`, cut at `chunk_bytes`
 * (VCCL_STAGING_CHUNK_BYTES, the communicator's agreed value; 0: one piece). */
StagedPlan staged_plan(int nranks, int rank, uint64_t chunk_bytes, const CollArgs& a);

/* The host collective of `piece` on the slot at `slot`: `a` with its buffers moved there (a null buffer stays
 * null: Broadcast's send buffer off the root, Reduce's receive buffer off the root). */
CollArgs staged_host_args(const CollArgs& a, const StagedPiece& piece, char* slot);

} // namespace vccl

#endif

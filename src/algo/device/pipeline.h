/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The copy-engine reductions the device algorithms share: every rank receives its block from each peer into the
 * reduction scratch and one kernel reduces them (reduce_scatter_blocks), or the same in pieces whose kernels run on
 * the communicator's second stream while the next piece moves (reduce_scatter_pieces).
 */
#ifndef VCCL_ALGO_DEVICE_PIPELINE_H_
#define VCCL_ALGO_DEVICE_PIPELINE_H_

#include <functional>

#include "algo/device/device_algo.h"

namespace vccl {

/* Each piece costs two batches of host work (descriptor exchange, stream operations) and a kernel launch, tens of
 * microseconds, and a piece whose transfers take about as long leaves the host behind the device. So: 2 pieces from
 * twice VCCL_REDUCE_PIPELINE_BYTES on, then one piece per twice the setting, at most `max_pieces`, and more where
 * the scratch would exceed VCCL_REDUCE_SCRATCH_BYTES (algo/device/reduce_pieces.h).
 *
 * AllReduce stops at 2: from the third piece on, each waits for the peers' READY (their reduction of the piece
 * before has read the scratch half), and beside a kernel that holds every SM (a large GEMM) each piece's reduction
 * waits for that kernel to end. Two pieces lose nothing to the pipeline: the first piece's reduction runs while the
 * second piece moves, and the second's while the first piece's all-gather moves. ReduceScatter has no all-gather to
 * hide its last reduction behind, so it keeps smaller pieces (docs/PERFORMANCE.md has the figures). */
constexpr int kAllReduceMaxPieces = 2;

/* Pieces of a pipelined reduction of `bytes` (one rank's whole input): the same on every rank (the settings are
 * agreed at creation, the sizes are the call's). */
int pipeline_pieces(const DevicePath& dev, size_t bytes, int max_pieces);

/* Each rank reduces its block of the input from all ranks into `out`: equal blocks of equal_count elements (rank i
 * at i * equal_count), or the nearly equal blocks of count_total split across ranks (block_range). */
vcclResult_t reduce_scatter_blocks(DevicePath& dev, const Op& op, const char* send, char* out, size_t ts,
                                   size_t count_total, bool equal_blocks, size_t equal_count, bool peers_free);

/* Where rank i's part of piece c lies in the input: element offset and element count. */
using PartFn = std::function<void(int i, int c, size_t* elem_offset, size_t* elems)>;

/* Reduce-scatter in `pieces` pieces. Piece c's transfers go on the caller's stream and its reduction (into out(c))
 * on the communicator's second stream, where it runs while piece c + 1 moves; then(c) enqueues on the caller's
 * stream what needs piece c reduced (AllReduce: that piece's all-gather), after the caller's stream waited for the
 * reduction. Two halves of the scratch buffer alternate: piece c + 2 lands in piece c's half only after the
 * caller's stream waited for piece c's reduction, since the peers' copies wait for this rank's READY, which that
 * stream writes after it. Every rank enqueues the same sequence of batches. */
vcclResult_t reduce_scatter_pieces(DevicePath& dev, const Op& op, const char* send, size_t ts, int pieces,
                                   const PartFn& part, const std::function<char*(int c)>& out,
                                   const std::function<vcclResult_t(int c)>& then, bool peers_free);

} // namespace vccl

#endif

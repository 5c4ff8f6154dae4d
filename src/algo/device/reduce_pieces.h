/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How many pieces a device AllReduce or ReduceScatter among the GPUs of one host is cut into (algo/device/registry.cc):
 * each piece's reduction kernel runs on the communicator's second stream while the next piece moves, and the
 * pieces land in two halves of the reduction scratch, which the communicator keeps until it is destroyed. Plain
 * arithmetic on the call's size and the agreed settings, so every rank cuts the same pieces; unit-tested in
 * tests/unit/test_reduce.cc.
 */
#ifndef VCCL_ALGO_DEVICE_REDUCE_PIECES_H_
#define VCCL_ALGO_DEVICE_REDUCE_PIECES_H_

#include <cstddef>

namespace vccl {

/* Never more: each piece costs two batches of host work and a kernel launch, and from the third piece on a READY
 * handshake (docs/PERFORMANCE.md). */
constexpr int kReduceMaxPieces = 8;

/* Scratch that `pieces` (>= 2) pieces of a reduction take on each rank: two halves, each holding one piece's
 * part from every other rank. `bytes` is one rank's whole input, cut into nranks nearly equal blocks. */
size_t reduce_pieces_scratch(size_t bytes, int nranks, int pieces);

/* Pieces of a reduction of `bytes` (one rank's whole input): 1 below twice `piece_bytes` (VCCL_REDUCE_PIPELINE_BYTES;
 * 0: always 1); else 2, and from 4x one per 2x `piece_bytes`, at most `max_pieces`; then more, up to
 * kReduceMaxPieces, while the scratch would exceed `scratch_limit` (VCCL_REDUCE_SCRATCH_BYTES; 0: no limit). */
int reduce_pieces(size_t bytes, int nranks, size_t piece_bytes, int max_pieces, size_t scratch_limit);

} // namespace vccl

#endif

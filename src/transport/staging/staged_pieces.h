/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How a collective staged through host memory is cut into pieces: a large one runs as consecutive
 * collectives over pieces of at most VCCL_STAGING_CHUNK_BYTES, and the staged queue copies one piece to or
 * from the GPU while the network moves another (StagedQueue::Part). AllReduce, Broadcast and Reduce are cut
 * into element ranges; AllGather, ReduceScatter and AlltoAll into the same element range of every rank's
 * block (algo/staged_layout.h places them). Sizes up to one chunk are one piece. Send/recv messages are cut
 * the same way, in bytes, whatever their memory (transport/cuda_ipc/direct_path.cc, p2p_pieces).
 *
 * Every rank must cut alike: the host algorithm runs once per piece, so the messages differ from those of
 * one uncut collective. The cut depends only on the count, the datatype and the setting (rank 0's, comm_init.cc),
 * and both staging paths (asynchronous and synchronous) use it; a collective whose buffers are device memory
 * on some ranks and host memory on others is not supported (vccl(7)).
 */
#ifndef VCCL_TRANSPORT_STAGING_STAGED_PIECES_H_
#define VCCL_TRANSPORT_STAGING_STAGED_PIECES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vccl {

struct ElemPiece {
    size_t first; // first element
    size_t count; // elements
};

/* At most this many pieces: larger collectives get larger pieces. Each piece puts about four commands on the
 * caller's stream (copy in, READY, wait, copy out), and CUDA's queue for a stream is finite: behind a stream
 * the caller's own kernel keeps busy, thousands of pieces filled it and the call waited for the device. */
constexpr size_t kMaxStagedPieces = 64;

/* How `count` elements of `elem_bytes` each are cut: pieces of `per` elements, the last one shorter. Indexing
 * it builds nothing, for send/recv, which cuts every message on the hot path. */
struct PieceCut {
    size_t count;
    size_t per; // elements per piece (count itself when not cut)
    size_t size() const { return count == 0 ? 1 : (count + per - 1) / per; }
    ElemPiece operator[](size_t k) const {
        size_t first = k * per;
        return {first, count - first < per ? count - first : per};
    }
};

/* Pieces at most `chunk_bytes` long (at least one element each, at most max_pieces pieces); one piece when
 * chunk_bytes is 0 or the whole fits in one chunk. count 0 is one empty piece. */
inline PieceCut staged_cut(size_t count, size_t elem_bytes, uint64_t chunk_bytes,
                           size_t max_pieces = kMaxStagedPieces) {
    if (chunk_bytes == 0 || elem_bytes == 0 || uint64_t(count) * elem_bytes <= chunk_bytes) return {count, count};
    size_t per = size_t(chunk_bytes / elem_bytes);
    if (per == 0) per = 1;
    if (max_pieces > 0 && count / per >= max_pieces) per = (count + max_pieces - 1) / max_pieces;
    return {count, per};
}

/* The same pieces, listed. */
inline std::vector<ElemPiece> staged_pieces(size_t count, size_t elem_bytes, uint64_t chunk_bytes,
                                            size_t max_pieces = kMaxStagedPieces) {
    PieceCut cut = staged_cut(count, elem_bytes, chunk_bytes, max_pieces);
    std::vector<ElemPiece> pieces;
    pieces.reserve(cut.size());
    for (size_t k = 0; k < cut.size(); ++k) pieces.push_back(cut[k]);
    return pieces;
}

} // namespace vccl

#endif

/*
 * How a collective staged through host memory is cut into pieces: a large one runs as consecutive
 * collectives over pieces of at most VCCL_STAGING_CHUNK_BYTES, and the staged queue copies one piece to or
 * from the GPU while the network moves another (StagedQueue::Part). AllReduce, Broadcast and Reduce are cut
 * into element ranges; AllGather, ReduceScatter and AlltoAll into the same element range of every rank's
 * block (comm/staged_layout.h places them). Sizes up to one chunk are one piece. Send/recv messages are cut
 * the same way, in bytes, whatever their memory (comm/p2p_exec.cc, p2p_pieces).
 *
 * Every rank must cut alike: the host algorithm runs once per piece, so the messages differ from those of
 * one uncut collective. The cut depends only on the count, the datatype and the setting (rank 0's, comm_init.cc),
 * and both staging paths (asynchronous and synchronous) use it; a collective whose buffers are device memory
 * on some ranks and host memory on others is not supported (vccl(7)).
 */
#ifndef VCCL_COMM_STAGED_PIECES_H_
#define VCCL_COMM_STAGED_PIECES_H_

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

/* Pieces of `count` elements of `elem_bytes` each, at most `chunk_bytes` long (at least one element each,
 * at most max_pieces pieces); one piece when chunk_bytes is 0 or the whole fits in one chunk. count 0 is one
 * empty piece. */
inline std::vector<ElemPiece> staged_pieces(size_t count, size_t elem_bytes, uint64_t chunk_bytes,
                                            size_t max_pieces = kMaxStagedPieces) {
    if (chunk_bytes == 0 || elem_bytes == 0 || uint64_t(count) * elem_bytes <= chunk_bytes) return {{0, count}};
    size_t per = size_t(chunk_bytes / elem_bytes);
    if (per == 0) per = 1;
    if (max_pieces > 0 && count / per >= max_pieces) per = (count + max_pieces - 1) / max_pieces;
    std::vector<ElemPiece> pieces;
    pieces.reserve((count + per - 1) / per);
    for (size_t first = 0; first < count; first += per) {
        pieces.push_back({first, count - first < per ? count - first : per});
    }
    return pieces;
}

} // namespace vccl

#endif

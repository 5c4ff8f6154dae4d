/* SPDX-License-Identifier: BSD-3-Clause */
#include "algo/device/reduce_pieces.h"

#include <algorithm>

namespace vccl {

size_t reduce_pieces_scratch(size_t bytes, int nranks, int pieces) {
    if (nranks < 2 || pieces < 1) return 0;
    const size_t n = size_t(nranks), p = size_t(pieces);
    const size_t block = (bytes + n - 1) / n; // the largest block (block_range spreads the remainder)
    const size_t part = (block + p - 1) / p;  // the largest part of a piece
    return 2 * part * (n - 1);
}

int reduce_pieces(size_t bytes, int nranks, size_t piece_bytes, int max_pieces, size_t scratch_limit) {
    if (piece_bytes == 0 || nranks < 2 || bytes / 2 < piece_bytes) return 1;
    int pieces = int(std::max<size_t>(2, std::min<size_t>(bytes / 2 / piece_bytes, size_t(std::max(max_pieces, 2)))));
    while (scratch_limit > 0 && pieces < kReduceMaxPieces && reduce_pieces_scratch(bytes, nranks, pieces) > scratch_limit)
        ++pieces;
    return pieces;
}

} // namespace vccl

/* SPDX-License-Identifier: BSD-3-Clause */
#include "algo/staged_layout.h"

#include "transport/staging/staged_pieces.h"
#include "core/dtype.h"

namespace vccl {

namespace {

bool cut_by_columns(CollType c) {
    return c == CollType::AllGather || c == CollType::ReduceScatter || c == CollType::AlltoAll;
}

/* AllReduce, Broadcast, Reduce: one region of count elements, the host collective in place on it; piece k
 * runs on its elements. A rank without input (Broadcast off the root) or output (Reduce off the root) copies
 * nothing that way. */
StagedPlan plan_elementwise(const CollArgs& a, size_t in, size_t out, const std::vector<ElemPiece>& cut) {
    StagedPlan plan;
    const size_t e = dtype_size(a.dtype);
    plan.slot_bytes = a.count * e;
    char* dsend = const_cast<char*>(static_cast<const char*>(a.sendbuf));
    char* drecv = static_cast<char*>(a.recvbuf);
    for (const ElemPiece& p : cut) {
        StagedPiece piece;
        const size_t skip = p.first * e, bytes = p.count * e;
        if (in > 0) piece.in.push_back({dsend + skip, skip, bytes});
        if (out > 0) piece.out.push_back({drecv + skip, skip, bytes});
        piece.send_offset = piece.recv_offset = skip;
        piece.count = p.count;
        plan.pieces.push_back(std::move(piece));
    }
    return plan;
}

/* Column k of n device blocks of `row` bytes, `w` bytes wide, packed at `offset` in the slot: one row per rank,
 * or one plain copy when the column is the whole blocks (one piece). */
StagedCopy column(char* device, size_t offset, size_t w, size_t n, size_t row) {
    if (w == row) return StagedCopy{device, offset, n * w};
    return StagedCopy{device, offset, w, n, row, w};
}

/* AllGather, ReduceScatter, AlltoAll: piece k holds its column of every rank's block, packed (rank by rank,
 * `w` bytes each) at n * first * e in an area of n blocks; AlltoAll's output area follows the input one. */
StagedPlan plan_by_columns(int nranks, int rank, const CollArgs& a, const std::vector<ElemPiece>& cut) {
    StagedPlan plan;
    const size_t n = size_t(nranks), e = dtype_size(a.dtype), me = size_t(rank);
    const size_t row = a.count * e; // a rank's block on the device: the pitch of a column's rows
    const size_t area = n * row;
    char* dsend = const_cast<char*>(static_cast<const char*>(a.sendbuf));
    char* drecv = static_cast<char*>(a.recvbuf);
    plan.slot_bytes = a.coll == CollType::AlltoAll ? 2 * area : area;
    for (const ElemPiece& p : cut) {
        StagedPiece piece;
        const size_t w = p.count * e, col = p.first * e, base = n * col;
        piece.count = p.count;
        switch (a.coll) {
        case CollType::AllGather: // this rank's input goes to its row of the column
            piece.in.push_back({dsend + col, base + me * w, w});
            piece.out.push_back(column(drecv + col, base, w, n, row));
            piece.send_offset = base + me * w;
            piece.recv_offset = base;
            break;
        case CollType::ReduceScatter: // the result lands in this rank's row of the column
            piece.in.push_back(column(dsend + col, base, w, n, row));
            piece.out.push_back({drecv + col, base + me * w, w});
            piece.send_offset = base;
            piece.recv_offset = base + me * w;
            break;
        default: // AlltoAll
            piece.in.push_back(column(dsend + col, base, w, n, row));
            piece.out.push_back(column(drecv + col, area + base, w, n, row));
            piece.send_offset = base;
            piece.recv_offset = area + base;
            break;
        }
        plan.pieces.push_back(std::move(piece));
    }
    return plan;
}

} // namespace

void coll_io_bytes(int nranks, int rank, const CollArgs& a, size_t* in, size_t* out) {
    size_t block = a.count * dtype_size(a.dtype), n = size_t(nranks);
    switch (a.coll) {
    case CollType::AllReduce: *in = block; *out = block; break;
    case CollType::Broadcast: *in = rank == a.root ? block : 0; *out = block; break;
    case CollType::Reduce: *in = block; *out = rank == a.root ? block : 0; break;
    case CollType::AllGather: *in = block; *out = block * n; break;
    case CollType::ReduceScatter: *in = block * n; *out = block; break;
    default: *in = block * n; *out = block * n; break;
    }
}

StagedPlan staged_plan(int nranks, int rank, uint64_t chunk_bytes, const CollArgs& a) {
    size_t in = 0, out = 0;
    coll_io_bytes(nranks, rank, a, &in, &out);
    const bool columns = cut_by_columns(a.coll);
    // A column piece moves count elements of each of the n blocks: it is cut at n elements' size.
    size_t unit = dtype_size(a.dtype) * (columns ? size_t(nranks) : 1);
    std::vector<ElemPiece> cut = staged_pieces(a.count, unit, chunk_bytes);
    return columns ? plan_by_columns(nranks, rank, a, cut) : plan_elementwise(a, in, out, cut);
}

CollArgs staged_host_args(const CollArgs& a, const StagedPiece& piece, char* slot) {
    CollArgs h = a;
    h.count = piece.count;
    h.sendbuf = a.sendbuf != nullptr ? slot + piece.send_offset : nullptr;
    h.recvbuf = a.recvbuf != nullptr ? slot + piece.recv_offset : nullptr;
    return h;
}

} // namespace vccl

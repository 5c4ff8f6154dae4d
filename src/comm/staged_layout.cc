#include "comm/staged_layout.h"

#include "comm/staged_pieces.h"
#include "core/dtype.h"

namespace vccl {

namespace {

bool inside(const void* p, const void* base, size_t bytes) {
    auto x = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(base);
    return p != nullptr && base != nullptr && x >= b && x < b + bytes;
}

bool cut_by_columns(CollType c) {
    return c == CollType::AllGather || c == CollType::ReduceScatter || c == CollType::AlltoAll;
}

/* The input and output regions as the caller's buffers lie: in place, the smaller region lies inside the
 * larger one (both may start at the same address), and is placed inside the larger one's copy. */
void place_regions(const CollArgs& a, size_t in, size_t out, size_t* send_offset, size_t* recv_offset) {
    *send_offset = 0;
    *recv_offset = in;
    if (in >= out && inside(a.recvbuf, a.sendbuf, in)) {
        *recv_offset = size_t(static_cast<const char*>(a.recvbuf) - static_cast<const char*>(a.sendbuf));
    } else if (inside(a.sendbuf, a.recvbuf, out)) {
        *send_offset = in + size_t(static_cast<const char*>(a.sendbuf) - static_cast<const char*>(a.recvbuf));
    } else if (inside(a.recvbuf, a.sendbuf, in)) {
        *recv_offset = size_t(static_cast<const char*>(a.recvbuf) - static_cast<const char*>(a.sendbuf));
    }
}

/* One piece, or AllReduce/Broadcast/Reduce in element ranges: the regions as the caller's buffers lie. */
StagedPlan plan_by_regions(const CollArgs& a, size_t in, size_t out, const std::vector<ElemPiece>& cut) {
    StagedPlan plan;
    size_t send_offset = 0, recv_offset = 0;
    place_regions(a, in, out, &send_offset, &recv_offset);
    plan.slot_bytes = in + out;
    char* dsend = const_cast<char*>(static_cast<const char*>(a.sendbuf));
    char* drecv = static_cast<char*>(a.recvbuf);
    const size_t e = dtype_size(a.dtype);
    for (const ElemPiece& p : cut) {
        StagedPiece piece;
        size_t skip = p.first * e;
        // One piece: the whole regions (they differ in size for AllGather and the like); pieces: their elements.
        size_t piece_in = cut.size() == 1 ? in : in > 0 ? p.count * e : 0;
        size_t piece_out = cut.size() == 1 ? out : out > 0 ? p.count * e : 0;
        if (piece_in > 0) piece.in.push_back({dsend + skip, send_offset + skip, piece_in});
        if (piece_out > 0) piece.out.push_back({drecv + skip, recv_offset + skip, piece_out});
        piece.send_offset = send_offset + skip;
        piece.recv_offset = recv_offset + skip;
        piece.count = p.count;
        plan.pieces.push_back(std::move(piece));
    }
    return plan;
}

/* AllGather, ReduceScatter, AlltoAll in pieces: piece k holds its column of every rank's block, packed (rank
 * by rank, `w` bytes each) at n * first * e in an area of n blocks; the output area of AlltoAll and
 * ReduceScatter follows the input one. */
StagedPlan plan_by_columns(int nranks, int rank, const CollArgs& a, const std::vector<ElemPiece>& cut) {
    StagedPlan plan;
    const size_t n = size_t(nranks), e = dtype_size(a.dtype);
    const size_t row = a.count * e; // a rank's block on the device: the pitch of a column's rows
    const size_t area = n * row;
    char* dsend = const_cast<char*>(static_cast<const char*>(a.sendbuf));
    char* drecv = static_cast<char*>(a.recvbuf);
    plan.slot_bytes = a.coll == CollType::AllGather ? area : a.coll == CollType::ReduceScatter ? area + row : 2 * area;
    for (const ElemPiece& p : cut) {
        StagedPiece piece;
        const size_t w = p.count * e, col = p.first * e, base = n * col;
        piece.count = p.count;
        switch (a.coll) {
        case CollType::AllGather: // in place on the host: this rank's input sits in its row of the column
            piece.in.push_back({dsend + col, base + size_t(rank) * w, w});
            piece.out.push_back({drecv + col, base, w, n, row, w});
            piece.send_offset = base + size_t(rank) * w;
            piece.recv_offset = base;
            break;
        case CollType::ReduceScatter:
            piece.in.push_back({dsend + col, base, w, n, row, w});
            piece.out.push_back({drecv + col, area + col, w});
            piece.send_offset = base;
            piece.recv_offset = area + col;
            break;
        default: // AlltoAll
            piece.in.push_back({dsend + col, base, w, n, row, w});
            piece.out.push_back({drecv + col, area + base, w, n, row, w});
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
    if (columns && cut.size() > 1) return plan_by_columns(nranks, rank, a, cut);
    return plan_by_regions(a, in, out, cut);
}

CollArgs staged_host_args(const CollArgs& a, const StagedPiece& piece, char* slot) {
    CollArgs h = a;
    h.count = piece.count;
    h.sendbuf = a.sendbuf != nullptr ? slot + piece.send_offset : nullptr;
    h.recvbuf = a.recvbuf != nullptr ? slot + piece.recv_offset : nullptr;
    return h;
}

} // namespace vccl

/*
 * Collectives on device buffers among GPUs of one host, built from batches of direct transfers (copy
 * engines into peers' buffers, ordered on the caller's stream by stream memory operations):
 *   AllGather, Broadcast, AlltoAll: up to VCCL_ALLREDUCE_LL_BYTES / (ranks - 1) bytes a peer (AlltoAll: and at
 *              most 1 MiB) one low-latency kernel, as AllReduce below; above it one batch plus a local device
 *              copy, no kernel;
 *   ReduceScatter up to VCCL_ALLREDUCE_LL_BYTES / (ranks - 1) bytes per rank, as AllReduce below:
 *              one low-latency kernel; above it up to VCCL_ALLREDUCE_KERNEL_BYTES per rank (a
 *              multiple of 16 bytes) one chunked kernel (device/chunked_collectives.h);
 *   ReduceScatter: every rank receives its block from each peer into scratch, one kernel reduces them; from
 *              2 x VCCL_REDUCE_PIPELINE_BYTES on, in pieces whose kernels run on the communicator's second
 *              stream while the next piece moves (comm->side_stream);
 *   AllReduce: up to VCCL_ALLREDUCE_LL_BYTES / (ranks - 1) (off where ranks share a GPU) one kernel of up to
 *              VCCL_MAX_CTAS blocks that stores into the peers' memory (device/ll_collectives.h), above it up
 *              to VCCL_ALLREDUCE_KERNEL_BYTES the chunked kernel in the same memory; up to
 *              VCCL_ALLREDUCE_SMALL_BYTES (where the former is off or smaller) one shot (every rank
 *              sends its whole buffer to every peer and reduces all of them: one batch of transfers and one
 *              kernel, since small transfers cost their handshakes, not their bytes); above it that
 *              reduce-scatter on nearly equal blocks, then an all-gather of the reduced blocks, both in pieces
 *              as above (the all-gather of a piece follows its kernel);
 *   Reduce: up to VCCL_ALLREDUCE_LL_BYTES / (ranks - 1) one low-latency kernel; above it every rank sends its
 *              buffer to the root, whose kernel reduces them.
 * Kernels are compact (VCCL_MAX_CTAS blocks). Local copies of 1 MiB and more run on the second stream beside
 * the batch. The calling thread never waits for the device (except when the reduction scratch grows).
 */
#include "comm/device_coll.h"

#include <algorithm>
#include <functional>

#include "comm/enqueue.h"
#include "comm/p2p_exec.h"
#include "comm/reduce_pieces.h"
#include "config.h"
#include "core/dtype.h"
#include "core/status.h"
#include "device/chunked_collectives.h"
#include "device/ipc_p2p.h"
#include "device/ll_collectives.h"
#include "device/reduce_kernels.h"
#include "device/side_stream.h"

#if VCCL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace vccl {

namespace {

Op p2p_op(const Op& coll, OpKind kind, const void* sendbuf, void* recvbuf, size_t bytes, int peer) {
    Op o{};
    o.kind = kind;
    o.comm = coll.comm;
    o.stream = coll.stream;
    o.mem = MemType::Cuda;
    o.sendbuf = sendbuf;
    o.recvbuf = recvbuf;
    o.bytes = bytes;
    o.peer = peer;
    return o;
}

/* A send of an AllReduce's all-gather (its block, or its part of a piece, reduced): it needs no READY from the
 * peer. This stream waited, before its reduction, for the peer's DONE of the reduce-scatter of the same part,
 * which the peer's stream wrote after it had reached this collective (so the peer's earlier work on its receive
 * buffer is done) and after its copy had read that part of its input (which in place is the receive buffer this
 * send writes). Between that DONE and its all-gather the peer's stream writes only its own block. Saves one flag
 * crossing between the GPUs on the critical path of every copy-engine AllReduce. */
Op all_gather_send(const Op& coll, const void* sendbuf, size_t bytes, int peer) {
    Op o = p2p_op(coll, OpKind::Send, sendbuf, nullptr, bytes, peer);
    o.peer_buffer_free = true;
    return o;
}

/* A send into a peer's reduction scratch (device_scratch). Its READY says only that the peer's earlier reductions
 * have read that scratch. `peers_free`: known already (take_peers_scratch_free below). */
Op scratch_send(const Op& coll, const void* sendbuf, size_t bytes, int peer, bool peers_free) {
    Op o = p2p_op(coll, OpKind::Send, sendbuf, nullptr, bytes, peer);
    o.peer_buffer_free = peers_free;
    return o;
}

/* Whether the peers' scratch is free for this call's first transfers into it, with no READY. Only reductions of
 * this file read the scratch, each peer's on its own streams, and a copy-engine AllReduce ends with this stream
 * waiting for every peer's all-gather DONE, which that peer's stream wrote after its last reduction (the pieces'
 * reductions on its second stream included: its all-gather waits for them). So until the next collective of this
 * file, the peers' scratch is not read. A call on another stream is ordered after the AllReduce too (StreamOrder;
 * a group's operations on several streams run on one), so the same stream is required only as a safeguard. Taken
 * once: every collective of this file clears it, and only such an AllReduce sets it again (set_peers_scratch_waited). */
bool take_peers_scratch_free(vcclComm* comm, const Op& op) {
    const bool free = comm->peers_scratch_waited && comm->peers_scratch_stream == op.stream;
    comm->peers_scratch_waited = false;
    return free;
}
void set_peers_scratch_waited(vcclComm* comm, const Op& op) {
    comm->peers_scratch_waited = true;
    comm->peers_scratch_stream = op.stream;
}

vcclResult_t local_copy(void* dst, const void* src, size_t bytes, vcclStream_t stream) {
    if (dst == src || bytes == 0) return vcclSuccess;
#if VCCL_HAVE_CUDA
    cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream));
    if (err != cudaSuccess) {
        return set_last_error(vcclUnhandledCudaError, "cudaMemcpyAsync (local block) failed: %s", cudaGetErrorString(err));
    }
    return vcclSuccess;
#else
    return set_last_error(vcclInternalError, "device copy in a build without CUDA");
#endif
}

} // namespace

bool device_coll_direct_possible(const vcclComm* comm, const Op& op) {
    if (op.mem != MemType::Cuda || comm->ipc == nullptr) return false;
#if !VCCL_HAVE_CUDA
    return false;
#endif
    if (comm->nranks > kMaxReduceSources) return false;
    return comm->ipc->everyone_reachable(); // every rank on this host, every pair's flag buffers mapped
}

namespace {

/* The reduction scratch, at least `bytes`. Growing frees the old block after the stream's earlier work
 * (DeviceScratch, MappedByPeers); that wait is comm_device_stream_wait's (the NULL stream too), which gives up when
 * the communicator is aborted
 * or a peer has failed, so a stream blocked by a dead peer cannot hold this call, and with it vcclCommAbort, which
 * needs the lock, for ever. */
vcclResult_t reduction_scratch(vcclComm* comm, size_t bytes, vcclStream_t stream, void** out) {
    if (comm->device_scratch.grows_for(bytes)) VCCL_RETURN_IF_ERROR(comm_device_stream_wait(comm, stream));
    return comm->device_scratch.get(bytes, stream, out);
}

vcclResult_t run_batch(vcclComm* comm, const std::vector<Op>& ops) {
    std::vector<const Op*> ptrs;
    for (const Op& o : ops) ptrs.push_back(&o);
    return run_p2p_batch(comm, ptrs);
}

/* PreMulSum's scalar for a kernel (device/premul_arg.h); off for every other op. */
[[maybe_unused]] PreMulArg premul_arg(const Op& op) {
    PreMulArg arg;
    if (!op.premul) return arg;
    arg.on = 1;
    arg.device_scalar = op.premul_scalar.on_device ? op.premul_scalar.device_ptr : nullptr;
    arg.host_bits = op.premul_scalar.host_bits;
    return arg;
}

/* Where the reductions read this rank's own block: the caller's input, whose block they scale as they read it, when
 * the rest of a PreMulSum's input was scaled into a copy (PreMulPlan::OwnBlock); else `send` (the same layout). */
const char* own_input(const Op& op, const char* send) {
    return op.premul && op.premul_own_input != nullptr ? static_cast<const char*>(op.premul_own_input) : send;
}

/* srcs[0] is this rank's own block (own_input): PreMulSum's reductions scale it as they read it. */
vcclResult_t reduce(vcclComm* comm, const Op& op, vcclStream_t stream, void* dst, const std::vector<const void*>& srcs,
                    size_t count) {
#if VCCL_HAVE_CUDA
    int divide_by = op.coll.op == vcclAvg ? comm->nranks : 0;
    vcclResult_t r = device_reduce(dst, srcs.data(), int(srcs.size()), count, op.coll.dtype, op.coll.op, divide_by,
                                   comm->max_ctas, stream, premul_arg(op));
    if (r != vcclSuccess) return set_last_error(r, "reduction kernel launch failed");
    return vcclSuccess;
#else
    (void)comm, (void)op, (void)stream, (void)dst, (void)srcs, (void)count;
    return set_last_error(vcclInternalError, "device reduction in a build without CUDA");
#endif
}

/* Block i of count elements split across n ranks, in bytes. */
void block_bytes(size_t count, int n, int i, size_t ts, size_t* offset, size_t* bytes) {
    size_t b, e;
    block_range(count, n, i, &b, &e);
    *offset = b * ts;
    *bytes = (e - b) * ts;
}

/* Each rank reduces block `rank` of the input from all ranks into `out`; blocks by `offset_of`. */
vcclResult_t reduce_scatter_blocks(vcclComm* comm, const Op& op, const char* send, char* out, size_t ts,
                                   size_t count_total, bool equal_blocks, size_t equal_count, bool peers_free) {
    int rank = comm->rank, n = comm->nranks;
    auto block = [&](int i, size_t* off, size_t* bytes) {
        if (equal_blocks) {
            *off = size_t(i) * equal_count * ts;
            *bytes = equal_count * ts;
        } else {
            block_bytes(count_total, n, i, ts, off, bytes);
        }
    };
    size_t my_off, my_bytes;
    block(rank, &my_off, &my_bytes);
    void* scratch = nullptr;
    if (n > 1) VCCL_RETURN_IF_ERROR(reduction_scratch(comm, my_bytes * size_t(n - 1), op.stream, &scratch));
    std::vector<Op> ops;
    std::vector<const void*> srcs = {own_input(op, send) + my_off};
    int slot = 0;
    for (int p = 0; p < n; ++p) {
        if (p == rank) continue;
        size_t off, bytes;
        block(p, &off, &bytes);
        // Blocks can be empty (fewer elements than ranks). Both sides know every block's size, so each
        // skips exactly the transfers its peer skips.
        if (bytes > 0) ops.push_back(scratch_send(op, send + off, bytes, p, peers_free));
        char* dst = static_cast<char*>(scratch) + size_t(slot++) * my_bytes;
        if (my_bytes > 0) ops.push_back(p2p_op(op, OpKind::Recv, nullptr, dst, my_bytes, p));
        srcs.push_back(dst);
    }
    VCCL_RETURN_IF_ERROR(run_batch(comm, ops));
    return reduce(comm, op, op.stream, out, srcs, my_bytes / ts);
}

/* Each piece costs two batches of host work (descriptor exchange, stream operations) and a kernel launch, tens
 * of microseconds, and a piece whose transfers take about as long leaves the host behind the device (2x H200,
 * run125, allreduce: 16 pieces of 16 MiB made 256 MiB about 1.3x slower than one piece, 16 of 32 MiB made
 * 512 MiB 1.07x slower; 2 pieces of 32 MiB at 64 MiB and 8 of 64 MiB at 512 MiB were 1.12x and 1.09x faster).
 * So: 2 pieces from twice the setting on, then one piece per twice the setting, at most kReduceMaxPieces, and more
 * where the scratch would exceed VCCL_REDUCE_SCRATCH_BYTES (comm/reduce_pieces.h).
 *
 * AllReduce stops at 2 (run224, 2x H200, two runs each): 2 pieces took 735 us at 256 MiB and 2787 us at 1 GiB,
 * against 791 and 2960-2971 in 4 and 8 pieces, and 881 and 3408 in one. From the third piece on, each waits for
 * the peers' READY (their reduction of the piece before has read the scratch half), and beside a kernel that
 * holds every SM (a large GEMM) each piece's reduction waits for that kernel to end: 2 pieces took 2.5 and
 * 4.5 ms a call there, 4 and 8 pieces 3.4 and 9.4 ms. Two pieces lose nothing to the pipeline: the first
 * piece's reduction runs while the second piece moves, and the second's while the first piece's all-gather
 * moves. ReduceScatter has no all-gather to hide its last reduction behind, so it keeps smaller pieces. */
constexpr int kAllReduceMaxPieces = 2;

/* Pieces of a pipelined reduction of `bytes` (one rank's whole input): the same on every rank (the settings are
 * agreed at creation, the sizes are the call's). */
int pipeline_pieces(const vcclComm* comm, size_t bytes, int max_pieces) {
    return reduce_pieces(bytes, comm->nranks, comm->settings.reduce_pipeline_bytes, max_pieces,
                         comm->settings.reduce_scratch_bytes);
}

/* Where rank i's part of piece c lies in the input: element offset and element count. */
using PartFn = std::function<void(int i, int c, size_t* elem_offset, size_t* elems)>;

/* Reduce-scatter in `pieces` pieces. Piece c's transfers go on the caller's stream and its reduction (into
 * out(c)) on the communicator's second stream, where it runs while piece c + 1 moves; then(c) enqueues on the
 * caller's stream what needs piece c reduced (AllReduce: that piece's all-gather), after the caller's stream
 * waited for the reduction. Two halves of the scratch buffer alternate: piece c + 2 lands in piece c's half
 * only after the caller's stream waited for piece c's reduction, since the peers' copies wait for this rank's
 * READY, which that stream writes after it. Every rank enqueues the same sequence of batches. */
vcclResult_t reduce_scatter_pieces(vcclComm* comm, const Op& op, const char* send, size_t ts, int pieces,
                                   const PartFn& part, const std::function<char*(int c)>& out,
                                   const std::function<vcclResult_t(int c)>& then, bool peers_free) {
    int rank = comm->rank, n = comm->nranks;
    size_t piece_max = 0; // bytes of this rank's largest part
    for (int c = 0; c < pieces; ++c) {
        size_t off, elems;
        part(rank, c, &off, &elems);
        piece_max = std::max(piece_max, elems * ts);
    }
    const size_t half_bytes = piece_max * size_t(n - 1);
    void* scratch = nullptr;
    VCCL_RETURN_IF_ERROR(reduction_scratch(comm, 2 * half_bytes, op.stream, &scratch));
    SideStream& side = comm->side_stream;
    vcclResult_t r = vcclSuccess;
    bool forked = false;
    for (int c = 0; c < pieces && r == vcclSuccess; ++c) {
        size_t my_off, my_elems;
        part(rank, c, &my_off, &my_elems);
        char* half = static_cast<char*>(scratch) + size_t(c % 2) * half_bytes;
        std::vector<Op> ops;
        std::vector<const void*> srcs = {own_input(op, send) + my_off * ts};
        int slot = 0;
        for (int p = 0; p < n; ++p) {
            if (p == rank) continue;
            size_t off, elems;
            part(p, c, &off, &elems);
            // Pieces 0 and 1 land in the two halves, free as the scratch was (peers_free); from piece 2 on a half
            // is free only once the peer's reduction of the piece before has read it: its READY says so.
            if (elems > 0) ops.push_back(scratch_send(op, send + off * ts, elems * ts, p, peers_free && c < 2));
            char* dst = half + size_t(slot++) * piece_max;
            if (my_elems > 0) ops.push_back(p2p_op(op, OpKind::Recv, nullptr, dst, my_elems * ts, p));
            srcs.push_back(dst);
        }
        r = run_batch(comm, ops);
        if (r == vcclSuccess) r = side.fork(op.stream);
        forked = forked || r == vcclSuccess;
        if (r == vcclSuccess) r = reduce(comm, op, side.stream(), out(c), srcs, my_elems);
        if (r == vcclSuccess) r = side.mark(c % 2);
        if (r == vcclSuccess && c > 0) r = side.wait_mark(op.stream, (c - 1) % 2);
        if (r == vcclSuccess && c > 0) r = then(c - 1);
    }
    if (r == vcclSuccess) r = side.wait_mark(op.stream, (pieces - 1) % 2);
    if (r == vcclSuccess) return then(pieces - 1);
    if (forked) side.join(op.stream); // what reached the second stream stays ordered before later work
    return r;
}

/* AllReduce in pieces: the reduce-scatter of reduce_scatter_pieces on nearly equal blocks, each reduced piece
 * sent to every peer as soon as its kernel ran. */
vcclResult_t allreduce_pieces(vcclComm* comm, const Op& op, const char* send, char* recv, size_t ts, int pieces,
                              bool peers_free) {
    const size_t count = op.coll.count;
    const int rank = comm->rank, n = comm->nranks;
    PartFn part = [count, n, pieces](int i, int c, size_t* off, size_t* elems) {
        size_t b, e, pb, pe;
        block_range(count, n, i, &b, &e);
        block_range(e - b, pieces, c, &pb, &pe);
        *off = b + pb;
        *elems = pe - pb;
    };
    auto out = [&](int c) {
        size_t off, elems;
        part(rank, c, &off, &elems);
        return recv + off * ts;
    };
    auto all_gather_piece = [&](int c) {
        size_t off, elems;
        part(rank, c, &off, &elems);
        std::vector<Op> ops;
        for (int p = 0; p < n; ++p) {
            if (p == rank) continue;
            size_t poff, pelems;
            part(p, c, &poff, &pelems);
            if (elems > 0) ops.push_back(all_gather_send(op, recv + off * ts, elems * ts, p));
            if (pelems > 0) ops.push_back(p2p_op(op, OpKind::Recv, nullptr, recv + poff * ts, pelems * ts, p));
        }
        return run_batch(comm, ops);
    };
    VCCL_RETURN_IF_ERROR(reduce_scatter_pieces(comm, op, send, ts, pieces, part, out, all_gather_piece, peers_free));
    // The last piece's all-gather waited for every peer's DONE after all its reductions, if every peer has a part
    // of that piece (so sent one).
    bool every_part = true;
    for (int i = 0; i < n; ++i) {
        size_t off, elems;
        part(i, pieces - 1, &off, &elems);
        every_part = every_part && elems > 0;
    }
    if (every_part) set_peers_scratch_waited(comm, op);
    return vcclSuccess;
}

/* A local copy of 1 MiB or more goes on the second stream, beside the batch that follows it; the caller joins
 * the second stream into its stream after the batch (*beside says so). Smaller ones stay on the caller's stream: the
 * fork and join cost more host time than the copy takes. */
constexpr size_t kSideCopyBytes = 1u << 20;

vcclResult_t local_copy_beside(vcclComm* comm, void* dst, const void* src, size_t bytes, vcclStream_t stream,
                               bool* beside) {
    *beside = false;
    if (dst == src || bytes == 0) return vcclSuccess;
    if (bytes < kSideCopyBytes) return local_copy(dst, src, bytes, stream);
    VCCL_RETURN_IF_ERROR(comm->side_stream.fork(stream));
    *beside = true;
    return local_copy(dst, src, bytes, comm->side_stream.stream());
}

/* AllReduce in one batch: every rank receives every peer's whole buffer into scratch and reduces the n
 * buffers in rank order, so every rank computes the same bits (floating-point sums depend on the order). */
vcclResult_t allreduce_one_shot(vcclComm* comm, const Op& op, const char* send, char* recv, size_t bytes,
                                bool peers_free) {
    int rank = comm->rank, n = comm->nranks;
    void* scratch = nullptr;
    if (n > 1) VCCL_RETURN_IF_ERROR(reduction_scratch(comm, bytes * size_t(n - 1), op.stream, &scratch));
    std::vector<Op> ops;
    std::vector<const void*> srcs;
    int slot = 0;
    for (int p = 0; p < n; ++p) {
        if (p == rank) {
            srcs.push_back(send); // recv may alias it: the kernel reads each element before writing it
            continue;
        }
        char* dst = static_cast<char*>(scratch) + size_t(slot++) * bytes;
        ops.push_back(scratch_send(op, send, bytes, p, peers_free));
        ops.push_back(p2p_op(op, OpKind::Recv, nullptr, dst, bytes, p));
        srcs.push_back(dst);
    }
    VCCL_RETURN_IF_ERROR(run_batch(comm, ops));
    return reduce(comm, op, op.stream, recv, srcs, bytes / dtype_size(op.coll.dtype));
}

/* Whether op runs in one kernel: the low-latency one (device/ll_collectives.h) for AllReduce, ReduceScatter,
 * AllGather, AlltoAll, Broadcast and Reduce whose message to each peer (count elements) is at most comm->ipc->ll_bytes()
 * (AlltoAll: and at most kLlAlltoAllMaxBytes), else, for AllReduce and ReduceScatter, the chunked one
 * (device/chunked_collectives.h, *chunked) up to VCCL_ALLREDUCE_KERNEL_BYTES; the data movers above the first limit
 * are batches of copy-engine transfers (AllGather 1.4x NCCL's speed from 8 MiB on 2x H100, docs/PERFORMANCE.md, where
 * SM stores through the chunked kernel were slower). The same on every rank of a correct program: the settings are
 * agreed and the decision goes by the call's sizes only, never by its buffers' addresses (ranks taking different
 * paths would wait for each other until they abort; so an in-place AlltoAll, which the kernel would serve faster
 * than the copy engines also above the cap, takes the copy engines there too). */
constexpr size_t kLlAlltoAllMaxBytes = size_t(1) << 20;

bool takes_kernel(const vcclComm* comm, const Op& op, LlKind* kind, bool* chunked) {
    const CollArgs& a = op.coll;
    switch (a.coll) {
    case CollType::AllReduce: *kind = LlKind::AllReduce; break;
    case CollType::ReduceScatter: *kind = LlKind::ReduceScatter; break;
    case CollType::AllGather: *kind = LlKind::AllGather; break;
    case CollType::AlltoAll: *kind = LlKind::AlltoAll; break;
    case CollType::Broadcast: *kind = LlKind::Broadcast; break;
    case CollType::Reduce: *kind = LlKind::Reduce; break;
    default: return false;
    }
    if (a.count == 0) return false;
    const size_t bytes = a.count * dtype_size(a.dtype);
    // AlltoAll's words cost it more than the copy engines from about 1.5 MiB a peer: on 2x H200 (run180) 1 MiB a
    // peer took 10.4 us on the kernel against 26-29 on the copy engines, 2 MiB 25.1 against 20.4.
    const size_t ll_limit = *kind == LlKind::AlltoAll ? std::min(comm->ipc->ll_bytes(), kLlAlltoAllMaxBytes)
                                                      : comm->ipc->ll_bytes();
    if (bytes <= ll_limit) {
        *chunked = false;
        return true;
    }
    // ReduceScatter's blocks of other ranks start at multiples of the per-rank size: a multiple of 16 keeps the
    // kernel's 16-byte accesses aligned for all of them.
    const bool reduces = *kind == LlKind::AllReduce || *kind == LlKind::ReduceScatter;
    // PreMulSum goes further on the kernel: above the limit its copy-engine path needs a scaling kernel anyway
    // (VCCL_PREMULSUM_KERNEL_BYTES). Never less far than Sum: premul_apply clears op.premul where its plan is not the
    // kernel, and the call must then still not take the kernel (nor device_coll_give_up, which sees the op unchanged,
    // think otherwise).
    const size_t limit = op.premul ? std::max(comm->settings.premul_kernel_bytes, comm->settings.kernel_bytes)
                                   : comm->settings.kernel_bytes;
    if (!reduces || bytes > std::min(limit, kMaxChunkedBytes) ||
        !comm->ipc->chunked_possible() || (*kind == LlKind::ReduceScatter && bytes % 16 != 0)) {
        return false;
    }
    *chunked = true;
    return true;
}

#if VCCL_HAVE_CUDA
/* This rank gives up kernel call args.seq on the host: the peers are told (ll_abandon) and report it. The
 * communicator is then failed here too, for good: this rank's next kernel call would store into the word set of the
 * call before this one, which a peer's kernel may still be reading (the peers waited for nothing from this rank in
 * the call given up, and the chunked kernel's last chunks are not credited back), and would corrupt that call's
 * result or hang. The peers refuse their later calls once they see the mismatch; this rank refuses its own. */
void abandon_kernel_call(vcclComm* comm, const LlArgs& args, vcclStream_t stream, const std::string& why) {
    comm->ipc->ll_abandon(args, stream);
    comm_set_async_error(comm, vcclInvalidUsage,
                         "this rank gave up its collective call " + std::to_string(args.seq) +
                             " on one kernel before the kernel ran (" + why +
                             "); its peers were told; abort or destroy the communicator");
}
#endif

#if VCCL_HAVE_CUDA
/* Telemetry of a kernel call just launched (comm/device_flows.h): what this rank's kernel stores into each peer and
 * receives from it, the message to each peer (count elements; the word overhead is not counted). A sampled call's
 * note follows the kernel on its stream, in a driver call of its own. */
void kernel_flows(vcclComm* comm, const Op& op) {
    if (!comm->device_flows) return;
    const CollArgs& a = op.coll;
    using Flow = DeviceFlows::KernelFlow;
    const Flow flow = a.coll == CollType::Broadcast ? Flow::FromRoot
                      : a.coll == CollType::Reduce  ? Flow::ToRoot
                                                    : Flow::EveryPeer;
    const uint32_t note =
        comm->device_flows->kernel_posted(comm->rank, uint64_t(a.count) * dtype_size(a.dtype), flow, a.root);
    if (note == 0) return;
    comm->ipc->note(comm->device_flows->kernel_word(), note, op.stream);
    if (comm->ipc->flush() != vcclSuccess) {
        // The call itself was enqueued: only its record is lost (failed, not left outstanding).
        comm->device_flows->abandoned(comm->device_flows->kernel_word(), note);
        clear_last_error();
    }
}
#endif

/* A collective in one kernel launch (device/ll_collectives.h or device/chunked_collectives.h). */
vcclResult_t run_kernel(vcclComm* comm, const Op& op, LlKind kind, bool chunked, const char* send, char* recv) {
#if VCCL_HAVE_CUDA
    LlArgs args{};
    // The call's number is taken whatever happens: peers count calls too, and a call given up here must be
    // given up for them (ll_abandon), not paired with this rank's next one.
    comm->ipc->ll_next(&args);
    const char* what = chunked ? "chunked" : "low-latency";
    vcclResult_t r = vcclSuccess;
    if (comm->test_fail_next_ll) {
        comm->test_fail_next_ll = false;
        r = set_last_error(vcclInternalError, "%s %s failed before its launch (test hook)", what,
                           coll_name(op.coll.coll));
    }
    args.max_blocks = std::min(args.max_blocks, comm->max_ctas);
    args.root = op.coll.root;
    args.premul = premul_arg(op); // PreMulPlan::Kernel: the kernel scales the input as it reads it
    if (chunked && comm->test_chunked_stop != 0) {
        args.chunk_stop = comm->test_chunked_stop;
        comm->test_chunked_stop = 0;
    }
    if (r == vcclSuccess) {
        r = chunked ? chunked_collective(args, kind, send, recv, op.coll.count, op.coll.dtype, op.coll.op, op.stream)
                    : ll_collective(args, kind, send, recv, op.coll.count, op.coll.dtype, op.coll.op, op.stream);
        if (r != vcclSuccess) set_last_error(r, "%s %s kernel launch failed", what, coll_name(op.coll.coll));
    }
    if (r == vcclSuccess) {
        comm->ipc->ll_launched(args);
        ++(chunked ? comm->chunked_calls : comm->ll_calls);
        kernel_flows(comm, op);
    } else {
        abandon_kernel_call(comm, args, op.stream, last_error_message());
    }
    return r;
#else
    (void)comm, (void)op, (void)kind, (void)chunked, (void)send, (void)recv;
    return set_last_error(vcclInternalError, "device collective in a build without CUDA");
#endif
}

} // namespace

void device_coll_give_up(vcclComm* comm, const Op& op) {
#if VCCL_HAVE_CUDA
    LlKind kind;
    bool chunked = false;
    if (op.kind != OpKind::Collective || !device_coll_direct_possible(comm, op) || !takes_kernel(comm, op, &kind, &chunked)) {
        return;
    }
    LlArgs args{};
    comm->ipc->ll_next(&args);
    abandon_kernel_call(comm, args, op.stream, "an earlier operation of its call or group failed");
#else
    (void)comm, (void)op;
#endif
}

PreMulPlan device_coll_premul_plan(const vcclComm* comm, const Op& op) {
    PreMulPlan plan;
    const CollArgs& a = op.coll;
    LlKind kind;
    bool chunked = false;
    if (a.count == 0 || comm->nranks < 2) return plan;
    if (takes_kernel(comm, op, &kind, &chunked)) {
        plan.kind = PreMulPlan::Kernel;
        return plan;
    }
    // As run_device_coll_direct chooses: AllReduce at or below the small size sends its whole input to every peer
    // (allreduce_one_shot), Reduce's non-roots send theirs to the root; those read a scaled copy of all of it.
    if (a.coll == CollType::AllReduce && a.count * dtype_size(a.dtype) > comm->settings.small_bytes) {
        block_range(a.count, comm->nranks, comm->rank, &plan.own_begin, &plan.own_end);
        plan.kind = PreMulPlan::OwnBlock;
    } else if (a.coll == CollType::ReduceScatter) {
        plan.own_begin = a.count * size_t(comm->rank);
        plan.own_end = plan.own_begin + a.count;
        plan.kind = PreMulPlan::OwnBlock;
    }
    return plan;
}

namespace {

/* The device transfers of one device collective carry its kind and number in telemetry. */
class FlowTagScope {
public:
    FlowTagScope(vcclComm* comm, const Op& op) : flows_(comm->device_flows.get()) {
        if (flows_ == nullptr) return;
        flows_->set_tag(telemetry::TransferTag{uint8_t(1 + int(op.coll.coll)), flows_->next_collective()});
    }
    ~FlowTagScope() {
        if (flows_ != nullptr) flows_->set_tag(telemetry::TransferTag());
    }
    FlowTagScope(const FlowTagScope&) = delete;
    FlowTagScope& operator=(const FlowTagScope&) = delete;
private:
    DeviceFlows* flows_;
};

} // namespace

vcclResult_t run_device_coll_direct(vcclComm* comm, const Op& op) {
    FlowTagScope flow_tag(comm, op);
    {
        const CollArgs& a = op.coll;
        size_t ts = dtype_size(a.dtype);
        const char* send = static_cast<const char*>(a.sendbuf);
        char* recv = static_cast<char*>(a.recvbuf);
        int rank = comm->rank, n = comm->nranks;
        const bool peers_free = take_peers_scratch_free(comm, op);
        if (a.count == 0) return vcclSuccess;
        LlKind kind;
        bool chunked = false;
        const bool kernel = takes_kernel(comm, op, &kind, &chunked);
        // PreMulSum reached here as device_coll_premul_plan planned it, from the same sizes and settings.
        if (op.premul && kernel != (op.premul_own_input == nullptr)) {
            return set_last_error(vcclInternalError, "PreMulSum %s: the path planned for its scaling is not the one "
                                  "taken", coll_name(a.coll));
        }
        if (kernel) return run_kernel(comm, op, kind, chunked, send, recv);
        switch (a.coll) {
        case CollType::ReduceScatter: {
            int pieces = pipeline_pieces(comm, a.count * ts * size_t(n), kReduceMaxPieces);
            if (pieces == 1) return reduce_scatter_blocks(comm, op, send, recv, ts, 0, true, a.count, peers_free);
            const size_t count = a.count;
            PartFn part = [count, pieces](int i, int c, size_t* off, size_t* elems) {
                size_t pb, pe;
                block_range(count, pieces, c, &pb, &pe);
                *off = size_t(i) * count + pb;
                *elems = pe - pb;
            };
            auto out = [&](int c) {
                size_t pb, pe;
                block_range(count, pieces, c, &pb, &pe);
                return recv + pb * ts;
            };
            return reduce_scatter_pieces(comm, op, send, ts, pieces, part, out, [](int) { return vcclSuccess; },
                                         peers_free);
        }
        case CollType::AllReduce: {
            if (a.count * ts <= comm->settings.small_bytes) {
                return allreduce_one_shot(comm, op, send, recv, a.count * ts, peers_free);
            }
            int pieces = pipeline_pieces(comm, a.count * ts, kAllReduceMaxPieces);
            if (pieces > 1) return allreduce_pieces(comm, op, send, recv, ts, pieces, peers_free);
            size_t off, bytes;
            block_bytes(a.count, n, rank, ts, &off, &bytes);
            VCCL_RETURN_IF_ERROR(reduce_scatter_blocks(comm, op, send, recv + off, ts, a.count, false, 0, peers_free));
            std::vector<Op> ops;
            for (int p = 0; p < n; ++p) {
                if (p == rank) continue;
                size_t poff, pbytes;
                block_bytes(a.count, n, p, ts, &poff, &pbytes);
                if (bytes > 0) ops.push_back(all_gather_send(op, recv + off, bytes, p));
                if (pbytes > 0) ops.push_back(p2p_op(op, OpKind::Recv, nullptr, recv + poff, pbytes, p));
            }
            VCCL_RETURN_IF_ERROR(run_batch(comm, ops));
            if (a.count >= size_t(n)) set_peers_scratch_waited(comm, op); // every peer's block, so DONE, is there
            return vcclSuccess;
        }
        case CollType::Reduce: {
            size_t bytes = a.count * ts;
            if (rank != a.root) return run_batch(comm, {scratch_send(op, send, bytes, a.root, peers_free)});
            void* scratch = nullptr;
            if (n > 1) VCCL_RETURN_IF_ERROR(reduction_scratch(comm, bytes * size_t(n - 1), op.stream, &scratch));
            std::vector<Op> ops;
            std::vector<const void*> srcs = {send};
            int slot = 0;
            for (int p = 0; p < n; ++p) {
                if (p == rank) continue;
                char* dst = static_cast<char*>(scratch) + size_t(slot++) * bytes;
                ops.push_back(p2p_op(op, OpKind::Recv, nullptr, dst, bytes, p));
                srcs.push_back(dst);
            }
            VCCL_RETURN_IF_ERROR(run_batch(comm, ops));
            return reduce(comm, op, op.stream, recv, srcs, a.count);
        }
        default:
            break;
        }
    }
    const CollArgs& a = op.coll;
    size_t block = a.count * dtype_size(a.dtype);
    if (block == 0) return vcclSuccess;
    const char* send = static_cast<const char*>(a.sendbuf);
    char* recv = static_cast<char*>(a.recvbuf);
    int rank = comm->rank, n = comm->nranks;
    std::vector<Op> ops;
    bool beside = false; // the local copy runs on the second stream
    switch (a.coll) {
    case CollType::AllGather:
        for (int p = 0; p < n; ++p) {
            if (p == rank) continue;
            ops.push_back(p2p_op(op, OpKind::Send, send, nullptr, block, p));
            ops.push_back(p2p_op(op, OpKind::Recv, nullptr, recv + size_t(p) * block, block, p));
        }
        VCCL_RETURN_IF_ERROR(local_copy_beside(comm, recv + size_t(rank) * block, send, block, op.stream, &beside));
        break;
    case CollType::Broadcast:
        if (rank == a.root) {
            for (int p = 0; p < n; ++p) {
                if (p != rank) ops.push_back(p2p_op(op, OpKind::Send, send, nullptr, block, p));
            }
            VCCL_RETURN_IF_ERROR(local_copy_beside(comm, recv, send, block, op.stream, &beside));
        } else {
            ops.push_back(p2p_op(op, OpKind::Recv, nullptr, recv, block, a.root));
        }
        break;
    case CollType::AlltoAll:
        for (int p = 0; p < n; ++p) {
            if (p == rank) continue;
            ops.push_back(p2p_op(op, OpKind::Send, send + size_t(p) * block, nullptr, block, p));
            ops.push_back(p2p_op(op, OpKind::Recv, nullptr, recv + size_t(p) * block, block, p));
        }
        VCCL_RETURN_IF_ERROR(
            local_copy_beside(comm, recv + size_t(rank) * block, send + size_t(rank) * block, block, op.stream, &beside));
        break;
    default:
        return set_last_error(vcclInternalError, "%s has no direct device algorithm", coll_name(a.coll));
    }
    vcclResult_t r = run_batch(comm, ops);
    if (beside) {
        vcclResult_t joined = comm->side_stream.join(op.stream);
        if (r == vcclSuccess) r = joined;
    }
    return r;
}

} // namespace vccl

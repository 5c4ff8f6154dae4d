/*
 * Collectives on device buffers among GPUs of one host, built from batches of direct transfers (copy
 * engines into peers' buffers, ordered on the caller's stream by stream memory operations):
 *   AllGather, Broadcast, AlltoAll: one batch plus a local device copy, no kernel;
 *   ReduceScatter: every rank receives its block from each peer into scratch, one kernel reduces them;
 *   AllReduce: up to VCCL_ALLREDUCE_LL_BYTES (off by default) one kernel that stores into the peers' memory
 *              (device/ll_allreduce.h); up to VCCL_ALLREDUCE_SMALL_BYTES one shot (every rank sends its whole buffer to every peer and
 *              reduces all of them: one batch of transfers and one kernel, since small transfers cost their
 *              handshakes, not their bytes); above it that reduce-scatter on nearly equal blocks, then an
 *              all-gather of the reduced blocks;
 *   Reduce: every rank sends its buffer to the root, whose kernel reduces them.
 * Kernels are compact (VCCL_MAX_CTAS blocks). The calling thread never waits for the device (except when
 * the scratch buffer grows).
 */
#include "comm/device_coll.h"

#include "comm/p2p_exec.h"
#include "config.h"
#include "core/dtype.h"
#include "core/status.h"
#include "device/ipc_p2p.h"
#include "device/ll_allreduce.h"
#include "device/reduce_kernels.h"

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

vcclResult_t run_batch(vcclComm* comm, const std::vector<Op>& ops) {
    std::vector<const Op*> ptrs;
    for (const Op& o : ops) ptrs.push_back(&o);
    return run_p2p_batch(comm, ptrs);
}

vcclResult_t reduce(vcclComm* comm, const Op& op, void* dst, const std::vector<const void*>& srcs, size_t count) {
#if VCCL_HAVE_CUDA
    int divide_by = op.coll.op == vcclAvg ? comm->nranks : 0;
    vcclResult_t r = device_reduce(dst, srcs.data(), int(srcs.size()), count, op.coll.dtype, op.coll.op, divide_by,
                                   comm->max_ctas, op.stream);
    if (r != vcclSuccess) return set_last_error(r, "reduction kernel launch failed");
    return vcclSuccess;
#else
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
                                   size_t count_total, bool equal_blocks, size_t equal_count) {
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
    if (n > 1) VCCL_RETURN_IF_ERROR(comm->device_scratch.get(my_bytes * size_t(n - 1), op.stream, &scratch));
    std::vector<Op> ops;
    std::vector<const void*> srcs = {send + my_off};
    int slot = 0;
    for (int p = 0; p < n; ++p) {
        if (p == rank) continue;
        size_t off, bytes;
        block(p, &off, &bytes);
        // Blocks can be empty (fewer elements than ranks). Both sides know every block's size, so each
        // skips exactly the transfers its peer skips.
        if (bytes > 0) ops.push_back(p2p_op(op, OpKind::Send, send + off, nullptr, bytes, p));
        char* dst = static_cast<char*>(scratch) + size_t(slot++) * my_bytes;
        if (my_bytes > 0) ops.push_back(p2p_op(op, OpKind::Recv, nullptr, dst, my_bytes, p));
        srcs.push_back(dst);
    }
    VCCL_RETURN_IF_ERROR(run_batch(comm, ops));
    return reduce(comm, op, out, srcs, my_bytes / ts);
}

/* AllReduce in one batch: every rank receives every peer's whole buffer into scratch and reduces the n
 * buffers in rank order, so every rank computes the same bits (floating-point sums depend on the order). */
vcclResult_t allreduce_one_shot(vcclComm* comm, const Op& op, const char* send, char* recv, size_t bytes) {
    int rank = comm->rank, n = comm->nranks;
    void* scratch = nullptr;
    if (n > 1) VCCL_RETURN_IF_ERROR(comm->device_scratch.get(bytes * size_t(n - 1), op.stream, &scratch));
    std::vector<Op> ops;
    std::vector<const void*> srcs;
    int slot = 0;
    for (int p = 0; p < n; ++p) {
        if (p == rank) {
            srcs.push_back(send); // recv may alias it: the kernel reads each element before writing it
            continue;
        }
        char* dst = static_cast<char*>(scratch) + size_t(slot++) * bytes;
        ops.push_back(p2p_op(op, OpKind::Send, send, nullptr, bytes, p));
        ops.push_back(p2p_op(op, OpKind::Recv, nullptr, dst, bytes, p));
        srcs.push_back(dst);
    }
    VCCL_RETURN_IF_ERROR(run_batch(comm, ops));
    return reduce(comm, op, recv, srcs, bytes / dtype_size(op.coll.dtype));
}

/* AllReduce in one kernel launch (device/ll_allreduce.h), for messages up to comm->ipc->ll_bytes(). */
vcclResult_t allreduce_ll(vcclComm* comm, const Op& op, const char* send, char* recv, size_t bytes) {
#if VCCL_HAVE_CUDA
    LlArgs args{};
    args.stride_words = uint32_t((bytes + 7) / 8 * 2);
    // The call's number is taken whatever happens: peers count calls too, and a call given up here must be
    // given up for them (ll_abandon), not paired with this rank's next one.
    comm->ipc->ll_next(&args);
    void* scratch = nullptr;
    vcclResult_t r = comm->device_scratch.get(size_t(comm->nranks) * args.stride_words * 4, op.stream, &scratch);
    args.scratch = static_cast<uint32_t*>(scratch);
    if (r == vcclSuccess && comm->test_fail_next_ll) {
        comm->test_fail_next_ll = false;
        r = set_last_error(vcclInternalError, "low-latency allreduce failed before its launch (test hook)");
    }
    if (r == vcclSuccess) {
        r = ll_allreduce(args, send, recv, op.coll.count, op.coll.dtype, op.coll.op, op.stream);
        if (r != vcclSuccess) set_last_error(r, "low-latency allreduce kernel launch failed");
    }
    if (r != vcclSuccess) comm->ipc->ll_abandon(args);
    return r;
#else
    (void)comm, (void)op, (void)send, (void)recv, (void)bytes;
    return set_last_error(vcclInternalError, "device allreduce in a build without CUDA");
#endif
}

} // namespace

vcclResult_t run_device_coll_direct(vcclComm* comm, const Op& op) {
    {
        const CollArgs& a = op.coll;
        size_t ts = dtype_size(a.dtype);
        const char* send = static_cast<const char*>(a.sendbuf);
        char* recv = static_cast<char*>(a.recvbuf);
        int rank = comm->rank, n = comm->nranks;
        if (a.count == 0) return vcclSuccess;
        switch (a.coll) {
        case CollType::ReduceScatter:
            return reduce_scatter_blocks(comm, op, send, recv, ts, 0, true, a.count);
        case CollType::AllReduce: {
            if (a.count * ts <= comm->ipc->ll_bytes()) return allreduce_ll(comm, op, send, recv, a.count * ts);
            if (a.count * ts <= comm->settings.small_bytes) return allreduce_one_shot(comm, op, send, recv, a.count * ts);
            size_t off, bytes;
            block_bytes(a.count, n, rank, ts, &off, &bytes);
            VCCL_RETURN_IF_ERROR(reduce_scatter_blocks(comm, op, send, recv + off, ts, a.count, false, 0));
            std::vector<Op> ops;
            for (int p = 0; p < n; ++p) {
                if (p == rank) continue;
                size_t poff, pbytes;
                block_bytes(a.count, n, p, ts, &poff, &pbytes);
                if (bytes > 0) ops.push_back(p2p_op(op, OpKind::Send, recv + off, nullptr, bytes, p));
                if (pbytes > 0) ops.push_back(p2p_op(op, OpKind::Recv, nullptr, recv + poff, pbytes, p));
            }
            return run_batch(comm, ops);
        }
        case CollType::Reduce: {
            size_t bytes = a.count * ts;
            if (rank != a.root) return run_batch(comm, {p2p_op(op, OpKind::Send, send, nullptr, bytes, a.root)});
            void* scratch = nullptr;
            if (n > 1) VCCL_RETURN_IF_ERROR(comm->device_scratch.get(bytes * size_t(n - 1), op.stream, &scratch));
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
            return reduce(comm, op, recv, srcs, a.count);
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
    switch (a.coll) {
    case CollType::AllGather:
        for (int p = 0; p < n; ++p) {
            if (p == rank) continue;
            ops.push_back(p2p_op(op, OpKind::Send, send, nullptr, block, p));
            ops.push_back(p2p_op(op, OpKind::Recv, nullptr, recv + size_t(p) * block, block, p));
        }
        VCCL_RETURN_IF_ERROR(local_copy(recv + size_t(rank) * block, send, block, op.stream));
        break;
    case CollType::Broadcast:
        if (rank == a.root) {
            for (int p = 0; p < n; ++p) {
                if (p != rank) ops.push_back(p2p_op(op, OpKind::Send, send, nullptr, block, p));
            }
            VCCL_RETURN_IF_ERROR(local_copy(recv, send, block, op.stream));
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
        VCCL_RETURN_IF_ERROR(local_copy(recv + size_t(rank) * block, send + size_t(rank) * block, block, op.stream));
        break;
    default:
        return set_last_error(vcclInternalError, "%s has no direct device algorithm", coll_name(a.coll));
    }
    return run_batch(comm, ops);
}

} // namespace vccl

/* SPDX-License-Identifier: BSD-3-Clause */
#include "algo/device/common.h"

#include "config.h"
#include "core/dtype.h"
#include "core/status.h"
#include "exec/p2p_batch.h"

#include "device/copies.h"

#if VCCL_HAVE_CUDA
#include "device/kernels/reduce_kernels.h"
#endif

namespace vccl {

Transfer device_send(const Op& op, const void* sendbuf, size_t bytes, int peer) {
    Transfer t;
    t.kind = Transfer::Send;
    t.peer = peer;
    t.mem = MemType::Cuda;
    t.stream = op.stream;
    t.sendbuf = sendbuf;
    t.bytes = bytes;
    return t;
}

Transfer device_recv(const Op& op, void* recvbuf, size_t bytes, int peer) {
    Transfer t;
    t.kind = Transfer::Recv;
    t.peer = peer;
    t.mem = MemType::Cuda;
    t.stream = op.stream;
    t.recvbuf = recvbuf;
    t.bytes = bytes;
    return t;
}

Transfer all_gather_send(const Op& op, const void* sendbuf, size_t bytes, int peer) {
    Transfer t = device_send(op, sendbuf, bytes, peer);
    t.peer_buffer_free = true;
    return t;
}

Transfer scratch_send(const Op& op, const void* sendbuf, size_t bytes, int peer, bool peers_free) {
    Transfer t = device_send(op, sendbuf, bytes, peer);
    t.peer_buffer_free = peers_free;
    return t;
}

bool take_peers_scratch_free(DevicePath& dev, const Op& op) {
    const bool free = dev.peers_scratch_waited && dev.peers_scratch_stream == op.stream;
    dev.peers_scratch_waited = false;
    return free;
}

void set_peers_scratch_waited(DevicePath& dev, const Op& op) {
    dev.peers_scratch_waited = true;
    dev.peers_scratch_stream = op.stream;
}

vcclResult_t run_batch(DevicePath& dev, const std::vector<Transfer>& batch) { return run_p2p_batch(dev, batch); }

vcclResult_t reduction_scratch(DevicePath& dev, size_t bytes, vcclStream_t stream, void** out) {
    if (dev.device_scratch.grows_for(bytes)) VCCL_RETURN_IF_ERROR(dev.services->stream_wait(stream, true));
    return dev.device_scratch.get(bytes, stream, out);
}

PreMulArg premul_arg(const Op& op) {
    PreMulArg arg;
    if (!op.premul) return arg;
    arg.on = 1;
    arg.device_scalar = op.premul_scalar.on_device ? op.premul_scalar.device_ptr : nullptr;
    arg.host_bits = op.premul_scalar.host_bits;
    return arg;
}

const char* own_input(const Op& op, const char* send) {
    return op.premul && op.premul_own_input != nullptr ? static_cast<const char*>(op.premul_own_input) : send;
}

vcclResult_t device_reduce_into(DevicePath& dev, const Op& op, vcclStream_t stream, void* dst,
                                const std::vector<const void*>& srcs, size_t count) {
#if VCCL_HAVE_CUDA
    int divide_by = op.coll.op == vcclAvg ? dev.nranks : 0;
    vcclResult_t r = device_reduce(dst, srcs.data(), int(srcs.size()), count, op.coll.dtype, op.coll.op, divide_by,
                                   dev.max_ctas, stream, premul_arg(op));
    if (r != vcclSuccess) return set_last_error(r, "reduction kernel launch failed");
    return vcclSuccess;
#else
    (void)dev, (void)op, (void)stream, (void)dst, (void)srcs, (void)count;
    return set_last_error(vcclInternalError, "device reduction in a build without CUDA");
#endif
}

vcclResult_t local_copy(void* dst, const void* src, size_t bytes, vcclStream_t stream) {
    if (dst == src || bytes == 0) return vcclSuccess;
    return copy_device_to_device(dst, src, bytes, stream);
}

namespace {
constexpr size_t kSideCopyBytes = 1u << 20;
} // namespace

vcclResult_t local_copy_beside(DevicePath& dev, void* dst, const void* src, size_t bytes, vcclStream_t stream,
                               bool* beside) {
    *beside = false;
    if (dst == src || bytes == 0) return vcclSuccess;
    if (bytes < kSideCopyBytes) return local_copy(dst, src, bytes, stream);
    VCCL_RETURN_IF_ERROR(dev.side_stream.fork(stream));
    *beside = true;
    return local_copy(dst, src, bytes, dev.side_stream.stream());
}

vcclResult_t join_beside(DevicePath& dev, const Op& op, bool beside, vcclResult_t batch_status) {
    if (!beside) return batch_status;
    vcclResult_t joined = dev.side_stream.join(op.stream);
    return batch_status == vcclSuccess ? joined : batch_status;
}

void block_bytes(size_t count, int n, int i, size_t ts, size_t* offset, size_t* bytes) {
    size_t b, e;
    block_range(count, n, i, &b, &e);
    *offset = b * ts;
    *bytes = (e - b) * ts;
}

} // namespace vccl

/* SPDX-License-Identifier: BSD-3-Clause */
#include "algo/premul.h"

#include <cstring>

#include "algo/device/device_coll.h"
#include "config.h"
#include "core/dtype.h"
#include "core/reduce.h"
#include "core/status.h"
#include "device/copies.h"
#include "device/scratch.h"

#if VCCL_HAVE_CUDA
#include "device/kernels/reduce_kernels.h"
#endif

namespace vccl {

namespace {

/* Elements of the call's input: ReduceScatter reduces nranks blocks. */
size_t input_count(const DevicePath& dev, const Op& op) {
    return op.coll.coll == CollType::ReduceScatter ? op.coll.count * size_t(dev.nranks) : op.coll.count;
}

/* How op's scaling is done (a PreMulSum collective): on the direct path as it plans, else from a scaled copy. */
PreMulPlan plan_of(const DevicePath& dev, const Op& op, bool staged) {
    if (staged || !device_coll_direct_possible(dev, op)) return PreMulPlan();
    return device_coll_premul_plan(dev, op);
}

#if VCCL_HAVE_CUDA
/* Elements [begin, end) of the input, scaled into the copy at the same offsets. */
vcclResult_t scale_range(const Op& op, void* scaled, size_t begin, size_t end, int max_ctas) {
    if (end <= begin) return vcclSuccess;
    const size_t ts = dtype_size(op.coll.dtype);
    const PreMulScalar& s = op.premul_scalar;
    vcclResult_t r = device_premul(static_cast<char*>(scaled) + begin * ts,
                                   static_cast<const char*>(op.coll.sendbuf) + begin * ts, end - begin, op.coll.dtype,
                                   s.on_device ? s.device_ptr : nullptr, s.host_bits, max_ctas, op.stream);
    if (r != vcclSuccess) return set_last_error(r, "PreMulSum: the scaling kernel's launch failed");
    return vcclSuccess;
}
#endif

} // namespace

vcclResult_t premul_reserve(DevicePath& dev, const std::vector<Op>& ops, bool staged, PreMulCall* call) {
    size_t device_total = 0;
    for (const Op& op : ops) {
        if (op.kind != OpKind::Collective || !op.premul || op.mem != MemType::Cuda) continue;
        if (plan_of(dev, op, staged).kind == PreMulPlan::Kernel) continue;
        device_total += DeviceScratch::slot_bytes(input_count(dev, op) * dtype_size(op.coll.dtype));
    }
    if (device_total == 0) return vcclSuccess;
    void* base = nullptr;
    VCCL_RETURN_IF_ERROR(dev.premul_scratch.get(device_total, nullptr, &base));
    call->device_base = static_cast<char*>(base);
    call->device_at = 0;
    return vcclSuccess;
}

vcclResult_t premul_apply(DevicePath& dev, Op* op, bool staged, PreMulCall* call) {
    if (op->kind != OpKind::Collective || !op->premul) return vcclSuccess;
    const size_t count = input_count(dev, *op);
    const size_t bytes = count * dtype_size(op->coll.dtype);
    const void* in = op->coll.sendbuf;
    void* scaled = nullptr;
    if (op->mem == MemType::Cuda) {
        const PreMulPlan plan = plan_of(dev, *op, staged);
        if (plan.kind == PreMulPlan::Kernel) {
            op->coll.op = vcclSum; // premul stays set: the kernel scales (algo/device/kernel_call.cc)
            op->premul_own_input = nullptr;
            return vcclSuccess;
        }
        scaled = call->device_base + call->device_at;
        call->device_at += DeviceScratch::slot_bytes(bytes);
        if (count > 0) {
#if VCCL_HAVE_CUDA
            if (plan.kind == PreMulPlan::OwnBlock) {
                // The blocks the peers get, scaled into the copy; the own block is scaled by the reduction.
                VCCL_RETURN_IF_ERROR(scale_range(*op, scaled, 0, plan.own_begin, dev.max_ctas));
                VCCL_RETURN_IF_ERROR(scale_range(*op, scaled, plan.own_end, count, dev.max_ctas));
                op->premul_own_input = in;
                op->coll.sendbuf = scaled;
                op->coll.op = vcclSum; // premul stays set
                return vcclSuccess;
            }
            VCCL_RETURN_IF_ERROR(scale_range(*op, scaled, 0, count, dev.max_ctas));
#else
            return set_last_error(vcclInternalError, "PreMulSum on device buffers in a build without CUDA");
#endif
        }
    } else {
        // Host buffers: the input (and a device scalar) is read once the stream's earlier work has run.
        if (op->stream != nullptr) VCCL_RETURN_IF_ERROR(dev.services->stream_wait(op->stream, false));
        uint64_t bits = op->premul_scalar.host_bits;
        if (op->premul_scalar.on_device) {
            VCCL_RETURN_IF_ERROR(
                read_device_bytes(&bits, op->premul_scalar.device_ptr, dtype_size(op->coll.dtype), op->stream));
        }
        call->host_copies.emplace_back(bytes);
        scaled = call->host_copies.back().data();
        if (count > 0) premul_host(scaled, in, count, op->coll.dtype, bits);
    }
    op->coll.sendbuf = scaled;
    op->coll.op = vcclSum;
    op->premul = false;
    return vcclSuccess;
}

} // namespace vccl

#include "comm/premul.h"

#include <cstring>

#include "config.h"

#include "comm/comm.h"
#include "comm/device_coll.h"
#include "comm/enqueue.h"
#include "core/dtype.h"
#include "core/reduce.h"
#include "core/status.h"
#include "device/memory.h"
#include "device/reduce_kernels.h"
#include "device/staging.h"

namespace vccl {

vcclResult_t PreMulOps::create(void* scalar, vcclDataType_t type, vcclScalarResidence_t residence, int comm_device,
                               vcclRedOp_t* out) {
    const char* fn = "vcclRedOpCreatePreMulSum";
    if (out == nullptr) return set_last_error(vcclInvalidArgument, "%s: op is NULL", fn);
    if (scalar == nullptr) return set_last_error(vcclInvalidArgument, "%s: scalar is NULL", fn);
    if (!dtype_valid(type)) return set_last_error(vcclInvalidArgument, "%s: invalid datatype %d", fn, int(type));
    Entry e;
    e.live = true;
    e.type = type;
    switch (residence) {
    case vcclScalarHostImmediate:
        memcpy(&e.scalar.host_bits, scalar, dtype_size(type));
        break;
    case vcclScalarDevice:
        if (mem_type_of(scalar) != MemType::Cuda) {
            return set_last_error(vcclInvalidArgument,
                                  "%s: the scalar is vcclScalarDevice but %p is not device memory (use "
                                  "vcclScalarHostImmediate for a host value)",
                                  fn, scalar);
        }
        if (comm_device >= 0 && device_of(scalar) != comm_device) {
            return set_last_error(vcclInvalidArgument,
                                  "%s: the vcclScalarDevice scalar %p is on GPU %d, the communicator's is GPU %d (the "
                                  "calls' kernels read it there)",
                                  fn, scalar, device_of(scalar), comm_device);
        }
        e.scalar.on_device = true;
        e.scalar.device_ptr = scalar;
        break;
    default:
        return set_last_error(vcclInvalidArgument, "%s: invalid scalar residence %d", fn, int(residence));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    size_t slot = 0;
    while (slot < entries_.size() && entries_[slot].live) ++slot;
    if (slot == entries_.size()) {
        if (entries_.size() >= kMaxOps) {
            return set_last_error(vcclInvalidUsage, "%s: the communicator already holds %zu PreMulSum ops; destroy "
                                  "those no longer used (vcclRedOpDestroy)", fn, entries_.size());
        }
        entries_.emplace_back();
    }
    entries_[slot] = e;
    *out = vcclRedOp_t(int(vcclNumOps) + int(slot));
    return vcclSuccess;
}

vcclResult_t PreMulOps::destroy(vcclRedOp_t op) {
    std::lock_guard<std::mutex> lock(mutex_);
    const long slot = long(op) - long(vcclNumOps);
    if (slot < 0) {
        return set_last_error(vcclInvalidArgument, "vcclRedOpDestroy: op %d is not one vcclRedOpCreatePreMulSum made",
                              int(op));
    }
    if (size_t(slot) >= entries_.size() || !entries_[size_t(slot)].live) {
        return set_last_error(vcclInvalidArgument, "vcclRedOpDestroy: op %d is not a live op of this communicator "
                              "(made by another one, or destroyed already)", int(op));
    }
    entries_[size_t(slot)].live = false;
    return vcclSuccess;
}

vcclResult_t PreMulOps::lookup(vcclRedOp_t op, vcclDataType_t type, const char* fn, PreMulScalar* out) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const long slot = long(op) - long(vcclNumOps);
    if (slot < 0 || size_t(slot) >= entries_.size() || !entries_[size_t(slot)].live) {
        return set_last_error(vcclInvalidArgument, "%s: reduction op %d is neither built in nor a live PreMulSum op "
                              "of this communicator (vcclRedOpCreatePreMulSum)", fn, int(op));
    }
    const Entry& e = entries_[size_t(slot)];
    if (e.type != type) {
        return set_last_error(vcclInvalidArgument, "%s: PreMulSum op %d was made for %s, the call's datatype is %s",
                              fn, int(op), dtype_name(e.type), dtype_name(type));
    }
    *out = e.scalar;
    return vcclSuccess;
}

namespace {

/* Elements of the call's input: ReduceScatter reduces nranks blocks. */
size_t input_count(const vcclComm* comm, const Op& op) {
    return op.coll.coll == CollType::ReduceScatter ? op.coll.count * size_t(comm->nranks) : op.coll.count;
}

/* How op's scaling is done (a PreMulSum collective): on the direct path as it plans, else from a scaled copy. */
PreMulPlan plan_of(const vcclComm* comm, const Op& op, bool staged) {
    if (staged || !device_coll_direct_possible(comm, op)) return PreMulPlan();
    return device_coll_premul_plan(comm, op);
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

vcclResult_t premul_reserve(vcclComm* comm, const std::vector<Op>& ops, bool staged, PreMulCall* call) {
    size_t device_total = 0;
    for (const Op& op : ops) {
        if (op.kind != OpKind::Collective || !op.premul || op.mem != MemType::Cuda) continue;
        if (plan_of(comm, op, staged).kind == PreMulPlan::Kernel) continue;
        device_total += DeviceScratch::slot_bytes(input_count(comm, op) * dtype_size(op.coll.dtype));
    }
    if (device_total == 0) return vcclSuccess;
    void* base = nullptr;
    VCCL_RETURN_IF_ERROR(comm->premul_scratch.get(device_total, nullptr, &base));
    call->device_base = static_cast<char*>(base);
    call->device_at = 0;
    return vcclSuccess;
}

vcclResult_t premul_apply(vcclComm* comm, Op* op, bool staged, PreMulCall* call) {
    if (op->kind != OpKind::Collective || !op->premul) return vcclSuccess;
    const size_t count = input_count(comm, *op);
    const size_t bytes = count * dtype_size(op->coll.dtype);
    const void* in = op->coll.sendbuf;
    void* scaled = nullptr;
    if (op->mem == MemType::Cuda) {
        const PreMulPlan plan = plan_of(comm, *op, staged);
        if (plan.kind == PreMulPlan::Kernel) {
            op->coll.op = vcclSum; // premul stays set: the kernel scales (device_coll.cc)
            op->premul_own_input = nullptr;
            return vcclSuccess;
        }
        scaled = call->device_base + call->device_at;
        call->device_at += DeviceScratch::slot_bytes(bytes);
        if (count > 0) {
#if VCCL_HAVE_CUDA
            if (plan.kind == PreMulPlan::OwnBlock) {
                // The blocks the peers get, scaled into the copy; the own block is scaled by the reduction.
                VCCL_RETURN_IF_ERROR(scale_range(*op, scaled, 0, plan.own_begin, comm->max_ctas));
                VCCL_RETURN_IF_ERROR(scale_range(*op, scaled, plan.own_end, count, comm->max_ctas));
                op->premul_own_input = in;
                op->coll.sendbuf = scaled;
                op->coll.op = vcclSum; // premul stays set
                return vcclSuccess;
            }
            VCCL_RETURN_IF_ERROR(scale_range(*op, scaled, 0, count, comm->max_ctas));
#else
            return set_last_error(vcclInternalError, "PreMulSum on device buffers in a build without CUDA");
#endif
        }
    } else {
        // Host buffers: the input (and a device scalar) is read once the stream's earlier work has run.
        if (op->stream != nullptr) VCCL_RETURN_IF_ERROR(comm_stream_wait(comm, op->stream));
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

/* SPDX-License-Identifier: BSD-3-Clause */
#include "algo/device/device_coll.h"

#include "algo/device/common.h"
#include "algo/device/kernel_call.h"
#include "config.h"
#include "core/dtype.h"
#include "core/status.h"
#include "device/kernels/reduce_kernels.h"

namespace vccl {

namespace {

/* The device transfers of one device collective carry its kind and number in telemetry. */
class FlowTagScope {
public:
    FlowTagScope(DevicePath& dev, const Op& op) : flows_(dev.flows) {
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

bool device_coll_direct_possible(const DevicePath& dev, const Op& op) {
    if (op.mem != MemType::Cuda || dev.ipc == nullptr) return false;
#if !VCCL_HAVE_CUDA
    return false;
#endif
    if (dev.nranks > kMaxReduceSources) return false;
    return dev.ipc->everyone_reachable(); // every rank on this host, every pair's flag buffers mapped
}

bool device_coll_capturable(const DevicePath& dev, const Op& op) {
    if (op.kind != OpKind::Collective || !device_coll_direct_possible(dev, op)) return false;
    return op.coll.count == 0 || ll_possible(dev, op);
}

vcclResult_t run_device_coll_direct(DevicePath& dev, const Op& op) {
    FlowTagScope flow_tag(dev, op);
    // Taken by every direct collective (algo/device/common.h), also those with nothing to move.
    const bool peers_free = take_peers_scratch_free(dev, op);
    if (op.coll.count == 0) return vcclSuccess;
    const DeviceAlgorithm* algo = device_algo_select(dev, op);
    // PreMulSum reached here as device_coll_premul_plan planned it, from the same sizes and settings.
    if (op.premul && (algo->premul == PreMulPlan::Kernel) != (op.premul_own_input == nullptr)) {
        return set_last_error(vcclInternalError, "PreMulSum %s: the path planned for its scaling is not the one taken",
                              coll_name(op.coll.coll));
    }
    return algo->run(dev, op, peers_free);
}

PreMulPlan device_coll_premul_plan(const DevicePath& dev, const Op& op) {
    PreMulPlan plan;
    const CollArgs& a = op.coll;
    if (a.count == 0 || dev.nranks < 2) return plan;
    plan.kind = device_algo_select(dev, op)->premul;
    if (plan.kind != PreMulPlan::OwnBlock) return plan;
    // This rank's own block of the input, which the reduction scales as it reads it.
    if (a.coll == CollType::ReduceScatter) {
        plan.own_begin = a.count * size_t(dev.rank);
        plan.own_end = plan.own_begin + a.count;
    } else {
        block_range(a.count, dev.nranks, dev.rank, &plan.own_begin, &plan.own_end);
    }
    return plan;
}

void device_coll_give_up(DevicePath& dev, const Op& op) {
    // A captured call given up leaves nothing on the device: the capture fails, no replay runs it.
    if (op.kind != OpKind::Collective || op.captured || !device_coll_direct_possible(dev, op) || op.coll.count == 0) {
        return;
    }
    if (device_algo_select(dev, op)->kernel) kernel_give_up(dev, op);
}

} // namespace vccl

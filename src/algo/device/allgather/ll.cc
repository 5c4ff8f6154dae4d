/* SPDX-License-Identifier: BSD-3-Clause */
/* AllGather in one low-latency kernel: every rank stores its block into each peer's word set. */
#include "algo/device/kernel_call.h"

namespace vccl {

const DeviceAlgorithm kDeviceAllGatherLl = {
    CollType::AllGather, "ll", "one kernel storing into the peers' memory",
    "up to VCCL_ALLREDUCE_LL_BYTES / (ranks - 1) bytes per rank; off where ranks share a GPU",
    true, PreMulPlan::Kernel, ll_possible, run_ll,
};

} // namespace vccl

/* SPDX-License-Identifier: BSD-3-Clause */
/* Broadcast in one low-latency kernel: the root stores its buffer into each peer's word set. */
#include "algo/device/kernel_call.h"

namespace vccl {

const DeviceAlgorithm kDeviceBroadcastLl = {
    CollType::Broadcast, "ll", "one kernel, the root storing into the peers' memory",
    "up to VCCL_ALLREDUCE_LL_BYTES / (ranks - 1) bytes; off where ranks share a GPU",
    true, PreMulPlan::Kernel, ll_possible, run_ll,
};

} // namespace vccl

/* SPDX-License-Identifier: BSD-3-Clause */
/* ReduceScatter in one low-latency kernel: every rank stores each peer's block into that peer's word set and reduces the blocks the peers stored into its own. */
#include "algo/device/kernel_call.h"

namespace vccl {

const DeviceAlgorithm kDeviceReduceScatterLl = {
    CollType::ReduceScatter, "ll", "one kernel storing each peer's block into its memory",
    "up to VCCL_ALLREDUCE_LL_BYTES / (ranks - 1) bytes per rank; off where ranks share a GPU",
    true, PreMulPlan::Kernel, ll_possible, run_ll,
};

} // namespace vccl

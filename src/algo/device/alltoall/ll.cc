/* SPDX-License-Identifier: BSD-3-Clause */
/* AlltoAll in one low-latency kernel: every rank stores each peer's block into that peer's word set. */
#include "algo/device/kernel_call.h"

namespace vccl {

const DeviceAlgorithm kDeviceAlltoAllLl = {
    CollType::AlltoAll, "ll", "one kernel storing each peer's block into its memory",
    "up to VCCL_ALLREDUCE_LL_BYTES / (ranks - 1) bytes per peer and at most 1 MiB; off where ranks share a GPU",
    true, PreMulPlan::Kernel, ll_possible, run_ll,
};

} // namespace vccl

/* SPDX-License-Identifier: BSD-3-Clause */
/* AllReduce in one low-latency kernel: every rank stores its input into each peer's word set, flags and data in one word, and reduces what the peers stored into its own. */
#include "algo/device/kernel_call.h"

namespace vccl {

const DeviceAlgorithm kDeviceAllReduceLl = {
    CollType::AllReduce, "ll", "one kernel of up to VCCL_MAX_CTAS blocks storing into the peers' memory",
    "up to VCCL_ALLREDUCE_LL_BYTES / (ranks - 1) bytes; off where ranks share a GPU",
    true, PreMulPlan::Kernel, ll_possible, run_ll,
};

} // namespace vccl

/* SPDX-License-Identifier: BSD-3-Clause */
/* Reduce in one low-latency kernel: every rank stores its buffer into the root's word sets, the root reduces them. */
#include "algo/device/kernel_call.h"

namespace vccl {

const DeviceAlgorithm kDeviceReduceLl = {
    CollType::Reduce, "ll", "one kernel storing into the root's memory",
    "up to VCCL_ALLREDUCE_LL_BYTES / (ranks - 1) bytes; off where ranks share a GPU",
    true, PreMulPlan::Kernel, ll_possible, run_ll,
};

} // namespace vccl

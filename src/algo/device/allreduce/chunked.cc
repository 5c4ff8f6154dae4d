/* SPDX-License-Identifier: BSD-3-Clause */
/* AllReduce in one chunked kernel (device/kernels/chunked_collectives.h): the data moves as is, in chunks through the
 * low-latency word sets, the kernel's blocks sending and reducing at once. No more device memory than the word sets. */
#include "algo/device/kernel_call.h"

namespace vccl {

const DeviceAlgorithm kDeviceAllReduceChunked = {
    CollType::AllReduce, "chunked", "one kernel moving the data in chunks through the peers' word sets",
    "above ll, up to VCCL_ALLREDUCE_KERNEL_BYTES (PreMulSum: VCCL_PREMULSUM_KERNEL_BYTES)",
    true, PreMulPlan::Kernel, chunked_possible, run_chunked,
};

} // namespace vccl

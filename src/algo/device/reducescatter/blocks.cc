/* SPDX-License-Identifier: BSD-3-Clause */
/* ReduceScatter in one batch: every rank receives its block from each peer into the reduction scratch, one kernel
 * reduces them into the output. */
#include "algo/device/common.h"
#include "algo/device/pipeline.h"
#include "core/dtype.h"

namespace vccl {

namespace {

bool possible(const DevicePath&, const Op& op) { return op.coll.count > 0; }

vcclResult_t run(DevicePath& dev, const Op& op, bool peers_free) {
    return reduce_scatter_blocks(dev, op, static_cast<const char*>(op.coll.sendbuf), static_cast<char*>(op.coll.recvbuf),
                                 dtype_size(op.coll.dtype), 0, true, op.coll.count, peers_free);
}

} // namespace

const DeviceAlgorithm kDeviceReduceScatterBlocks = {
    CollType::ReduceScatter, "blocks", "every peer's block into the reduction scratch, one kernel reduces them",
    "above the kernels' sizes, below 2 x VCCL_REDUCE_PIPELINE_BYTES of input",
    false, PreMulPlan::OwnBlock, possible, run,
};

} // namespace vccl

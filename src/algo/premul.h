/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * PreMulSum calls (comm/premul_ops.h): out = sum over ranks r of scalar_r * in_r.
 *
 * A call with such an op is run as a Sum. Where the collective reads its input in kernels of its own, they multiply
 * it there (PreMulPlan, algo/device/device_algo.h): the direct path's low-latency and chunked kernels scale every element
 * they read (no extra pass), and its copy-engine AllReduce and ReduceScatter scale this rank's own block in their
 * reduction kernel, reading the blocks they send the peers from a copy scaled beforehand (a pass over (n - 1) / n of
 * the input). Everywhere else (staging, the host transport, the direct path's small-size AllReduce and Reduce, which
 * send the whole input) the collective reads a scaled copy of all of it: the call multiplies the input by the rank's
 * scalar into scratch memory first (device buffers: one small kernel on the call's stream, reading a vcclScalarDevice
 * scalar there; host buffers: on the calling thread, after the stream). The copy lives in memory the communicator
 * keeps between calls (device) or for the call (host); calls reuse it in stream order, as the other scratch buffers.
 * The bits are the same either way: a fused kernel rounds each product to the type as the copy would hold it.
 */
#ifndef VCCL_ALGO_PREMUL_H_
#define VCCL_ALGO_PREMUL_H_

#include <vector>

#include "algo/op.h"
#include "exec/device_path.h"

namespace vccl {

/* The scaled inputs of one call's PreMulSum collectives: device regions side by side in the communicator's
 * scratch, host copies alive until the call returns. */
struct PreMulCall {
    char* device_base = nullptr;
    size_t device_at = 0;
    std::vector<std::vector<unsigned char>> host_copies;
};

/* Before a call (under the communicator's operation lock, after its stream order was taken) runs `ops`: the device
 * scratch for all its scaled copies (one growth at most per call; nothing when it needs none). `staged`: the call's
 * collectives go to the staging queue, not to the direct path. */
vcclResult_t premul_reserve(DevicePath& dev, const std::vector<Op>& ops, bool staged, PreMulCall* call);
/* Right before `op` runs (so a group's calls see each other's results in issue order): rewrites a PreMulSum
 * collective into a Sum, over a scaled copy of its input or (direct path) leaving the kernels to scale, as the header
 * says. `staged` as for premul_reserve. */
vcclResult_t premul_apply(DevicePath& dev, Op* op, bool staged, PreMulCall* call);

} // namespace vccl

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
#include "algo/device/kernel_call.h"

#include <algorithm>
#include <string>

#include "algo/device/common.h"
#include "config.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/test_point.h"
#include "device/memory.h"
#include "device/kernels/chunked_collectives.h"

namespace vccl {

LlKind kernel_kind(CollType coll) {
    switch (coll) {
    case CollType::AllReduce: return LlKind::AllReduce;
    case CollType::ReduceScatter: return LlKind::ReduceScatter;
    case CollType::AllGather: return LlKind::AllGather;
    case CollType::AlltoAll: return LlKind::AlltoAll;
    case CollType::Broadcast: return LlKind::Broadcast;
    case CollType::Reduce: return LlKind::Reduce;
    default: return LlKind::AllReduce;
    }
}

bool ll_possible(const DevicePath& dev, const Op& op) {
    const size_t bytes = op.coll.count * dtype_size(op.coll.dtype);
    // On 2x H200 an AlltoAll of 1 MiB a peer took 10.4 us on the kernel against 26-29 on the copy engines, 2 MiB
    // 25.1 against 20.4: the copy engines take it from there, also in place (where the kernel would be faster), since
    // the choice must go by sizes only.
    const size_t limit = op.coll.coll == CollType::AlltoAll ? std::min(dev.ipc->ll_bytes(), kLlAlltoAllMaxBytes)
                                                             : dev.ipc->ll_bytes();
    return op.coll.count > 0 && bytes <= limit;
}

bool chunked_possible(const DevicePath& dev, const Op& op) {
    const CollType c = op.coll.coll;
    if (c != CollType::AllReduce && c != CollType::ReduceScatter) return false;
    const size_t bytes = op.coll.count * dtype_size(op.coll.dtype);
    return op.coll.count > 0 && bytes <= kMaxChunkedBytes && dev.ipc->chunked_possible() &&
           (c != CollType::ReduceScatter || bytes % 16 == 0);
}

namespace {

#if VCCL_HAVE_CUDA
/* This rank gives up kernel call args.seq on the host: the peers are told (ll_abandon) and report it. The
 * communicator is then failed here too, for good: this rank's next kernel call would store into the word set of the
 * call before this one, which a peer's kernel may still be reading (the peers waited for nothing from this rank in
 * the call given up, and the chunked kernel's last chunks are not credited back), and would corrupt that call's
 * result or hang. The peers refuse their later calls once they see the mismatch; this rank refuses its own. */
void abandon_kernel_call(DevicePath& dev, const LlArgs& args, vcclStream_t stream, const std::string& why) {
    dev.ipc->ll_abandon(args, stream);
    dev.services->fail(vcclInvalidUsage, "this rank gave up its collective call " + std::to_string(args.seq) +
                                             " on one kernel before the kernel ran (" + why +
                                             "); its peers were told; abort or destroy the communicator");
}

/* Telemetry of a kernel call just launched (telemetry/device_flows.h): what this rank's kernel stores into each peer
 * and receives from it, the message to each peer (count elements; the word overhead is not counted). A sampled
 * call's note follows the kernel on its stream, in a driver call of its own. */
void kernel_flows(DevicePath& dev, const Op& op) {
    if (dev.flows == nullptr) return;
    const CollArgs& a = op.coll;
    using Flow = DeviceFlows::KernelFlow;
    const Flow flow = a.coll == CollType::Broadcast ? Flow::FromRoot
                      : a.coll == CollType::Reduce  ? Flow::ToRoot
                                                    : Flow::EveryPeer;
    const uint32_t note = dev.flows->kernel_posted(dev.rank, uint64_t(a.count) * dtype_size(a.dtype), flow, a.root);
    if (note == 0) return;
    dev.ipc->note(dev.flows->kernel_word(), note, op.stream);
    if (dev.ipc->flush() != vcclSuccess) {
        // The call itself was enqueued: only its record is lost (failed, not left outstanding).
        dev.flows->abandoned(dev.flows->kernel_word(), note);
        clear_last_error();
    }
}
#endif

} // namespace

#if VCCL_HAVE_CUDA
namespace {
/* The low-latency kernel captured into a CUDA graph: on the graph's word sets, its number taken on the device at
 * every replay (device/kernels/ll_collectives.h); the graph holds the words for as long as it lives. Nothing here
 * counts on the host, so a capture that fails leaves the eager calls' numbering as it was. */
vcclResult_t capture_kernel(DevicePath& dev, const Op& op) {
    LlArgs args{};
    std::shared_ptr<void> keep;
    if (!dev.ipc->ll_graph_args(&args, &keep)) {
        return set_last_error(vcclInvalidUsage, "%s cannot be captured: the low-latency kernel is off",
                              coll_name(op.coll.coll));
    }
    args.max_blocks = std::min(args.max_blocks, dev.max_ctas);
    args.root = op.coll.root;
    args.premul = premul_arg(op);
    const vcclResult_t r = ll_collective(args, kernel_kind(op.coll.coll), op.coll.sendbuf, op.coll.recvbuf,
                                         op.coll.count, op.coll.dtype, op.coll.op, op.stream);
    if (r != vcclSuccess) return set_last_error(r, "captured %s: kernel launch failed", coll_name(op.coll.coll));
    return stream_capture_keep(op.stream, std::move(keep));
}
} // namespace
#endif

vcclResult_t run_kernel(DevicePath& dev, const Op& op, bool chunked) {
#if VCCL_HAVE_CUDA
    if (op.captured) return capture_kernel(dev, op);
    const char* send = static_cast<const char*>(op.coll.sendbuf);
    char* recv = static_cast<char*>(op.coll.recvbuf);
    const LlKind kind = kernel_kind(op.coll.coll);
    LlArgs args{};
    // The call's number is taken whatever happens: peers count calls too, and a call given up here must be
    // given up for them (ll_abandon), not paired with this rank's next one.
    dev.ipc->ll_next(&args);
    const char* what = chunked ? "chunked" : "low-latency";
    vcclResult_t r = vcclSuccess;
    if (test_point(dev.test_key, TestPoint::FailKernelCall)) {
        r = set_last_error(vcclInternalError, "%s %s failed before its launch (test point)", what,
                           coll_name(op.coll.coll));
    }
    args.max_blocks = std::min(args.max_blocks, dev.max_ctas);
    args.root = op.coll.root;
    args.premul = premul_arg(op); // PreMulPlan::Kernel: the kernel scales the input as it reads it
    if (chunked) args.chunk_stop = uint32_t(test_point(dev.test_key, TestPoint::ChunkedStop));
    if (r == vcclSuccess) {
        r = chunked ? chunked_collective(args, kind, send, recv, op.coll.count, op.coll.dtype, op.coll.op, op.stream)
                    : ll_collective(args, kind, send, recv, op.coll.count, op.coll.dtype, op.coll.op, op.stream);
        if (r != vcclSuccess) set_last_error(r, "%s %s kernel launch failed", what, coll_name(op.coll.coll));
    }
    if (r == vcclSuccess) {
        dev.ipc->ll_launched(args);
        test_point(dev.test_key, chunked ? TestPoint::ChunkedCall : TestPoint::LlCall);
        kernel_flows(dev, op);
    } else {
        abandon_kernel_call(dev, args, op.stream, last_error_message());
    }
    return r;
#else
    (void)dev, (void)op, (void)chunked;
    return set_last_error(vcclInternalError, "device collective in a build without CUDA");
#endif
}

void kernel_give_up(DevicePath& dev, const Op& op) {
#if VCCL_HAVE_CUDA
    LlArgs args{};
    dev.ipc->ll_next(&args);
    abandon_kernel_call(dev, args, op.stream, "an earlier operation of its call or group failed");
#else
    (void)dev, (void)op;
#endif
}

} // namespace vccl

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Collectives in one kernel launch: the low-latency kernel (device/kernels/ll_collectives.h) for messages up to
 * VCCL_ALLREDUCE_LL_BYTES / (ranks - 1) a peer, and the chunked kernel (device/kernels/chunked_collectives.h) for
 * AllReduce and ReduceScatter above it, in the same word sets. Every call takes a call number of the word sets,
 * on every rank, whether it launches or not: a call given up on the host is told to the peers (ll_abandon), who
 * neither wait for it nor pair it with a later one.
 */
#ifndef VCCL_ALGO_DEVICE_KERNEL_CALL_H_
#define VCCL_ALGO_DEVICE_KERNEL_CALL_H_

#include "algo/device/device_algo.h"
#include "device/kernels/ll_collectives.h"

namespace vccl {

/* The kernel kind of a collective. */
LlKind kernel_kind(CollType coll);
/* Whether the low-latency kernel takes op: its message to each peer (count elements) fits the word sets
 * (AlltoAll: and at most kLlAlltoAllMaxBytes). */
bool ll_possible(const DevicePath& dev, const Op& op);
/* Whether the chunked kernel takes op (AllReduce, ReduceScatter): word sets of at least two chunks, at most
 * kMaxChunkedBytes, and for ReduceScatter a multiple of 16 bytes per rank (the kernel's 16-byte accesses stay
 * aligned for every rank's block). */
bool chunked_possible(const DevicePath& dev, const Op& op);
/* Runs op in one kernel: the chunked one when `chunked`, else the low-latency one. */
vcclResult_t run_kernel(DevicePath& dev, const Op& op, bool chunked);
/* The two as DeviceAlgorithm::run. */
inline vcclResult_t run_ll(DevicePath& dev, const Op& op, bool) { return run_kernel(dev, op, false); }
inline vcclResult_t run_chunked(DevicePath& dev, const Op& op, bool) { return run_kernel(dev, op, true); }
/* Op, which a kernel algorithm would have run, will not run on this rank (an earlier part of its call failed): its
 * call number is taken, the peers are told, and the communicator fails here too. */
void kernel_give_up(DevicePath& dev, const Op& op);

/* AlltoAll's words cost it more than the copy engines from about 1.5 MiB a peer. */
constexpr size_t kLlAlltoAllMaxBytes = size_t(1) << 20;

} // namespace vccl

#endif

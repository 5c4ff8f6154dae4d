/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Dispatch: a call's operations (algo/op.h), as the API hands them over, run now or kept for the group's end; each
 * collective goes to a device algorithm (algo/device/), to staging around a host algorithm, or to a host algorithm
 * (algo/host/), and the call's sends and receives to the executor (exec/p2p_batch.h).
 */
#ifndef VCCL_COMM_ENQUEUE_H_
#define VCCL_COMM_ENQUEUE_H_

#include <vector>

#include "algo/op.h"
#include "comm/comm.h"
#include "transport/transport.h"

namespace vccl {

/* Runs op now, or adds it to the calling thread's open group. */
vcclResult_t enqueue(const Op& op);

/* Runs one communicator's share of a group: its collectives in posting order, then all its sends and
 * receives together (posted at once, so no order of peers can deadlock). */
vcclResult_t run_comm_ops(vcclComm* comm, const std::vector<Op>& ops);

/* Waits for `stream` where a call must (host buffers with a stream, synchronous staging). Every 10 ms of
 * waiting it looks whether the wait can still end: vcclCommAbort on another thread (which needs this call's
 * lock) and, on a communicator with the direct device path, a failed peer (failed_peer_polled: the stream
 * may wait for that peer's flags, which never come); vcclRemoteError then, the communicator failed as
 * vcclCommGetAsyncError would find it. Work the call enqueued before the wait stays queued, so what it
 * writes must not be the caller's memory (the direct path lands FIFO receives into host memory in pinned memory
 * of the communicator's, and copies them out after this wait: transport/cuda_ipc/direct_path.cc). */
vcclResult_t comm_stream_wait(vcclComm* comm, vcclStream_t stream);
/* The same for device work: a NULL `stream` is CUDA's legacy default stream, which is waited for too (the plain
 * version skips NULL, which host-memory calls pass and where no GPU may be current). */
vcclResult_t comm_device_stream_wait(vcclComm* comm, vcclStream_t stream);

} // namespace vccl

#endif

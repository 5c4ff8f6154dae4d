/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The executor: runs one communicator's batch of sends and receives over the transports that reach each peer
 * (transport/stream_transport.h), the direct GPU path first, host staging for what it leaves. Used for the API's
 * grouped send/recv and for the transfers the device collectives are made of. Caller holds the operation lock.
 */
#ifndef VCCL_EXEC_P2P_BATCH_H_
#define VCCL_EXEC_P2P_BATCH_H_

#include <vector>

#include "exec/device_path.h"
#include "transport/transfer.h"

namespace vccl {

/* Posts every send and receive of the batch, then completes them; peers may post in any order. Direct device
 * transfers return once enqueued on their streams; the others when done. */
vcclResult_t run_p2p_batch(DevicePath& dev, const std::vector<const Transfer*>& batch);
inline vcclResult_t run_p2p_batch(DevicePath& dev, const std::vector<Transfer>& batch) {
    std::vector<const Transfer*> ptrs;
    ptrs.reserve(batch.size());
    for (const Transfer& t : batch) ptrs.push_back(&t);
    return run_p2p_batch(dev, ptrs);
}

/* The batch through the staged queue (transport/staging/staged_queue.h): every transfer on device memory with a
 * peer the direct path does not reach. Returns once enqueued; the transfers run on the queue's proxy thread. */
vcclResult_t submit_p2p_staged(DevicePath& dev, const std::vector<const Transfer*>& batch);

} // namespace vccl

#endif

/* Sends and receives of one communicator, issued together: the direct GPU path with peers on this host
 * (device/ipc_p2p.h) where both sides allow it, the host transport for the rest (device buffers staged). */
#ifndef VCCL_COMM_P2P_EXEC_H_
#define VCCL_COMM_P2P_EXEC_H_

#include <vector>

#include "comm/enqueue.h"
#include "device/staged_queue.h"

namespace vccl {

/* Posts every send and receive of the batch, then completes them; peers may post in any order. Direct
 * device transfers return once enqueued on their streams; the others when done. Caller holds op_mutex. */
vcclResult_t run_p2p_batch(vcclComm* comm, const std::vector<const Op*>& ops);

/* The batch through the staged queue (device/staged_queue.h): every op on device memory with a peer the
 * direct path does not reach. Returns once enqueued; the transfers run on the queue's proxy thread. */
vcclResult_t submit_p2p_staged(vcclComm* comm, StagedQueue* queue, const std::vector<const Op*>& ops);

bool ranges_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes);

} // namespace vccl

#endif

/* Device-memory collectives that run as batches of direct GPU transfers (see device_coll.cc). */
#ifndef VCCL_COMM_DEVICE_COLL_H_
#define VCCL_COMM_DEVICE_COLL_H_

#include "comm/enqueue.h"

namespace vccl {

/* True when op (a collective on device buffers) can run on the direct path: every rank on this host,
 * all mapped (and, in a build without CUDA, never). Symmetric across ranks. */
bool device_coll_direct_possible(const vcclComm* comm, const Op& op);
vcclResult_t run_device_coll_direct(vcclComm* comm, const Op& op);
/* op, which the direct path would have run, will not run on this rank (an earlier part of its call failed): if
 * it would have run in one kernel (low-latency or chunked), its call number is taken, the peers are told
 * (IpcP2p::ll_abandon) so that they neither wait for it nor pair it with a later call, and the communicator
 * fails here too (device_coll.cc, abandon_kernel_call). */
void device_coll_give_up(vcclComm* comm, const Op& op);

} // namespace vccl

#endif

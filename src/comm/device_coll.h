/* Device-memory collectives that run as batches of direct GPU transfers (see device_coll.cc). */
#ifndef VCCL_COMM_DEVICE_COLL_H_
#define VCCL_COMM_DEVICE_COLL_H_

#include "comm/enqueue.h"

namespace vccl {

/* True when op (a collective on device buffers) can run on the direct path: every rank on this host,
 * all mapped (and, in a build without CUDA, never). Symmetric across ranks. */
bool device_coll_direct_possible(const vcclComm* comm, const Op& op);
vcclResult_t run_device_coll_direct(vcclComm* comm, const Op& op);

} // namespace vccl

#endif

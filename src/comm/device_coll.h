/* Device-memory collectives that run as batches of direct GPU transfers (see device_coll.cc). */
#ifndef VCCL_COMM_DEVICE_COLL_H_
#define VCCL_COMM_DEVICE_COLL_H_

#include "comm/enqueue.h"

namespace vccl {

/* True when op (a collective on device buffers) can run on the direct path: every rank on this host,
 * all mapped (and, in a build without CUDA, never). Symmetric across ranks. */
bool device_coll_direct_possible(const vcclComm* comm, const Op& op);
vcclResult_t run_device_coll_direct(vcclComm* comm, const Op& op);

/* How the direct path takes a PreMulSum collective's scaling (comm/premul.h), decided from the call's sizes and the
 * agreed settings, as the path itself is. */
struct PreMulPlan {
    enum Kind {
        ScaledCopy, // the collective reads a copy of the whole input, multiplied in a pass of its own
        Kernel,     // the low-latency or chunked kernel multiplies each element where it reads it: no pass, no copy
        // The copy-engine reduction (AllReduce above VCCL_ALLREDUCE_SMALL_BYTES, ReduceScatter): the blocks sent to
        // the peers come from a copy scaled outside [own_begin, own_end) (elements of the input), and the reduction
        // kernel multiplies this rank's own block as it reads it: a pass over (n - 1) / n of the input, not all.
        OwnBlock,
    };
    Kind kind = ScaledCopy;
    size_t own_begin = 0;
    size_t own_end = 0;
};
/* op: a PreMulSum collective on device buffers that the direct path will run (device_coll_direct_possible). */
PreMulPlan device_coll_premul_plan(const vcclComm* comm, const Op& op);
/* op, which the direct path would have run, will not run on this rank (an earlier part of its call failed): if
 * it would have run in one kernel (low-latency or chunked), its call number is taken, the peers are told
 * (IpcP2p::ll_abandon) so that they neither wait for it nor pair it with a later call, and the communicator
 * fails here too (device_coll.cc, abandon_kernel_call). */
void device_coll_give_up(vcclComm* comm, const Op& op);

} // namespace vccl

#endif

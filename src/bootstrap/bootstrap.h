/*
 * Bootstrap: the small, slow, reliable channel ranks use to find each other and exchange addresses before
 * the data path exists. Two implementations: tcp/ (unique id) and mpi/ (over an MPI communicator).
 * Every call is blocking and bounded: it returns vcclTimeout when VCCL_BOOTSTRAP_TIMEOUT expires, never hangs.
 * Implementations are thread safe: communicators split from one another share their parent's bootstrap.
 */
#ifndef VCCL_BOOTSTRAP_BOOTSTRAP_H_
#define VCCL_BOOTSTRAP_BOOTSTRAP_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/export.h"
#include "vccl.h"

namespace vccl {

class VCCL_INTERNAL_API Bootstrap {
public:
    virtual ~Bootstrap() = default;

    virtual int rank() const = 0;
    virtual int nranks() const = 0;

    /* Point-to-point: a message to `peer` with `tag` matches the receive with the same (sender, tag); messages
     * with equal (sender, tag) match in order. recv fails with vcclInternalError if the sizes differ. */
    virtual vcclResult_t send(int peer, uint64_t tag, const void* data, size_t bytes) = 0;
    virtual vcclResult_t recv(int peer, uint64_t tag, void* data, size_t bytes) = 0;

    /* data holds nranks slots of `bytes`; this rank's slot (data + rank*bytes) is filled on entry, all on exit. */
    virtual vcclResult_t allgather(void* data, size_t bytes);
    /* root's data is copied to every rank. */
    virtual vcclResult_t broadcast(void* data, size_t bytes, int root);
    virtual vcclResult_t barrier();

    /*
     * A bootstrap over a subset of this one's ranks, for vcclCommSplit. `members` lists this bootstrap's ranks
     * in the new order; `new_rank` is the caller's index in it. `split_id` must be equal on all members and
     * unique among splits of this bootstrap (the communicator's split counter, combined with the color).
     * The default implementation routes over this bootstrap; MPI overrides it with MPI_Comm_split.
     */
    virtual vcclResult_t split(const std::vector<int>& members, int new_rank, uint64_t split_id,
                               std::shared_ptr<Bootstrap>* out);

    /* Unblocks waits in progress (they return vcclRemoteError) and fails later ones: used by vcclCommAbort. */
    virtual void abort() {}
};

/* A bootstrap that routes a subset of a parent's ranks over the parent, with tags kept apart by split_id. */
VCCL_INTERNAL_API std::shared_ptr<Bootstrap> make_subset_bootstrap(std::shared_ptr<Bootstrap> parent, const std::vector<int>& members,
                                                 int new_rank, uint64_t split_id);

} // namespace vccl

#endif

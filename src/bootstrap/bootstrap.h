/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Bootstrap: the small, slow, reliable channel ranks use to find each other and exchange addresses before
 * the data path exists. Two implementations: tcp/ (unique id) and mpi/ (over an MPI communicator).
 * Every call is blocking and bounded: it returns vcclTimeout when VCCL_BOOTSTRAP_TIMEOUT expires, never hangs.
 * Implementations are thread safe: communicators split from one another share their parent's bootstrap.
 */
#ifndef VCCL_BOOTSTRAP_BOOTSTRAP_H_
#define VCCL_BOOTSTRAP_BOOTSTRAP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/clock.h"
#include "core/env.h"
#include "vccl.h"

namespace vccl {

/*
 * Tags. Callers own bits 0..61. Bit 62 marks the messages of the default collectives below and bit 63 the
 * messages a subset bootstrap routes over its parent, so neither can ever match a caller's own tag.
 */
constexpr uint64_t kBootstrapCollTagBit = 1ull << 62;
constexpr uint64_t kBootstrapSubsetTagBit = 1ull << 63;
constexpr uint64_t kBootstrapUserTagMask = kBootstrapCollTagBit - 1;

/* VCCL_BOOTSTRAP_TIMEOUT in seconds, at least 1: a bootstrap wait is always bounded. */
inline int bootstrap_timeout_s() {
    int64_t s = env::get_int(env::kBootstrapTimeout);
    if (s < 1) return 1;
    if (s > 1000000) return 1000000;
    return int(s);
}
/* The deadline of one bootstrap wait that starts now. */
inline Deadline bootstrap_deadline() { return Deadline::after_ms(int64_t(bootstrap_timeout_s()) * 1000); }

/*
 * The abort flags a call passes through, innermost first: a subset bootstrap hands its own flag (chained to
 * its caller's) to its parent, so aborting a child unblocks a wait that is running inside the parent.
 */
struct CancelScope {
    const std::atomic<bool>* flag = nullptr;
    const CancelScope* outer = nullptr;

    static bool cancelled(const CancelScope* scope) {
        for (; scope != nullptr; scope = scope->outer) {
            if (scope->flag != nullptr && scope->flag->load(std::memory_order_acquire)) return true;
        }
        return false;
    }
};

/* enable_shared_from_this: the default split() hands a shared_ptr to this bootstrap to its children, which
 * keep it alive (a split communicator may outlive its parent). */
class Bootstrap : public std::enable_shared_from_this<Bootstrap> {
public:
    virtual ~Bootstrap() = default;

    virtual int rank() const = 0;
    virtual int nranks() const = 0;

    /* Point-to-point: a message to `peer` with `tag` matches the receive with the same (sender, tag); messages
     * with equal (sender, tag) match in order. recv fails with vcclInternalError if the sizes differ. */
    virtual vcclResult_t send(int peer, uint64_t tag, const void* data, size_t bytes) = 0;
    virtual vcclResult_t recv(int peer, uint64_t tag, void* data, size_t bytes) = 0;

    /* send/recv that also give up (vcclRemoteError) as soon as a flag in `cancel` is raised. The default
     * ignores `cancel`; implementations that can wait long override them. */
    virtual vcclResult_t send_cancellable(int peer, uint64_t tag, const void* data, size_t bytes,
                                          const CancelScope* cancel) {
        return send(peer, tag, data, bytes);
    }
    virtual vcclResult_t recv_cancellable(int peer, uint64_t tag, void* data, size_t bytes,
                                          const CancelScope* cancel) {
        return recv(peer, tag, data, bytes);
    }

    /* data holds nranks slots of `bytes`; this rank's slot (data + rank*bytes) is filled on entry, all on exit. */
    virtual vcclResult_t allgather(void* data, size_t bytes);
    /* root's data is copied to every rank. */
    virtual vcclResult_t broadcast(void* data, size_t bytes, int root);
    virtual vcclResult_t barrier();

    /*
     * A bootstrap over a subset of this one's ranks, for vcclCommSplit. `members` lists this bootstrap's ranks
     * in the new order; `new_rank` is the caller's index in it. `split_id` must be equal on all members and
     * unique among splits of this bootstrap (the communicator's split counter, combined with the color).
     * Only the members call split (it is collective over them alone). The default implementation routes over
     * this bootstrap; MPI overrides it with MPI_Comm_create_group.
     */
    virtual vcclResult_t split(const std::vector<int>& members, int new_rank, uint64_t split_id,
                               std::shared_ptr<Bootstrap>* out);

    /* Unblocks waits in progress (they return vcclRemoteError) and fails later ones: used by vcclCommAbort. */
    virtual void abort() {}

protected:
    /* The tag of the next default collective: all ranks call collectives in the same order, so the counters
     * agree, and consecutive collectives never share a tag. */
    uint64_t next_coll_tag(uint64_t kind);

private:
    std::atomic<uint64_t> coll_seq_{0};
};

/*
 * A bootstrap that routes a subset of a parent's ranks over the parent, with tags kept apart by split_id
 * (scheme in subset_bootstrap.cc). Returns nullptr (and sets the last error) when the arguments are invalid:
 * empty or duplicate members, a member out of the parent's range, or members[new_rank] != parent->rank().
 */
std::shared_ptr<Bootstrap> make_subset_bootstrap(std::shared_ptr<Bootstrap> parent, const std::vector<int>& members,
                                                 int new_rank, uint64_t split_id);

} // namespace vccl

#endif

/*
 * The MPI bootstrap: Bootstrap over a private duplicate of an MPI communicator. The only code in src/
 * that includes mpi.h; it is built into libvccl_mpi so that libvccl itself never depends on MPI.
 *
 * Every wait is nonblocking MPI (Isend, Improbe, Iallgather, ...) polled against the bootstrap deadline,
 * so a missing rank yields vcclTimeout instead of a hang. When MPI runs below MPI_THREAD_MULTIPLE, calls
 * into MPI are serialised by a process-wide mutex (callers still need at least MPI_THREAD_SERIALIZED to use
 * vccl from several threads).
 */
#ifndef VCCL_BOOTSTRAP_MPI_MPI_BOOTSTRAP_H_
#define VCCL_BOOTSTRAP_MPI_MPI_BOOTSTRAP_H_

#include <mpi.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "vccl.h"

namespace vccl {

/* Duplicates `comm` (collective over it) and wraps the duplicate. */
vcclResult_t mpi_bootstrap_create(MPI_Comm comm, std::shared_ptr<Bootstrap>* out);

class MpiBootstrap final : public Bootstrap {
public:
    /* Takes ownership of `owned` (a communicator private to vccl). */
    explicit MpiBootstrap(MPI_Comm owned);
    ~MpiBootstrap() override;

    int rank() const override { return rank_; }
    int nranks() const override { return nranks_; }
    vcclResult_t send(int peer, uint64_t tag, const void* data, size_t bytes) override;
    vcclResult_t recv(int peer, uint64_t tag, void* data, size_t bytes) override;
    vcclResult_t send_cancellable(int peer, uint64_t tag, const void* data, size_t bytes,
                                  const CancelScope* cancel) override;
    vcclResult_t recv_cancellable(int peer, uint64_t tag, void* data, size_t bytes, const CancelScope* cancel) override;
    vcclResult_t allgather(void* data, size_t bytes) override;
    vcclResult_t broadcast(void* data, size_t bytes, int root) override;
    vcclResult_t barrier() override;
    /* MPI_Comm_create_group over the members (collective over them only, like the default split), after
     * a bounded barrier among them so the unbounded MPI call only starts once every member is there. */
    vcclResult_t split(const std::vector<int>& members, int new_rank, uint64_t split_id,
                       std::shared_ptr<Bootstrap>* out) override;
    void abort() override { aborted_.store(true, std::memory_order_release); }

private:
    /* Polls `req` until it completes. On failure the request stays active inside MPI: `keep_alive` (the
     * buffer MPI may still touch) is then deliberately leaked rather than freed under MPI's feet. */
    vcclResult_t wait(MPI_Request* req, std::unique_ptr<std::vector<uint8_t>>* keep_alive, const Deadline& deadline,
                      const CancelScope* cancel, const char* what);

    MPI_Comm comm_;
    int rank_ = 0;
    int nranks_ = 0;
    std::atomic<bool> aborted_{false};
    std::mutex stash_mutex_;
    std::map<std::pair<int, uint64_t>, std::deque<std::vector<uint8_t>>> stash_; // received, not yet asked for
};

} // namespace vccl

#endif

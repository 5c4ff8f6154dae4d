/* SPDX-License-Identifier: BSD-3-Clause */
#include "bootstrap/mpi/mpi_bootstrap.h"

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace vccl_mpi {

namespace {

/* All point-to-point bootstrap traffic uses this one MPI tag; the 64-bit bootstrap tag travels in an 8-byte
 * header in front of the payload (MPI tags may be as small as 15 bits). */
constexpr int kP2pMpiTag = 0x7cc;
constexpr size_t kHeaderBytes = 8;

thread_local char t_last_error[1024];

vcclResult_t fail(vcclResult_t result, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
vcclResult_t fail(vcclResult_t result, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_last_error, sizeof(t_last_error), fmt, ap);
    va_end(ap);
    return result;
}

/* Serialises MPI calls when the library was not initialised with MPI_THREAD_MULTIPLE. */
class MpiLock {
public:
    MpiLock() {
        if (!thread_multiple()) lock_ = std::unique_lock<std::mutex>(mutex());
    }

private:
    static std::mutex& mutex() {
        static std::mutex* m = new std::mutex(); // never destroyed: may be used during exit
        return *m;
    }
    static bool thread_multiple() {
        static const bool multiple = [] {
            int provided = MPI_THREAD_SINGLE;
            MPI_Query_thread(&provided);
            return provided == MPI_THREAD_MULTIPLE;
        }();
        return multiple;
    }
    std::unique_lock<std::mutex> lock_;
};

bool mpi_usable() {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    return initialized && !finalized;
}

/* Sleeps a little longer each idle round: fast when the peer is already there, cheap when it is not. */
class Backoff {
public:
    void pause() {
        if (++rounds_ < 64) {
            std::this_thread::yield();
            return;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(rounds_ < 1024 ? 50 : 500));
    }

private:
    int rounds_ = 0;
};

/* The end of one call's wait (vcclBootstrapWait_t). */
class Deadline {
public:
    explicit Deadline(const vcclBootstrapWait_t* w)
        : wait_(w), end_(std::chrono::steady_clock::now() +
                         std::chrono::milliseconds(w != nullptr && w->timeoutMs > 0 ? w->timeoutMs : 1000)) {}
    bool expired() const { return std::chrono::steady_clock::now() >= end_; }
    bool cancelled() const { return wait_ != nullptr && wait_->cancelled != nullptr && wait_->cancelled(wait_->cancelArg); }
    long long timeout_s() const { return wait_ != nullptr ? wait_->timeoutMs / 1000 : 1; }

private:
    const vcclBootstrapWait_t* wait_;
    std::chrono::steady_clock::time_point end_;
};

vcclResult_t mpi_error(int code, const char* call, const char* what) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, text, &len);
    return fail(vcclSystemError, "%s: %s failed: %s", what, call, text);
}

vcclResult_t check_int_size(size_t bytes, const char* what) {
    if (bytes > size_t(INT_MAX)) {
        return fail(vcclInvalidArgument, "%s: %zu bytes exceed what one MPI call can move (INT_MAX)", what, bytes);
    }
    return vcclSuccess;
}

#define VMPI_RETURN_IF_ERROR(expr)                  \
    do {                                            \
        vcclResult_t r_ = (expr);                   \
        if (r_ != vcclSuccess) return r_;           \
    } while (0)

class MpiBootstrap {
public:
    /* Takes ownership of `owned` (a communicator private to vccl). */
    explicit MpiBootstrap(MPI_Comm owned) : comm_(owned) {
        MpiLock lock;
        // Errors must come back as codes we can turn into vcclResult_t, not abort the job.
        MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
        MPI_Comm_rank(comm_, &rank_);
        MPI_Comm_size(comm_, &nranks_);
    }
    ~MpiBootstrap() {
        // After MPI_Finalize no MPI call is allowed; the communicator went away with MPI anyway.
        if (mpi_usable()) {
            MpiLock lock;
            MPI_Comm_free(&comm_);
        }
    }
    MpiBootstrap(const MpiBootstrap&) = delete;
    MpiBootstrap& operator=(const MpiBootstrap&) = delete;

    int rank() const { return rank_; }
    int nranks() const { return nranks_; }
    vcclResult_t send(int peer, uint64_t tag, const void* data, size_t bytes, const Deadline& deadline);
    vcclResult_t recv(int peer, uint64_t tag, void* data, size_t bytes, const Deadline& deadline);
    vcclResult_t allgather(void* data, size_t bytes, const Deadline& deadline);
    vcclResult_t broadcast(void* data, size_t bytes, int root, const Deadline& deadline);
    vcclResult_t barrier(const Deadline& deadline);
    /* MPI_Comm_create_group over the members (collective over them only); vccl has made them meet first. */
    vcclResult_t split(const int* members, int nmembers, int new_rank, uint64_t split_id, vcclBootstrap_t* out);
    void abort() { aborted_.store(true, std::memory_order_release); }

    /* The vcclBootstrap_t whose ctx is this object. */
    void fill(vcclBootstrap_t* ops);

private:
    bool stopped(const Deadline& d) const { return aborted_.load(std::memory_order_acquire) || d.cancelled(); }
    /* Polls `req` until it completes. On failure the request stays active inside MPI: `keep_alive` (the
     * buffer MPI may still touch) is then deliberately leaked rather than freed under MPI's feet. */
    vcclResult_t wait(MPI_Request* req, std::unique_ptr<std::vector<uint8_t>>* keep_alive, const Deadline& deadline,
                      bool cancellable, const char* what);

    MPI_Comm comm_;
    int rank_ = 0;
    int nranks_ = 0;
    std::atomic<bool> aborted_{false};
    std::mutex stash_mutex_;
    std::map<std::pair<int, uint64_t>, std::deque<std::vector<uint8_t>>> stash_; // received, not yet asked for
};

vcclResult_t MpiBootstrap::wait(MPI_Request* req, std::unique_ptr<std::vector<uint8_t>>* keep_alive,
                                const Deadline& deadline, bool cancellable, const char* what) {
    Backoff backoff;
    for (;;) {
        int done = 0, rc;
        {
            MpiLock lock;
            rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        }
        if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Test", what);
        if (done) return vcclSuccess;
        const bool stop = aborted_.load(std::memory_order_acquire) || (cancellable && deadline.cancelled());
        if (stop || deadline.expired()) {
            if (keep_alive) (void)keep_alive->release();
            if (stop) return fail(vcclRemoteError, "%s: bootstrap aborted", what);
            return fail(vcclTimeout, "%s: timed out after %lld s (VCCL_BOOTSTRAP_TIMEOUT)", what, deadline.timeout_s());
        }
        backoff.pause();
    }
}

vcclResult_t MpiBootstrap::send(int peer, uint64_t tag, const void* data, size_t bytes, const Deadline& deadline) {
    char what[160];
    snprintf(what, sizeof(what), "MPI bootstrap rank %d: sending %zu bytes (tag 0x%llx) to rank %d", rank_, bytes,
             (unsigned long long)tag, peer);
    if (peer < 0 || peer >= nranks_) return fail(vcclInvalidArgument, "%s: peer out of range [0, %d)", what, nranks_);
    if (data == nullptr && bytes > 0) return fail(vcclInvalidArgument, "%s: NULL buffer", what);
    VMPI_RETURN_IF_ERROR(check_int_size(bytes + kHeaderBytes, what));
    auto buf = std::make_unique<std::vector<uint8_t>>(kHeaderBytes + bytes);
    for (size_t i = 0; i < kHeaderBytes; ++i) (*buf)[i] = uint8_t(tag >> (8 * i));
    if (bytes > 0) memcpy(buf->data() + kHeaderBytes, data, bytes);
    MPI_Request req;
    int rc;
    {
        MpiLock lock;
        rc = MPI_Isend(buf->data(), int(buf->size()), MPI_BYTE, peer, kP2pMpiTag, comm_, &req);
    }
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Isend", what);
    return wait(&req, &buf, deadline, true, what);
}

vcclResult_t MpiBootstrap::recv(int peer, uint64_t tag, void* data, size_t bytes, const Deadline& deadline) {
    char what[160];
    snprintf(what, sizeof(what), "MPI bootstrap rank %d: waiting for %zu bytes (tag 0x%llx) from rank %d", rank_, bytes,
             (unsigned long long)tag, peer);
    if (peer < 0 || peer >= nranks_) return fail(vcclInvalidArgument, "%s: peer out of range [0, %d)", what, nranks_);
    if (data == nullptr && bytes > 0) return fail(vcclInvalidArgument, "%s: NULL buffer", what);
    Backoff backoff;
    for (;;) {
        std::vector<uint8_t> payload;
        bool have = false;
        {
            std::lock_guard<std::mutex> lock(stash_mutex_);
            auto it = stash_.find({peer, tag});
            if (it != stash_.end() && !it->second.empty()) {
                payload = std::move(it->second.front());
                it->second.pop_front();
                if (it->second.empty()) stash_.erase(it);
                have = true;
            }
        }
        if (!have) {
            // Matched probe + receive: another thread cannot steal the message between the two calls.
            int flag = 0, count = 0, rc;
            MPI_Message msg;
            MPI_Status status;
            std::vector<uint8_t> raw;
            {
                MpiLock lock;
                rc = MPI_Improbe(peer, kP2pMpiTag, comm_, &flag, &msg, &status);
                if (rc == MPI_SUCCESS && flag) {
                    MPI_Get_count(&status, MPI_BYTE, &count);
                    raw.resize(size_t(count));
                    rc = MPI_Mrecv(raw.data(), count, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
                }
            }
            if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Improbe/MPI_Mrecv", what);
            if (flag) {
                if (raw.size() < kHeaderBytes) {
                    return fail(vcclInternalError, "%s: a %zu-byte message without a header arrived", what, raw.size());
                }
                uint64_t got_tag = 0;
                for (size_t i = 0; i < kHeaderBytes; ++i) got_tag |= uint64_t(raw[i]) << (8 * i);
                std::vector<uint8_t> body(raw.begin() + kHeaderBytes, raw.end());
                if (got_tag == tag) {
                    payload = std::move(body);
                    have = true;
                } else {
                    std::lock_guard<std::mutex> lock(stash_mutex_);
                    stash_[{peer, got_tag}].push_back(std::move(body));
                    continue; // look again at once: more may be queued
                }
            }
        }
        if (have) {
            if (payload.size() != bytes) {
                return fail(vcclInternalError, "%s: the message has %zu bytes", what, payload.size());
            }
            if (bytes > 0) memcpy(data, payload.data(), bytes);
            return vcclSuccess;
        }
        if (stopped(deadline)) return fail(vcclRemoteError, "%s: bootstrap aborted", what);
        if (deadline.expired()) {
            return fail(vcclTimeout, "%s: timed out after %lld s (VCCL_BOOTSTRAP_TIMEOUT)", what, deadline.timeout_s());
        }
        backoff.pause();
    }
}

/* The collectives run on a private copy so that, if they time out, MPI never writes into the caller's
 * buffer later (a nonblocking collective cannot be cancelled or freed). They are not cancellable by the
 * caller's scope (as before): only abort ends them early. */
vcclResult_t MpiBootstrap::allgather(void* data, size_t bytes, const Deadline& deadline) {
    char what[128];
    snprintf(what, sizeof(what), "MPI bootstrap rank %d: allgather of %zu bytes per rank", rank_, bytes);
    if (data == nullptr && bytes > 0) return fail(vcclInvalidArgument, "%s: NULL buffer", what);
    VMPI_RETURN_IF_ERROR(check_int_size(bytes * size_t(nranks_), what));
    if (aborted_.load(std::memory_order_acquire)) return fail(vcclRemoteError, "%s: bootstrap aborted", what);
    auto buf = std::make_unique<std::vector<uint8_t>>(bytes * size_t(nranks_));
    if (bytes > 0) memcpy(buf->data(), data, buf->size());
    MPI_Request req;
    int rc;
    {
        MpiLock lock;
        rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf->data(), int(bytes), MPI_BYTE, comm_, &req);
    }
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Iallgather", what);
    VMPI_RETURN_IF_ERROR(wait(&req, &buf, deadline, false, what));
    if (bytes > 0) memcpy(data, buf->data(), buf->size());
    return vcclSuccess;
}

vcclResult_t MpiBootstrap::broadcast(void* data, size_t bytes, int root, const Deadline& deadline) {
    char what[128];
    snprintf(what, sizeof(what), "MPI bootstrap rank %d: broadcast of %zu bytes from rank %d", rank_, bytes, root);
    if (root < 0 || root >= nranks_) return fail(vcclInvalidArgument, "%s: root out of range [0, %d)", what, nranks_);
    if (data == nullptr && bytes > 0) return fail(vcclInvalidArgument, "%s: NULL buffer", what);
    VMPI_RETURN_IF_ERROR(check_int_size(bytes, what));
    if (aborted_.load(std::memory_order_acquire)) return fail(vcclRemoteError, "%s: bootstrap aborted", what);
    auto buf = std::make_unique<std::vector<uint8_t>>(bytes);
    if (bytes > 0 && rank_ == root) memcpy(buf->data(), data, bytes);
    MPI_Request req;
    int rc;
    {
        MpiLock lock;
        rc = MPI_Ibcast(buf->data(), int(bytes), MPI_BYTE, root, comm_, &req);
    }
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Ibcast", what);
    VMPI_RETURN_IF_ERROR(wait(&req, &buf, deadline, false, what));
    if (bytes > 0) memcpy(data, buf->data(), bytes);
    return vcclSuccess;
}

vcclResult_t MpiBootstrap::barrier(const Deadline& deadline) {
    char what[96];
    snprintf(what, sizeof(what), "MPI bootstrap rank %d: barrier", rank_);
    if (aborted_.load(std::memory_order_acquire)) return fail(vcclRemoteError, "%s: bootstrap aborted", what);
    MPI_Request req;
    int rc;
    {
        MpiLock lock;
        rc = MPI_Ibarrier(comm_, &req);
    }
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Ibarrier", what);
    return wait(&req, nullptr, deadline, false, what);
}

vcclResult_t MpiBootstrap::split(const int* members, int nmembers, int new_rank, uint64_t split_id,
                                 vcclBootstrap_t* out) {
    // MPI tags of concurrent MPI_Comm_create_group calls must differ; derive one from split_id, away from
    // the point-to-point tag, within the 15 bits every MPI guarantees.
    uint64_t h = split_id * 0x9e3779b97f4a7c15ull;
    const int tag = 0x1000 + int((h >> 40) % 0x6000);
    MPI_Group parent_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
    MPI_Comm child = MPI_COMM_NULL;
    int rc;
    {
        MpiLock lock;
        rc = MPI_Comm_group(comm_, &parent_group);
        if (rc == MPI_SUCCESS) rc = MPI_Group_incl(parent_group, nmembers, members, &group);
        if (rc == MPI_SUCCESS) rc = MPI_Comm_create_group(comm_, group, tag, &child);
        if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
        if (parent_group != MPI_GROUP_NULL) MPI_Group_free(&parent_group);
    }
    if (rc != MPI_SUCCESS || child == MPI_COMM_NULL) return mpi_error(rc, "MPI_Comm_create_group", "MPI bootstrap split");
    auto* result = new MpiBootstrap(child);
    if (result->rank() != new_rank) {
        int got = result->rank();
        delete result;
        return fail(vcclInternalError, "MPI bootstrap split: MPI placed this process at rank %d, expected %d", got, new_rank);
    }
    result->fill(out);
    return vcclSuccess;
}

MpiBootstrap* self(void* ctx) { return static_cast<MpiBootstrap*>(ctx); }

void MpiBootstrap::fill(vcclBootstrap_t* ops) {
    memset(ops, 0, sizeof(*ops));
    ops->version = VCCL_BOOTSTRAP_VERSION;
    ops->rank = rank_;
    ops->nranks = nranks_;
    ops->ctx = this;
    ops->send = [](void* ctx, int peer, uint64_t tag, const void* data, size_t bytes, const vcclBootstrapWait_t* w) {
        return self(ctx)->send(peer, tag, data, bytes, Deadline(w));
    };
    ops->recv = [](void* ctx, int peer, uint64_t tag, void* data, size_t bytes, const vcclBootstrapWait_t* w) {
        return self(ctx)->recv(peer, tag, data, bytes, Deadline(w));
    };
    ops->allgather = [](void* ctx, void* data, size_t bytes, const vcclBootstrapWait_t* w) {
        return self(ctx)->allgather(data, bytes, Deadline(w));
    };
    ops->broadcast = [](void* ctx, void* data, size_t bytes, int root, const vcclBootstrapWait_t* w) {
        return self(ctx)->broadcast(data, bytes, root, Deadline(w));
    };
    ops->barrier = [](void* ctx, const vcclBootstrapWait_t* w) { return self(ctx)->barrier(Deadline(w)); };
    ops->split = [](void* ctx, const int* members, int nmembers, int new_rank, uint64_t split_id, vcclBootstrap_t* out) {
        return self(ctx)->split(members, nmembers, new_rank, split_id, out);
    };
    ops->abort = [](void* ctx) { self(ctx)->abort(); };
    ops->destroy = [](void* ctx) { delete self(ctx); };
    ops->lastError = [](void*) { return static_cast<const char*>(t_last_error); };
}

} // namespace

vcclResult_t mpi_bootstrap_create(MPI_Comm comm, vcclBootstrap_t* out) {
    if (!mpi_usable()) return fail(vcclInvalidUsage, "MPI bootstrap: MPI is not initialized or already finalized");
    if (comm == MPI_COMM_NULL) return fail(vcclInvalidArgument, "MPI bootstrap: communicator is MPI_COMM_NULL");
    MPI_Comm dup = MPI_COMM_NULL;
    int rc;
    {
        // A duplicate keeps vccl's messages apart from the application's and survives the user freeing comm.
        MpiLock lock;
        rc = MPI_Comm_dup(comm, &dup);
    }
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Comm_dup", "MPI bootstrap");
    (new MpiBootstrap(dup))->fill(out);
    return vcclSuccess;
}

const char* last_error() { return t_last_error; }

} // namespace vccl_mpi

/* SPDX-License-Identifier: BSD-3-Clause */
#include "bootstrap/external_bootstrap.h"

#include <atomic>
#include <string>

#include "core/log.h"
#include "core/status.h"

namespace vccl {

namespace {

class ExternalBootstrap final : public Bootstrap {
public:
    explicit ExternalBootstrap(const vcclBootstrap_t& ops) : ops_(ops) {}
    ~ExternalBootstrap() override {
        if (ops_.destroy != nullptr) ops_.destroy(ops_.ctx);
    }

    int rank() const override { return ops_.rank; }
    int nranks() const override { return ops_.nranks; }

    vcclResult_t send(int peer, uint64_t tag, const void* data, size_t bytes) override {
        return send_cancellable(peer, tag, data, bytes, nullptr);
    }
    vcclResult_t recv(int peer, uint64_t tag, void* data, size_t bytes) override {
        return recv_cancellable(peer, tag, data, bytes, nullptr);
    }
    vcclResult_t send_cancellable(int peer, uint64_t tag, const void* data, size_t bytes,
                                  const CancelScope* cancel) override {
        Wait w(this, cancel);
        return outcome(ops_.send(ops_.ctx, peer, tag, data, bytes, &w.wait), "send");
    }
    vcclResult_t recv_cancellable(int peer, uint64_t tag, void* data, size_t bytes, const CancelScope* cancel) override {
        Wait w(this, cancel);
        return outcome(ops_.recv(ops_.ctx, peer, tag, data, bytes, &w.wait), "receive");
    }
    vcclResult_t allgather(void* data, size_t bytes) override {
        if (ops_.allgather == nullptr) return Bootstrap::allgather(data, bytes);
        Wait w(this, nullptr);
        return outcome(ops_.allgather(ops_.ctx, data, bytes, &w.wait), "allgather");
    }
    vcclResult_t broadcast(void* data, size_t bytes, int root) override {
        if (ops_.broadcast == nullptr) return Bootstrap::broadcast(data, bytes, root);
        Wait w(this, nullptr);
        return outcome(ops_.broadcast(ops_.ctx, data, bytes, root, &w.wait), "broadcast");
    }
    vcclResult_t barrier() override {
        if (ops_.barrier == nullptr) return Bootstrap::barrier();
        Wait w(this, nullptr);
        return outcome(ops_.barrier(ops_.ctx, &w.wait), "barrier");
    }
    vcclResult_t split(const std::vector<int>& members, int new_rank, uint64_t split_id,
                       std::shared_ptr<Bootstrap>* out) override;
    void abort() override {
        aborted_.store(true, std::memory_order_release);
        if (ops_.abort != nullptr) ops_.abort(ops_.ctx);
    }

private:
    /* The wait of one call: the bootstrap timeout, and the abort flags of this bootstrap and of the caller. */
    struct Wait {
        Wait(ExternalBootstrap* self, const CancelScope* cancel) : scope{&self->aborted_, cancel} {
            wait.timeoutMs = (long long)bootstrap_timeout_s() * 1000;
            wait.cancelled = [](void* arg) { return CancelScope::cancelled(static_cast<CancelScope*>(arg)) ? 1 : 0; };
            wait.cancelArg = &scope;
        }
        CancelScope scope;
        vcclBootstrapWait_t wait;
    };
    /* A failure of the bootstrap's function is logged and recorded with the bootstrap's own description. */
    vcclResult_t outcome(vcclResult_t r, const char* what) const {
        if (r == vcclSuccess) return r;
        const char* text = ops_.lastError != nullptr ? ops_.lastError(ops_.ctx) : nullptr;
        if (text == nullptr || text[0] == '\0') text = vcclGetErrorString(r);
        if (r != vcclRemoteError) VCCL_WARN(kLogBootstrap, "external bootstrap %s: %s", what, text);
        return set_last_error(r, "%s", text);
    }

    vcclBootstrap_t ops_;
    std::atomic<bool> aborted_{false};
};

vcclResult_t check_ops(const vcclBootstrap_t* ops, const char* who) {
    if (ops->version != VCCL_BOOTSTRAP_VERSION) {
        return set_last_error(vcclInvalidArgument, "%s: bootstrap version %d, this library takes %d", who, ops->version,
                              VCCL_BOOTSTRAP_VERSION);
    }
    if (ops->nranks < 1 || ops->rank < 0 || ops->rank >= ops->nranks) {
        return set_last_error(vcclInvalidArgument, "%s: rank %d of %d ranks", who, ops->rank, ops->nranks);
    }
    if (ops->send == nullptr || ops->recv == nullptr) {
        return set_last_error(vcclInvalidArgument, "%s: the bootstrap has no send or no recv function", who);
    }
    return vcclSuccess;
}

vcclResult_t ExternalBootstrap::split(const std::vector<int>& members, int new_rank, uint64_t split_id,
                                      std::shared_ptr<Bootstrap>* out) {
    if (ops_.split == nullptr) return Bootstrap::split(members, new_rank, split_id, out);
    if (out == nullptr) return set_last_error(vcclInvalidArgument, "external bootstrap split: NULL output pointer");
    std::shared_ptr<Bootstrap> self = weak_from_this().lock();
    if (!self) return set_last_error(vcclInvalidUsage, "external bootstrap split: not owned by a std::shared_ptr");
    // A barrier among exactly the members, routed and bounded, so that the bootstrap's own split (MPI's
    // MPI_Comm_create_group cannot time out) starts only once every member is there. It checks the arguments too.
    std::shared_ptr<Bootstrap> routed = make_subset_bootstrap(std::move(self), members, new_rank, split_id);
    if (!routed) return vcclInvalidArgument;
    VCCL_RETURN_IF_ERROR(routed->barrier());
    vcclBootstrap_t child{};
    VCCL_RETURN_IF_ERROR(
        outcome(ops_.split(ops_.ctx, members.data(), int(members.size()), new_rank, split_id, &child), "split"));
    VCCL_RETURN_IF_ERROR(external_bootstrap_create(&child, out));
    if ((*out)->rank() != new_rank || (*out)->nranks() != int(members.size())) {
        int got = (*out)->rank(), size = (*out)->nranks();
        out->reset();
        return set_last_error(vcclInternalError, "external bootstrap split: the new bootstrap has rank %d of %d, "
                              "expected %d of %zu", got, size, new_rank, members.size());
    }
    return vcclSuccess;
}

} // namespace

vcclResult_t external_bootstrap_create(const vcclBootstrap_t* ops, std::shared_ptr<Bootstrap>* out) {
    vcclResult_t r = check_ops(ops, "vcclCommInitBootstrap");
    if (r != vcclSuccess) {
        if (ops->version == VCCL_BOOTSTRAP_VERSION && ops->destroy != nullptr) ops->destroy(ops->ctx);
        return r;
    }
    *out = std::make_shared<ExternalBootstrap>(*ops);
    return vcclSuccess;
}

} // namespace vccl

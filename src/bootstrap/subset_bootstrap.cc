/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SubsetBootstrap: the bootstrap of a split communicator, routed over its parent's connections.
 *
 * Tag scheme. A subset message with tag t in split s travels over the parent with tag
 *     kBootstrapSubsetTagBit | (mix64(mix64(s) ^ t) >> 1)
 * mix64 is the SplitMix64 finaliser, a bijection with full avalanche, so for a fixed split the map from t is
 * (up to the dropped top bit) one-to-one, and two splits see unrelated tag sequences. Bit 63 is never set
 * by the parent's own callers (bootstrap.h reserves it), so subset traffic cannot match parent traffic.
 * Nested splits apply the map again: the inner split's parent is itself a subset, so each level hashes the
 * tag produced by the level below, and sibling splits at any depth differ by their split ids.
 *
 * A hash can collide, however unlikely (2^-63 per pair of tags). So every message also carries an
 * envelope {split_id, tag} in front of its payload and the receiver checks it: a collision is reported as
 * vcclInternalError instead of silently delivering another split's data.
 *
 * Thread safety: the object is immutable apart from its abort flag, and the parent is thread safe.
 */
#include <cstring>
#include <string>
#include <unordered_set>

#include "bootstrap/bootstrap.h"
#include "core/log.h"
#include "core/status.h"

namespace vccl {

namespace {

uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

constexpr size_t kEnvelopeBytes = 16;

void put_u64(uint8_t* p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint64_t get_u64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
    return v;
}

class SubsetBootstrap final : public Bootstrap {
public:
    SubsetBootstrap(std::shared_ptr<Bootstrap> parent, std::vector<int> members, int rank, uint64_t split_id)
        : parent_(std::move(parent)), members_(std::move(members)), rank_(rank), split_id_(split_id),
          split_key_(mix64(split_id)) {}

    int rank() const override { return rank_; }
    int nranks() const override { return int(members_.size()); }

    vcclResult_t send(int peer, uint64_t tag, const void* data, size_t bytes) override {
        return send_cancellable(peer, tag, data, bytes, nullptr);
    }
    vcclResult_t recv(int peer, uint64_t tag, void* data, size_t bytes) override {
        return recv_cancellable(peer, tag, data, bytes, nullptr);
    }

    vcclResult_t send_cancellable(int peer, uint64_t tag, const void* data, size_t bytes,
                                  const CancelScope* cancel) override {
        VCCL_RETURN_IF_ERROR(check_peer(peer, "send to"));
        if (data == nullptr && bytes > 0) {
            return set_last_error(vcclInvalidArgument, "subset bootstrap send: NULL buffer for %zu bytes", bytes);
        }
        if (aborted_.load(std::memory_order_acquire)) return aborted_error("send to", peer, tag);
        std::vector<uint8_t> wire(kEnvelopeBytes + bytes);
        put_u64(wire.data(), split_id_);
        put_u64(wire.data() + 8, tag);
        if (bytes > 0) memcpy(wire.data() + kEnvelopeBytes, data, bytes);
        CancelScope scope{&aborted_, cancel};
        vcclResult_t res = parent_->send_cancellable(members_[peer], parent_tag(tag), wire.data(), wire.size(), &scope);
        if (res != vcclSuccess) add_context(res, "send to", peer, tag);
        return res;
    }

    vcclResult_t recv_cancellable(int peer, uint64_t tag, void* data, size_t bytes,
                                  const CancelScope* cancel) override {
        VCCL_RETURN_IF_ERROR(check_peer(peer, "receive from"));
        if (data == nullptr && bytes > 0) {
            return set_last_error(vcclInvalidArgument, "subset bootstrap recv: NULL buffer for %zu bytes", bytes);
        }
        if (aborted_.load(std::memory_order_acquire)) return aborted_error("receive from", peer, tag);
        std::vector<uint8_t> wire(kEnvelopeBytes + bytes);
        CancelScope scope{&aborted_, cancel};
        vcclResult_t res = parent_->recv_cancellable(members_[peer], parent_tag(tag), wire.data(), wire.size(), &scope);
        if (res != vcclSuccess) {
            add_context(res, "receive from", peer, tag);
            return res;
        }
        const uint64_t got_split = get_u64(wire.data()), got_tag = get_u64(wire.data() + 8);
        if (got_split != split_id_ || got_tag != tag) {
            VCCL_WARN(kLogBootstrap, "subset bootstrap: tag collision, expected split 0x%llx tag 0x%llx, got split 0x%llx tag 0x%llx",
                      (unsigned long long)split_id_, (unsigned long long)tag, (unsigned long long)got_split,
                      (unsigned long long)got_tag);
            return set_last_error(vcclInternalError,
                                  "subset bootstrap (split 0x%llx) rank %d: message from rank %d for tag 0x%llx belongs "
                                  "to split 0x%llx tag 0x%llx (hashed tag collision)",
                                  (unsigned long long)split_id_, rank_, peer, (unsigned long long)tag,
                                  (unsigned long long)got_split, (unsigned long long)got_tag);
        }
        if (bytes > 0) memcpy(data, wire.data() + kEnvelopeBytes, bytes);
        return vcclSuccess;
    }

    /* Only this subset's waits are cancelled: the parent (and siblings sharing it) keep working. */
    void abort() override { aborted_.store(true, std::memory_order_release); }

private:
    uint64_t parent_tag(uint64_t tag) const { return kBootstrapSubsetTagBit | (mix64(split_key_ ^ tag) >> 1); }

    vcclResult_t check_peer(int peer, const char* what) const {
        if (peer < 0 || peer >= nranks()) {
            return set_last_error(vcclInvalidArgument, "subset bootstrap (split 0x%llx) rank %d: %s peer %d out of range [0, %d)",
                                  (unsigned long long)split_id_, rank_, what, peer, nranks());
        }
        return vcclSuccess;
    }

    vcclResult_t aborted_error(const char* what, int peer, uint64_t tag) const {
        return set_last_error(vcclRemoteError, "subset bootstrap (split 0x%llx) rank %d: aborted, cannot %s rank %d (tag 0x%llx)",
                              (unsigned long long)split_id_, rank_, what, peer, (unsigned long long)tag);
    }

    /* The parent's message names parent ranks and hashed tags; say which subset call it was. */
    void add_context(vcclResult_t res, const char* what, int peer, uint64_t tag) const {
        std::string inner = last_error_message();
        set_last_error(res, "%s (in subset bootstrap split 0x%llx: rank %d, %s rank %d = parent rank %d, tag 0x%llx)",
                       inner.c_str(), (unsigned long long)split_id_, rank_, what, peer, members_[peer],
                       (unsigned long long)tag);
    }

    const std::shared_ptr<Bootstrap> parent_;
    const std::vector<int> members_; // subset rank -> parent rank
    const int rank_;
    const uint64_t split_id_;
    const uint64_t split_key_;
    std::atomic<bool> aborted_{false};
};

} // namespace

std::shared_ptr<Bootstrap> make_subset_bootstrap(std::shared_ptr<Bootstrap> parent, const std::vector<int>& members,
                                                 int new_rank, uint64_t split_id) {
    if (!parent) {
        set_last_error(vcclInvalidArgument, "subset bootstrap: no parent bootstrap");
        return nullptr;
    }
    const int pn = parent->nranks();
    if (members.empty() || members.size() > size_t(pn)) {
        set_last_error(vcclInvalidArgument, "subset bootstrap: %zu members for a parent of %d ranks", members.size(), pn);
        return nullptr;
    }
    std::unordered_set<int> seen;
    for (int m : members) {
        if (m < 0 || m >= pn) {
            set_last_error(vcclInvalidArgument, "subset bootstrap: member %d out of the parent's range [0, %d)", m, pn);
            return nullptr;
        }
        if (!seen.insert(m).second) {
            set_last_error(vcclInvalidArgument, "subset bootstrap: parent rank %d listed twice in members", m);
            return nullptr;
        }
    }
    if (new_rank < 0 || size_t(new_rank) >= members.size() || members[new_rank] != parent->rank()) {
        set_last_error(vcclInvalidArgument,
                       "subset bootstrap: new rank %d does not name the caller (parent rank %d) in the %zu members",
                       new_rank, parent->rank(), members.size());
        return nullptr;
    }
    return std::make_shared<SubsetBootstrap>(std::move(parent), members, new_rank, split_id);
}

} // namespace vccl

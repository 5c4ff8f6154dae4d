/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CollCtx: tagged messages, waits and local compute for one collective on one rank.
 *
 * All messages of one collective carry the same tag; the transport matches messages with equal (sender,
 * tag) in posting order, which is what lets an algorithm post many chunks to one peer without numbering
 * them. Waits spin on test()+progress() and give up on abort or when the operation deadline passes.
 */
#include "algo/host/coll_ctx.h"

#include <cstring>

#include "core/dtype.h"
#include "core/log.h"
#include "core/reduce.h"
#include "core/status.h"

namespace vccl {

CollCtx::CollCtx(Transport* transport, int rank, int nranks, uint64_t tag_base, vcclDataType_t dtype,
                 vcclRedOp_t op, const CollSettings& settings, const std::atomic<bool>* abort_flag,
                 ScratchArena* scratch)
    : transport_(transport),
      rank_(rank),
      nranks_(nranks),
      base_rank_(rank),
      base_nranks_(nranks),
      tag_(tag_base & kTagMask),
      dtype_(dtype),
      op_(op),
      type_size_(dtype_size(dtype)),
      settings_(settings),
      abort_flag_(abort_flag),
      scratch_(scratch) {
    if (type_size_ == 0) type_size_ = 1; // byte-oriented callers (none today) still get a sane unit
    scratch_->reset();
}

CollCtx::~CollCtx() {
    // Pending requests exist only after a failure (or an algorithm that forgot to wait); their buffers
    // belong to the caller, so they must be cancelled before this call returns.
    for (TransportRequest* req : reqs_) {
        if (req != nullptr) transport_->release(req);
    }
}

size_t CollCtx::chunk_elems() const {
    size_t n = settings_.chunk_bytes / type_size_;
    return n == 0 ? 1 : n;
}

vcclResult_t CollCtx::fail(vcclResult_t status) {
    if (error_ == vcclSuccess) error_ = status;
    return status;
}

vcclResult_t CollCtx::post_check(vcclResult_t status, TransportRequest* req, ReqId* id) {
    if (status != vcclSuccess) {
        if (req != nullptr) transport_->release(req);
        return fail(status); // the transport described the failure
    }
    if (id != nullptr) *id = ReqId(reqs_.size() - 1);
    reqs_.back() = req;
    return vcclSuccess;
}

vcclResult_t CollCtx::isend(int peer, const void* buf, size_t bytes, ReqId* id) {
    if (error_ != vcclSuccess) return error_;
    TransportRequest* req = nullptr;
    if (members_ != nullptr) peer = members_[peer];
    reqs_.push_back(nullptr);
    info_.push_back(ReqInfo{peer, bytes, true});
    vcclResult_t st = transport_->isend(peer, tag_, buf, bytes, settings_.mem, /*sync=*/false, &req);
    return post_check(st, req, id);
}

vcclResult_t CollCtx::irecv(int peer, void* buf, size_t bytes, ReqId* id) {
    if (error_ != vcclSuccess) return error_;
    TransportRequest* req = nullptr;
    if (members_ != nullptr) peer = members_[peer];
    reqs_.push_back(nullptr);
    info_.push_back(ReqInfo{peer, bytes, false});
    vcclResult_t st = transport_->irecv(peer, tag_, buf, bytes, settings_.mem, &req);
    return post_check(st, req, id);
}

vcclResult_t CollCtx::wait(ReqId id) {
    if (id < 0 || size_t(id) >= reqs_.size()) {
        return fail(set_last_error(vcclInternalError, "collective waited on unknown request %d", id));
    }
    TransportRequest* req = reqs_[size_t(id)];
    if (req == nullptr) return error_; // completed earlier (or never posted because of an earlier error)
    for (unsigned spins = 1;; ++spins) {
        vcclResult_t st = transport_->test(req);
        if (st != vcclInProgress) {
            transport_->release(req);
            reqs_[size_t(id)] = nullptr;
            if (st != vcclSuccess) return fail(st); // the transport described the failure
            return vcclSuccess;
        }
        if (abort_flag_ != nullptr && abort_flag_->load(std::memory_order_acquire)) {
            return fail(set_last_error(vcclRemoteError, "communicator aborted or revoked"));
        }
        if (spins % kDeadlineSpins == 0 && deadline_passed()) {
            const ReqInfo& info = info_[size_t(id)];
            return fail(set_last_error(vcclTimeout,
                                       "collective timed out after %lld ms: %s of %zu bytes %s rank %d did "
                                       "not complete (rank %d of %d)",
                                       (long long)settings_.op_timeout_ms, info.is_send ? "send" : "receive",
                                       info.bytes, info.is_send ? "to" : "from", info.peer, base_rank_, base_nranks_));
        }
        transport_->progress();
    }
}

bool CollCtx::deadline_passed() {
    if (deadline_armed_) return deadline_.expired();
    deadline_ = Deadline::after_ms(settings_.op_timeout_ms);
    deadline_armed_ = true;
    return false;
}

vcclResult_t CollCtx::wait_all() {
    for (size_t i = first_pending_; i < reqs_.size(); ++i) {
        VCCL_RETURN_IF_ERROR(wait(ReqId(i)));
    }
    first_pending_ = reqs_.size();
    return error_;
}

vcclResult_t CollCtx::sendrecv(int send_peer, const void* sendbuf, size_t send_bytes, int recv_peer,
                               void* recvbuf, size_t recv_bytes) {
    ReqId s, r;
    // Receive first: a transport may deliver an eager message straight into a posted buffer.
    VCCL_RETURN_IF_ERROR(irecv(recv_peer, recvbuf, recv_bytes, &r));
    VCCL_RETURN_IF_ERROR(isend(send_peer, sendbuf, send_bytes, &s));
    VCCL_RETURN_IF_ERROR(wait(r));
    return wait(s);
}

CollSubgroup::CollSubgroup(CollCtx& ctx, const std::vector<int>& members, vcclRedOp_t op)
    : ctx_(ctx), rank_(ctx.rank_), nranks_(ctx.nranks_), members_(ctx.members_), hosts_(ctx.hosts_), op_(ctx.op_) {
    int me = -1;
    for (size_t i = 0; i < members.size(); ++i) {
        if (members[i] == ctx.base_rank_) me = int(i);
    }
    ctx.rank_ = me;
    ctx.nranks_ = int(members.size());
    ctx.members_ = members.data();
    ctx.hosts_ = nullptr;
    ctx.op_ = op;
    if (me < 0) ctx.fail(set_last_error(vcclInternalError, "rank %d is not in its own subgroup", ctx.base_rank_));
}

CollSubgroup::~CollSubgroup() {
    ctx_.rank_ = rank_;
    ctx_.nranks_ = nranks_;
    ctx_.members_ = members_;
    ctx_.hosts_ = hosts_;
    ctx_.op_ = op_;
}

void CollCtx::reduce(void* dst, const void* a, const void* b, size_t count) {
    if (count == 0) return;
    switch (settings_.mem) {
    case MemType::Host: reduce_host(dst, a, b, count, dtype_, op_); return;
    case MemType::Cuda: break; // the device reduction kernels (src/device) slot in here
    }
    fail(set_last_error(vcclInternalError, "reduction on device memory is not available in this build"));
}

void CollCtx::finish_avg(void* buf, size_t count) {
    if (op_ != vcclAvg || count == 0) return;
    switch (settings_.mem) {
    case MemType::Host: scale_avg_host(buf, count, dtype_, nranks_); return;
    case MemType::Cuda: break; // device scaling kernel slots in here
    }
    fail(set_last_error(vcclInternalError, "average on device memory is not available in this build"));
}

void CollCtx::copy(void* dst, const void* src, size_t bytes) {
    if (bytes == 0 || dst == src) return;
    switch (settings_.mem) {
    case MemType::Host: memmove(dst, src, bytes); return;
    case MemType::Cuda: break; // cudaMemcpyAsync on the collective's stream slots in here
    }
    fail(set_last_error(vcclInternalError, "copy on device memory is not available in this build"));
}

} // namespace vccl

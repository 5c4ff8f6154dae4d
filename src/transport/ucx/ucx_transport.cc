/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX transport: one UCP context and worker per communicator, one endpoint per peer, tagged messages.
 * The UCX tag carries the sender's rank in its top 20 bits so a receive names its peer; UCX matches
 * messages from one endpoint in order, which gives the "equal (sender, tag) match in order" contract.
 *
 * Requests are ours (TransportRequest), filled by UCX callbacks. A request released while UCX still owns
 * it is orphaned: the callback frees it when UCX completes or cancels it, so no callback ever touches
 * freed memory.
 */
#include <sched.h>
#include <ucp/api/ucp.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/log.h"
#include "core/status.h"
#include "telemetry/telemetry.h"
#include "transport/transport.h"

namespace vccl {

constexpr int kRankShift = kTagBits; // 44 bits of caller tag, 20 bits of rank
constexpr int kMaxRanks = 1 << (64 - kTagBits);

struct UcxRequest final : TransportRequest {
    enum State { kPending, kDone, kFailed };
    State state = kPending;
    bool orphaned = false; // released by the caller while UCX still owned it
    bool is_recv = false;
    bool upto = false;     // a shorter message also matches (irecv_upto)
    size_t received = 0;   // length of the matched message
    int peer = -1;
    size_t bytes = 0;
    ucs_status_t status = UCS_OK;
    void* ucx_req = nullptr; // UCX's request handle while pending
    int* orphan_count = nullptr; // the owning transport's count of orphaned requests
    telemetry::Telemetry* telemetry = nullptr; // records the completion when set
    telemetry::Telemetry::PathW* telemetry_path = nullptr; // with `telemetry`: the peer's path 0
    uint64_t post_ns = 0;
    TransferTag tag;
};

namespace {

class UcxTransport;

/* Telemetry of a request that has just ended (path 0: one endpoint per peer until failover adds a second). */
void record_end(UcxRequest* req, bool ok) {
    if (req->telemetry == nullptr) return;
    req->telemetry->on_complete(req->telemetry_path, req->is_recv ? telemetry::Dir::Recv : telemetry::Dir::Send,
                                req->bytes, req->post_ns, req->tag, ok);
}

void finish(UcxRequest* req, ucs_status_t status, void* ucx_req) {
    record_end(req, status == UCS_OK);
    req->status = status;
    req->state = status == UCS_OK ? UcxRequest::kDone : UcxRequest::kFailed;
    if (ucx_req != nullptr) ucp_request_free(ucx_req);
    req->ucx_req = nullptr;
    if (req->orphaned) {
        --*req->orphan_count;
        delete req;
    }
}

void send_cb(void* ucx_req, ucs_status_t status, void* user_data) {
    finish(static_cast<UcxRequest*>(user_data), status, ucx_req);
}

void recv_cb(void* ucx_req, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
    auto* req = static_cast<UcxRequest*>(user_data);
    if (status == UCS_OK) {
        req->received = info->length;
        if (req->upto ? info->length > req->bytes : info->length != req->bytes) status = UCS_ERR_MESSAGE_TRUNCATED;
    }
    finish(req, status, ucx_req);
}

struct Peer {
    ucp_ep_h ep = nullptr;
    ucs_status_t failure = UCS_OK; // set by the endpoint error handler
    UcxTransport* owner = nullptr;
    int rank = -1;
};

void ep_error_cb(void* arg, ucp_ep_h ep, ucs_status_t status);

class UcxTransport final : public Transport {
public:
    ~UcxTransport() override { close(Deadline::after_ms(2000)); }
    const char* name() const override { return "ucx"; }

    vcclResult_t init(Bootstrap* bootstrap, const TransportOptions& options);

    vcclResult_t isend(int peer, uint64_t tag, const void* buf, size_t bytes, MemType mem, bool sync,
                       TransportRequest** out) override {
        if (peer < 0 || peer >= nranks_) return set_last_error(vcclInternalError, "ucx: bad peer %d", peer);
        if (peers_[peer].failure != UCS_OK) return peer_failed(peer);
        auto* req = new UcxRequest();
        req->peer = peer;
        req->bytes = bytes;
        start_record(req);
        ucp_request_param_t param;
        memset(&param, 0, sizeof(param));
        param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE;
        param.cb.send = send_cb;
        param.user_data = req;
        param.datatype = ucp_dt_make_contig(1);
        ucp_tag_t utag = (ucp_tag_t(rank_) << kRankShift) | (tag & kTagMask);
        ucs_status_ptr_t sp = sync ? ucp_tag_send_sync_nbx(peers_[peer].ep, buf, bytes, utag, &param)
                                   : ucp_tag_send_nbx(peers_[peer].ep, buf, bytes, utag, &param);
        return post_result(sp, req, out);
    }

    vcclResult_t irecv(int peer, uint64_t tag, void* buf, size_t bytes, MemType mem,
                       TransportRequest** out) override {
        return post_recv(peer, tag, buf, bytes, false, out);
    }

    vcclResult_t irecv_upto(int peer, uint64_t tag, void* buf, size_t max_bytes, MemType mem,
                            TransportRequest** out) override {
        return post_recv(peer, tag, buf, max_bytes, true, out);
    }

    size_t received_bytes(TransportRequest* req) const override { return static_cast<UcxRequest*>(req)->received; }

    vcclResult_t peer_status(int peer) override {
        if (peer < 0 || peer >= nranks_ || peers_[peer].failure == UCS_OK) return vcclSuccess;
        return peer_failed(peer);
    }

    vcclResult_t reconnect(int peer) override;

    void cancel(TransportRequest* base) override {
        auto* req = static_cast<UcxRequest*>(base);
        if (req->state == UcxRequest::kPending && req->is_recv && req->ucx_req != nullptr) {
            ucp_request_cancel(worker_, req->ucx_req);
        }
    }

    void disconnect(int peer) override {
        if (peer < 0 || peer >= nranks_ || worker_ == nullptr) return;
        close_endpoint(peer);
        if (peers_[peer].failure == UCS_OK) peers_[peer].failure = UCS_ERR_CANCELED;
    }

    vcclResult_t post_recv(int peer, uint64_t tag, void* buf, size_t bytes, bool upto, TransportRequest** out) {
        if (peer < 0 || peer >= nranks_) return set_last_error(vcclInternalError, "ucx: bad peer %d", peer);
        if (peers_[peer].failure != UCS_OK) return peer_failed(peer);
        auto* req = new UcxRequest();
        req->peer = peer;
        req->bytes = bytes;
        req->upto = upto;
        req->is_recv = true;
        start_record(req);
        ucp_request_param_t param;
        memset(&param, 0, sizeof(param));
        param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE;
        param.cb.recv = recv_cb;
        param.user_data = req;
        param.datatype = ucp_dt_make_contig(1);
        // A receive that finds its message already waiting completes in place without the callback, and
        // UCX 1.13 then reports no length (checked: tag_info.length stays 0). Receives that need the length
        // therefore always complete through the callback.
        if (upto) param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        ucp_tag_t utag = (ucp_tag_t(peer) << kRankShift) | (tag & kTagMask);
        ucs_status_ptr_t sp = ucp_tag_recv_nbx(worker_, buf, bytes, utag, ~ucp_tag_t(0), &param);
        return post_result(sp, req, out);
    }

    vcclResult_t test(TransportRequest* base) override {
        auto* req = static_cast<UcxRequest*>(base);
        switch (req->state) {
        case UcxRequest::kDone: return vcclSuccess;
        case UcxRequest::kPending:
            if (peers_[req->peer].failure != UCS_OK) return peer_failed(req->peer);
            return vcclInProgress;
        case UcxRequest::kFailed: break;
        }
        if (req->status == UCS_ERR_MESSAGE_TRUNCATED) {
            return set_last_error(vcclInvalidUsage,
                                  "message from rank %d does not have the expected %zu bytes: the ranks called "
                                  "mismatched operations or counts",
                                  req->peer, req->bytes);
        }
        return set_last_error(vcclRemoteError, "transfer %s rank %d failed: %s", req->is_recv ? "from" : "to",
                              req->peer, ucs_status_string(req->status));
    }

    void progress() override {
        if (worker_ == nullptr) return;
        if (ucp_worker_progress(worker_) != 0) {
            idle_polls_ = 0;
        } else if (++idle_polls_ >= 64) {
            // Ranks often share cores (oversubscribed jobs, local tests): let a waiting peer run.
            idle_polls_ = 0;
            if (telemetry_ != nullptr) telemetry_->tick(); // a waiting transfer still shows as outstanding
            sched_yield();
        }
    }

    void pause_telemetry(bool paused) override { telemetry_ = paused ? nullptr : telemetry_owned_; }
    /* UCX's protocols owe the peer messages after a receive has completed here: the acknowledgement that ends
     * a rendezvous or synchronous send goes out in a later progress call when it cannot go at once. A rank
     * that then waits elsewhere (MPI_Barrier) left its peer's send pending until its next vccl call: a ring
     * of 64-piece messages on 3 ranks hung in MPI that way (tests/mpi/np3_p2p_pieces.sh). */
    bool wants_idle_progress() const override { return true; }

    void release(TransportRequest* base) override {
        if (base == nullptr) return;
        auto* req = static_cast<UcxRequest*>(base);
        if (req->state != UcxRequest::kPending) {
            delete req;
            return;
        }
        // UCX still owns it: let the callback free it. Receives can be cancelled now; sends complete or
        // fail when the endpoint closes.
        req->orphaned = true;
        req->orphan_count = &orphans_;
        ++orphans_;
        if (req->is_recv && req->ucx_req != nullptr) ucp_request_cancel(worker_, req->ucx_req);
    }

    vcclResult_t close(Deadline deadline) override;

    void on_ep_error(Peer* peer, ucs_status_t status) {
        peer->failure = status;
        VCCL_WARN(kLogNet, "ucx: connection to rank %d failed: %s", peer->rank, ucs_status_string(status));
    }

private:
    void start_record(UcxRequest* req) {
        if (telemetry_ == nullptr) return;
        telemetry::Telemetry::PathW* path = telemetry_paths_[size_t(req->peer)];
        if (path == nullptr) {
            if (size_t(req->peer) < unrecorded_peers_.size() && unrecorded_peers_[size_t(req->peer)]) return;
            path = telemetry_paths_[size_t(req->peer)] = telemetry_->path(req->peer, 0);
            if (path == nullptr) return;
        }
        req->telemetry = telemetry_;
        req->telemetry_path = path;
        req->tag = transfer_tag_;
        req->post_ns =
            telemetry_->on_post(path, req->is_recv ? telemetry::Dir::Recv : telemetry::Dir::Send, req->bytes, &req->tag);
    }

    vcclResult_t post_result(ucs_status_ptr_t sp, UcxRequest* req, TransportRequest** out) {
        if (sp == nullptr) { // completed in place; the callback is not called
            req->state = UcxRequest::kDone;
            record_end(req, true);
        } else if (UCS_PTR_IS_ERR(sp)) {
            ucs_status_t st = UCS_PTR_STATUS(sp);
            record_end(req, false);
            delete req;
            return set_last_error(st == UCS_ERR_NO_MEMORY ? vcclSystemError : vcclRemoteError,
                                  "ucx: posting a transfer failed: %s", ucs_status_string(st));
        } else if (req->state == UcxRequest::kPending) {
            req->ucx_req = sp; // still running
        } else {
            // The callback already ran inside the post call and freed UCX's request.
        }
        *out = req;
        return vcclSuccess;
    }

    vcclResult_t peer_failed(int peer) {
        return set_last_error(vcclRemoteError, "rank %d is unreachable: %s", peer,
                              ucs_status_string(peers_[peer].failure));
    }

    int rank_ = 0;
    int nranks_ = 0;
    ucp_context_h context_ = nullptr;
    ucp_worker_h worker_ = nullptr;
    std::vector<Peer> peers_;
    unsigned idle_polls_ = 0;
    int orphans_ = 0; // released requests UCX has not finished with yet
    std::vector<std::vector<char>> scratch_keep_; // buffers of receives given up at close (discard_unexpected)
    std::vector<void*> discards_given_up_;        // their requests: the worker is not destroyed while one is UCX's
    telemetry::Telemetry* telemetry_ = nullptr;       // NULL while paused (pause_telemetry)
    telemetry::Telemetry* telemetry_owned_ = nullptr; // the communicator's, or NULL with telemetry off
    std::vector<char> addresses_; // every rank's worker address, `address_slot_` bytes each (reconnect)
    size_t address_slot_ = 0;
    bool peer_errors_everywhere_ = false;
    std::vector<uint64_t> host_ids_;
    std::vector<bool> unrecorded_peers_;
    std::vector<telemetry::Telemetry::PathW*> telemetry_paths_; // per peer, looked up on first use

    vcclResult_t connect(int r);
    void close_endpoint(int r);
    void discard_unexpected(Deadline deadline);
};

void ep_error_cb(void* arg, ucp_ep_h ep, ucs_status_t status) {
    auto* peer = static_cast<Peer*>(arg);
    peer->owner->on_ep_error(peer, status);
}

vcclResult_t ucx_check(ucs_status_t status, const char* what) {
    if (status == UCS_OK) return vcclSuccess;
    return set_last_error(vcclSystemError, "ucx: %s failed: %s", what, ucs_status_string(status));
}

vcclResult_t UcxTransport::init(Bootstrap* bootstrap, const TransportOptions& options) {
    rank_ = bootstrap->rank();
    nranks_ = bootstrap->nranks();
    telemetry_ = telemetry_owned_ = options.telemetry;
    unrecorded_peers_ = options.unrecorded_peers;
    telemetry_paths_.assign(size_t(nranks_), nullptr);
    if (nranks_ > kMaxRanks) {
        return set_last_error(vcclInvalidArgument, "ucx transport supports at most %d ranks", kMaxRanks);
    }
    ucp_config_t* config = nullptr;
    VCCL_RETURN_IF_ERROR(ucx_check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read"));
    vcclResult_t status = vcclSuccess;
    if (!options.tls.empty()) status = ucx_check(ucp_config_modify(config, "TLS", options.tls.c_str()), "setting TLS");
    if (status == vcclSuccess && !options.net_devices.empty()) {
        status = ucx_check(ucp_config_modify(config, "NET_DEVICES", options.net_devices.c_str()), "setting NET_DEVICES");
    }
    if (status == vcclSuccess && options.nonblocking_tcp_connect && !env::ucx_variable_set("UCX_TCP_CONN_NB")) {
        // A transport key (of the tcp interface table, named without its TCP_ prefix): UCX keeps it and
        // applies it to each interface it opens whose table has it.
        status = ucx_check(ucp_config_modify(config, "CONN_NB", "y"), "setting TCP_CONN_NB");
    }
    if (status == vcclSuccess) {
        ucp_params_t params;
        memset(&params, 0, sizeof(params));
        params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
        params.features = UCP_FEATURE_TAG;
        params.mt_workers_shared = 0;
        status = ucx_check(ucp_init(&params, config, &context_), "ucp_init");
    }
    ucp_config_release(config);
    VCCL_RETURN_IF_ERROR(status);

    ucp_worker_params_t wparams;
    memset(&wparams, 0, sizeof(wparams));
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    // The communicator serialises every use of the worker (op_mutex), so UCX need not lock.
    wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    VCCL_RETURN_IF_ERROR(ucx_check(ucp_worker_create(context_, &wparams, &worker_), "ucp_worker_create"));

    ucp_address_t* address = nullptr;
    size_t address_len = 0;
    VCCL_RETURN_IF_ERROR(ucx_check(ucp_worker_get_address(worker_, &address, &address_len), "ucp_worker_get_address"));

    // Addresses differ in length; exchange the lengths first, then fixed-size slots of the longest.
    std::vector<uint64_t> lengths(nranks_);
    lengths[rank_] = address_len;
    status = bootstrap->allgather(lengths.data(), sizeof(uint64_t));
    size_t slot = 0;
    for (uint64_t len : lengths) slot = len > slot ? len : slot;
    std::vector<char> table;
    if (status == vcclSuccess) {
        table.assign(slot * nranks_, 0);
        memcpy(table.data() + slot * rank_, address, address_len);
        status = bootstrap->allgather(table.data(), slot);
    }
    ucp_worker_release_address(worker_, address);
    VCCL_RETURN_IF_ERROR(status);

    addresses_ = std::move(table);
    address_slot_ = slot;
    peer_errors_everywhere_ = options.peer_errors_everywhere;
    host_ids_ = options.host_ids;
    peers_.resize(nranks_);
    for (int r = 0; r < nranks_; ++r) {
        peers_[r].owner = this;
        peers_[r].rank = r;
        VCCL_RETURN_IF_ERROR(connect(r));
    }
    VCCL_INFO(kLogNet, "ucx: rank %d/%d connected (%s)", rank_, nranks_, ucp_get_version_string());
    return vcclSuccess;
}

vcclResult_t UcxTransport::connect(int r) {
    Peer& p = peers_[r];
    ucp_ep_params_t ep_params;
    memset(&ep_params, 0, sizeof(ep_params));
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                           UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep_params.address = reinterpret_cast<const ucp_address_t*>(addresses_.data() + address_slot_ * size_t(r));
    // Peer error handling turns a dead remote peer into an error on its requests instead of a hang.
    // On one host it would cost the shared-memory transports (UCX then prefers TCP, measured 4-5x
    // slower on large messages); there a dead peer is caught by the operation timeout instead.
    bool same_host = !host_ids_.empty() && host_ids_[size_t(r)] == host_ids_[size_t(rank_)];
    ep_params.err_mode =
        same_host && !peer_errors_everywhere_ ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
    ep_params.err_handler.cb = ep_error_cb;
    ep_params.err_handler.arg = &p;
    ucs_status_t st = ucp_ep_create(worker_, &ep_params, &p.ep);
    if (st != UCS_OK) {
        VCCL_INFO(kLogNet, "ucx: endpoint to rank %d with peer error handling failed (%s); retrying without", r,
                  ucs_status_string(st));
        ep_params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
        st = ucp_ep_create(worker_, &ep_params, &p.ep);
    }
    return ucx_check(st, "ucp_ep_create");
}

void UcxTransport::close_endpoint(int r) {
    Peer& p = peers_[r];
    if (p.ep == nullptr) return;
    // A forced close ends the endpoint's requests with errors (their callbacks run during the wait) and
    // finishes in the background if it takes long (the worker outlives it).
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t sp = ucp_ep_close_nbx(p.ep, &param);
    if (sp != nullptr && !UCS_PTR_IS_ERR(sp)) {
        Deadline deadline = Deadline::after_ms(1000);
        while (ucp_request_check_status(sp) == UCS_INPROGRESS && !deadline.expired()) ucp_worker_progress(worker_);
        if (ucp_request_check_status(sp) != UCS_INPROGRESS) ucp_request_free(sp);
        else ++orphans_; // still UCX's: keeps the worker from being destroyed at close
    }
    p.ep = nullptr;
}

vcclResult_t UcxTransport::reconnect(int r) {
    if (r < 0 || r >= nranks_ || worker_ == nullptr) return set_last_error(vcclInternalError, "ucx: bad peer %d", r);
    Peer& p = peers_[r];
    close_endpoint(r);
    p.failure = UCS_OK;
    vcclResult_t st = connect(r);
    if (st != vcclSuccess) p.failure = UCS_ERR_UNREACHABLE;
    return st;
}

/* Receives and drops the messages no receive ever matched: copies a failover path resent after a switch,
 * or sends of a peer that ended with an error. Left in the worker, each makes UCX print a warning at
 * destroy ("unexpected tag-receive descriptor ... was not matched"); with UCX 1.13 after many endpoint
 * reconnects those lines carried gigabytes of indentation and took minutes to write. Bounded: at most
 * 100,000 messages and a fifth of the time left (200 ms at most). */
void UcxTransport::discard_unexpected(Deadline deadline) {
    Deadline mine = Deadline::after_ms(std::min(deadline.remaining_ms(1000) / 5, 200));
    std::vector<char> scratch;
    for (int n = 0; n < 100000 && !mine.expired(); ++n) {
        ucp_tag_recv_info_t info;
        ucp_tag_message_h msg = ucp_tag_probe_nb(worker_, 0, 0, 1, &info);
        if (msg == nullptr) break;
        if (scratch.size() < info.length) scratch.resize(info.length);
        ucp_request_param_t param;
        memset(&param, 0, sizeof(param));
        param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
        param.datatype = ucp_dt_make_contig(1);
        ucs_status_ptr_t sp = ucp_tag_msg_recv_nbx(worker_, scratch.data(), info.length, msg, &param);
        if (sp == nullptr || UCS_PTR_IS_ERR(sp)) continue;
        while (ucp_request_check_status(sp) == UCS_INPROGRESS && !mine.expired()) ucp_worker_progress(worker_);
        if (ucp_request_check_status(sp) == UCS_INPROGRESS) {
            // Out of time (a large message from a slow or gone peer): give it up. UCX may still write into
            // `scratch` until the worker is destroyed, so the buffer lives as long as this transport. A
            // rendezvous receive may still have a copy queued on its shared-memory lane (cma): destroying the
            // worker then failed UCX 1.13's assertion `ucs_arbiter_group_is_empty` in uct_cma_ep_t_delete
            // (a rank that withheld a large collective, aborted after its peers had timed out, on a loaded
            // machine). close() waits for the request to end and otherwise leaves the worker allocated.
            ucp_request_cancel(worker_, sp);
            discards_given_up_.push_back(sp);
            scratch_keep_.push_back(std::move(scratch));
            break;
        }
        ucp_request_free(sp);
    }
}

vcclResult_t UcxTransport::close(Deadline deadline) {
    if (worker_ == nullptr) return vcclSuccess;
    // Every operation of the communicator has completed by now (or was orphaned by an error), so nothing
    // needs flushing: a completed send is in the transport's hands. A flushing close would need the peer to
    // progress its worker, and a peer may be busy elsewhere (an MPI barrier) or gone, so close forcibly.
    // A flush hands every locally completed message to the wire (TCP buffers, RDMA acks) without needing
    // the peer's software to progress; then endpoints can be closed forcibly without losing data.
    ucp_request_param_t flush_param;
    memset(&flush_param, 0, sizeof(flush_param));
    ucs_status_ptr_t flush = ucp_worker_flush_nbx(worker_, &flush_param);
    if (flush != nullptr && !UCS_PTR_IS_ERR(flush)) {
        while (ucp_request_check_status(flush) == UCS_INPROGRESS && !deadline.expired()) progress();
        if (ucp_request_check_status(flush) != UCS_INPROGRESS) {
            ucp_request_free(flush);
        } else {
            VCCL_WARN(kLogNet, "ucx: flushing outstanding messages did not finish before the deadline");
            ++orphans_; // the flush request still belongs to UCX: keep the worker alive below
        }
    }
    discard_unexpected(deadline);
    std::vector<void*> closing;
    for (Peer& p : peers_) {
        if (p.ep == nullptr) continue;
        ucp_request_param_t param;
        memset(&param, 0, sizeof(param));
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags = UCP_EP_CLOSE_FLAG_FORCE;
        ucs_status_ptr_t sp = ucp_ep_close_nbx(p.ep, &param);
        if (sp != nullptr && !UCS_PTR_IS_ERR(sp)) closing.push_back(sp);
        p.ep = nullptr;
    }
    bool timed_out = false;
    for (void* req : closing) {
        while (ucp_request_check_status(req) == UCS_INPROGRESS && !deadline.expired()) progress();
        if (ucp_request_check_status(req) == UCS_INPROGRESS) {
            timed_out = true;
        } else {
            ucp_request_free(req);
        }
    }
    // Orphaned requests end when their endpoint closes; give their callbacks a chance to run.
    while (orphans_ > 0 && !deadline.expired()) progress();
    for (void* req : discards_given_up_) {
        while (ucp_request_check_status(req) == UCS_INPROGRESS && !deadline.expired()) progress();
        if (ucp_request_check_status(req) == UCS_INPROGRESS) {
            timed_out = true;
            ++orphans_;
        } else {
            ucp_request_free(req);
        }
    }
    discards_given_up_.clear();
    if (timed_out || orphans_ > 0) {
        // Destroying a worker that still owns requests trips UCX assertions; leaking it is the safe choice
        // for a communicator that is going away after an error.
        VCCL_WARN(kLogNet, "ucx: %d request(s) still pending at close; leaving the UCX worker allocated", orphans_);
        worker_ = nullptr;
        context_ = nullptr;
        return vcclTimeout;
    }
    ucp_worker_destroy(worker_);
    worker_ = nullptr;
    ucp_cleanup(context_);
    context_ = nullptr;
    return vcclSuccess;
}

} // namespace

vcclResult_t ucx_transport_create(Bootstrap* bootstrap, const TransportOptions& options,
                                  std::unique_ptr<Transport>* out) {
    auto transport = std::make_unique<UcxTransport>();
    VCCL_RETURN_IF_ERROR(transport->init(bootstrap, options));
    *out = std::move(transport);
    return vcclSuccess;
}

} // namespace vccl

/*
 * Failover transport: a primary and a hot-standby backup path (one UCX transport each, bound to different
 * network devices) under one Transport, with no data lost when a path fails.
 *
 * Messages to a peer get consecutive ids and travel as an envelope (caller's tag, length, chunking; small
 * data inline) plus sequenced data chunks (wire.h). The receiver matches envelopes to its receives in id
 * order, with the caller's tag, so the Transport matching contract holds. A send completes only when the
 * receiver acknowledges the whole message: until then the sender can resend it.
 *
 * Detection, fastest first: netlink link events (link_monitor.h); endpoint errors of the path's UCX
 * transport; silent loss, judged per direction because a path can fail one way only: no acknowledgement of
 * an envelope (sender) or nothing at all arriving on the path while a matched message lacks chunks
 * (receiver) for VCCL_FAILOVER_TIMEOUT_MS. Only what arrives from the peer counts as a sign of life: local
 * send completions do not (TCP takes data into its buffers whether or not the wire delivers it). A timeout
 * alone does not switch: a busy peer also stops answering. The suspecting side probes the other path; only
 * a peer that answers there while the active path stays silent proves the path, not the peer, is at fault.
 * A sender also asks, in the probe, how long the peer has received nothing from it on the active path:
 * acknowledgements can queue behind the peer's own bulk data, and data still arriving means the path works.
 *
 * Recovery is receiver driven: the side that switches reposts its receives on the new path and sends a
 * RESUME naming, per unfinished incoming message, the first chunk it lacks; the peer switches too (if it
 * has not), resends from those points, and sends its own RESUME. Chunks already received that are sent
 * again land on identical bytes of a message not yet completed, so duplicates are harmless; completed
 * messages are never resent. Ids are never reused soon, so stragglers on an abandoned path match nothing.
 *
 * Failback: every VCCL_FAILBACK_INTERVAL_MS the lower rank of a pair probes the primary; after
 * kFailbackProbes answered probes in a row, and a hold time that doubles each time the primary fails
 * again (flapping), traffic moves back with the same RESUME exchange (marked kResumeFailback: the path left
 * still works and is not closed). VCCL_FAILBACK=0 (the lower rank's setting decides) stays on the backup.
 *
 * A path left because it failed is closed on both sides (the follower learns it from the RESUME): receives
 * UCX had matched there, data partly in, cannot be cancelled and end only when the path breaks, and a path
 * whose rail drops everything may never break on its own.
 *
 * All paths gone: after VCCL_PEER_TIMEOUT_MS without a usable path, the peer's requests fail with
 * vcclRemoteError.
 *
 * Peers outside failover (ranks on this host, unless VCCL_FAILOVER=on) use the primary path directly.
 */
#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/status.h"
#include "telemetry/telemetry.h"
#include "transport/failover/link_monitor.h"
#include "transport/failover/rail_probe.h"
#include "transport/failover/socket_reset.h"
#include "transport/failover/wire.h"
#include "transport/transport.h"

namespace vccl {
namespace failover {
namespace {

constexpr int kPaths = 2;
constexpr uint32_t kSendWindow = 64;     // messages in flight per peer: a RESUME list always fits
constexpr uint32_t kEnvelopeWindow = kSendWindow; // envelope receives posted ahead: every envelope in flight is acknowledged on arrival
constexpr int kControlSlots = 4;         // control receives kept posted per peer and path
constexpr int kFailbackProbes = 3;       // answered probes in a row before traffic returns to the primary
constexpr int kMaxHoldShift = 4;         // failback hold grows up to 16 x the interval for a flapping primary
static_assert(kSendWindow <= kControlItems, "a RESUME must be able to name every message in flight");

uint64_t ms_to_ns(int ms) { return uint64_t(ms > 0 ? ms : 1) * 1000000ull; }

/* Message `id` is below `frontier` (an "every id below arrived" mark), within the ids that can still be in
 * flight: ids wrap, so only the 4 x kSendWindow ids just below count. */
bool id_below(uint32_t id, uint32_t frontier) { return ((frontier - id - 1) & kIdMask) < kSendWindow * 4; }

struct AppRequest final : TransportRequest {
    enum State { kPending, kDone, kFailed };
    State state = kPending;
    bool is_recv = false;
    int peer = -1;
    TransportRequest* direct = nullptr; // peer outside failover: the primary path's request
    vcclResult_t error = vcclSuccess;
    std::string error_text;
    bool orphaned = false; // released by the caller while still referenced by a message
};

struct OutMsg {
    uint32_t id = 0;
    const char* buf = nullptr;
    size_t bytes = 0;
    MemType mem = MemType::Host;
    uint64_t chunk_bytes = 0;
    uint32_t nchunks = 0;
    std::vector<char> envelope; // Envelope + inline data
    bool posted = false;
    int path = -1;
    std::vector<TransportRequest*> reqs; // inner sends on `path`: [0] envelope, [1 + c] chunk c
    std::vector<uint64_t> post_ns;       // telemetry per chunk
    bool env_acked = false;
    uint64_t sent_ns = 0;
    AppRequest* app = nullptr;
    TransferTag ttag;
};

struct PostedRecv {
    AppRequest* app;
    uint64_t tag;
    char* buf;
    size_t bytes;
    MemType mem;
    TransferTag ttag;
};

struct InMsg {
    uint32_t id = 0;
    Envelope env{};
    std::vector<char> inline_data;
    PostedRecv recv{};
    bool matched = false;
    bool seen = false; // taken in id order: matched, or queued as unexpected
    int path = -1;
    std::vector<TransportRequest*> reqs; // chunk receives on `path`, null once received
    std::vector<uint8_t> got;
    std::vector<uint64_t> post_ns;
    uint32_t received = 0; // chunks with got[c] set
    uint64_t last_progress_ns = 0;
    // Receives of an abandoned path, cancelled but not yet ended: UCX may still write (identical bytes)
    // into the caller's buffer, so the message is not complete before they end.
    struct Draining {
        int path;
        uint32_t chunk;
        TransportRequest* req;
    };
    std::vector<Draining> draining;
};

struct EnvelopeSlot {
    std::vector<char> buf;
    TransportRequest* req = nullptr;
    int path = -1;
};

struct ControlSlot {
    Control msg;
    TransportRequest* req = nullptr;
};

struct ControlSend {
    Control msg;
    TransportRequest* req = nullptr;
    int path = 0;
};

struct PeerState {
    bool failover = false;
    int active = 0;
    uint32_t epoch = 0;
    uint32_t last_resume_in = 0;
    bool awaiting_resume = false;
    uint32_t resume_sent_epoch = 0; // our last RESUME was for this epoch
    uint64_t resume_resent_ns = 0;  // our RESUME was last sent again then (awaiting the peer's)
    uint32_t resume_sends = 0;      // RESUMEs sent since the switch, while awaiting the peer's
    uint64_t switch_started_ns = 0;
    std::string switch_cause;
    bool switch_failback = false;   // the last switch was a failback (its RESUMEs say so)
    // Sending side.
    uint32_t next_send_id = 0;
    std::deque<std::unique_ptr<OutMsg>> out; // by id, until acknowledged
    uint64_t last_ack_ns = 0;
    // Receiving side.
    uint32_t next_env_id = 0;   // every envelope below arrived
    uint32_t next_post_env = 0; // next envelope id without a posted receive
    std::map<uint32_t, std::unique_ptr<EnvelopeSlot>> env_slots;
    std::vector<std::pair<uint32_t, std::unique_ptr<EnvelopeSlot>>> slot_drain; // cancelled, buffer still UCX's
    std::map<uint32_t, std::unique_ptr<InMsg>> in; // envelope arrived, message not complete
    std::deque<InMsg*> unexpected;                // contiguous, unmatched, by id
    std::deque<PostedRecv> posted;                // receives waiting for an envelope
    std::vector<uint32_t> ack_done;
    bool ack_upto_dirty = false;
    ControlSlot ctrl[kPaths][kControlSlots];
    // Health.
    bool path_lost[kPaths] = {false, false};
    uint64_t stall_since = 0;  // active path silent since
    uint64_t last_rx_ns[kPaths] = {0, 0}; // last receive completed from the peer, per path (envelope, chunk, control)
    uint64_t probe_nonce = 0;
    int probe_path = -1;
    uint64_t probe_sent_ns = 0;
    bool probe_answered = false;
    uint32_t probe_peer_idle_ms = kNeverReceived; // from the reply: the peer's silence from us on our active path
    bool probe_asks = false;        // the probe asks whether message probe_ask_id completed at the peer
    uint32_t probe_ask_id = 0;
    bool probe_ask_completed = false; // the reply's answer
    uint64_t next_completion_ask_ns = 0;
    uint64_t unusable_since = 0; // no usable path since
    std::string lost_cause;      // the active path was lost (path_lost): settle() switches
    // Failback.
    int good_probes = 0;
    uint64_t next_failback_ns = 0;
    int hold_shift = 0;
    uint64_t primary_lost_ns = 0;
    uint64_t failback_nonce = 0;
    bool failback_answered = false;
    uint64_t next_reconnect_ns = 0;
    vcclResult_t failed = vcclSuccess;
    std::string failed_text;
};

class FailoverTransport final : public Transport {
public:
    FailoverTransport(std::unique_ptr<Transport> primary, std::unique_ptr<Transport> backup,
                      const FailoverOptions& fo, const TransportOptions& options, int rank, int nranks)
        : fo_(fo), rank_(rank), nranks_(nranks), telemetry_(options.telemetry), recording_(options.telemetry),
          links_({options.net_devices, fo.backup_devices}) {
        paths_[0] = std::move(primary);
        paths_[1] = std::move(backup);
        devices_[0] = options.net_devices;
        devices_[1] = fo.backup_devices;
        for (int r = 0; r < nranks; ++r) peers_.push_back(std::make_unique<PeerState>());
        for (int r = 0; r < nranks; ++r) {
            bool same_host = !options.host_ids.empty() && options.host_ids[size_t(r)] == options.host_ids[size_t(rank)];
            (*peers_[size_t(r)]).failover = r != rank && (fo.every_peer || !same_host);
        }
    }
    ~FailoverTransport() override { close(Deadline::after_ms(2000)); }
    const char* name() const override { return "ucx+failover"; }

    vcclResult_t start();
    /* Collective, before start(): the rail probe's address exchange. */
    vcclResult_t init_rail_probe(Bootstrap* bootstrap) {
        return probe_.init(bootstrap, {links_.device(0), links_.device(1)});
    }

    vcclResult_t isend(int peer, uint64_t tag, const void* buf, size_t bytes, MemType mem, bool sync,
                       TransportRequest** out) override;
    vcclResult_t irecv(int peer, uint64_t tag, void* buf, size_t bytes, MemType mem, TransportRequest** out) override;
    vcclResult_t test(TransportRequest* req) override;
    void progress() override;
    bool wants_idle_progress() const override {
        for (const auto& p : peers_) {
            if (p->failover) return true;
        }
        return false;
    }
    void pause_telemetry(bool paused) override { recording_ = paused ? nullptr : telemetry_; }
    bool has_pending() const override {
        for (const auto& pp : peers_) {
            const PeerState& p = *pp;
            if (!p.failover || p.failed != vcclSuccess) continue;
            if (!p.out.empty() || !p.in.empty() || !p.posted.empty() || !p.unexpected.empty() || !p.slot_drain.empty() ||
                !p.ack_done.empty() || p.ack_upto_dirty || p.awaiting_resume || (p.active != 0 && fo_.failback) ||
                p.path_lost[0] ||
                p.path_lost[1] || p.stall_since != 0 || p.probe_path >= 0) {
                return true;
            }
        }
        return false;
    }
    void release(TransportRequest* req) override;
    vcclResult_t close(Deadline deadline) override;

private:
    bool usable(int peer, int path) {
        return links_.up(path) && !(*peers_[size_t(peer)]).path_lost[path] && paths_[path]->peer_status(peer) == vcclSuccess;
    }
    const char* device(int path) const { return devices_[path].empty() ? "UCX's choice" : devices_[path].c_str(); }

    // Sending.
    vcclResult_t post_message(int peer, OutMsg* m);
    void release_sends(OutMsg* m);
    void poll_sends(int peer);
    void complete_out(int peer, uint32_t id);
    // Receiving.
    void post_envelopes(int peer);
    void poll_envelopes(int peer);
    void envelope_arrived(int peer, uint32_t id, const char* data, size_t len);
    void match(int peer, InMsg* m, const PostedRecv& r);
    void post_chunks(int peer, InMsg* m, uint32_t from);
    void poll_chunks(int peer);
    void finish_in(int peer, InMsg* m, vcclResult_t status, const char* why);
    // Control.
    void post_control(int peer, int path, int slot);
    void poll_control(int peer);
    void on_control(int peer, int path, const Control& c, size_t len);
    void send_control(int peer, int path, const Control& c, size_t len);
    void reap_control_sends();
    void flush_acks(int peer);
    // Health.
    void check_health(int peer, uint64_t now);
    void switch_path(int peer, int path, uint32_t epoch, const std::string& cause, bool failback = false);
    void send_resume(int peer);
    void apply_resume(int peer, const Control& c);
    void path_lost(int peer, int path, const std::string& cause);
    void settle(int peer);
    void fail_peer(int peer, const std::string& why);
    void probe(int peer, int path, uint64_t now, const uint32_t* ask_id = nullptr);
    void check_completion_wait(int peer, uint64_t now);
    void close_stuck_drains(int peer, uint64_t now);
    void reset_connections(int peer, int path);

    void complete_app(AppRequest* app, vcclResult_t status, const std::string& text) {
        if (app == nullptr || app->state != AppRequest::kPending) return;
        app->state = status == vcclSuccess ? AppRequest::kDone : AppRequest::kFailed;
        app->error = status;
        app->error_text = text;
        if (app->orphaned) delete app;
    }
    void record_post(int peer, int path, telemetry::Dir dir, uint64_t bytes, uint64_t* post_ns) {
        if (recording_ != nullptr) *post_ns = recording_->on_post(peer, path, dir, bytes);
    }
    void record_done(int peer, int path, telemetry::Dir dir, uint64_t bytes, uint64_t post_ns, const TransferTag& t,
                     bool ok) {
        if (recording_ != nullptr) recording_->on_complete(peer, path, dir, bytes, post_ns, t, ok);
    }

    FailoverOptions fo_;
    int rank_, nranks_;
    telemetry::Telemetry* telemetry_;  // path events
    telemetry::Telemetry* recording_;  // transfers: telemetry_, or NULL while paused (pause_telemetry)
    LinkMonitor links_;
    RailProbe probe_; // is a broken path's rail answering? (asked before reconnecting it)
    std::unique_ptr<Transport> paths_[kPaths];
    std::string devices_[kPaths];
    std::vector<std::unique_ptr<PeerState>> peers_; // not movable: requests point into them
    std::deque<std::unique_ptr<ControlSend>> control_sends_;
    uint64_t next_link_poll_ns_ = 0;
    uint64_t next_health_ns_ = 0;
    uint64_t nonce_ = 0;
    bool closed_ = false;
};

vcclResult_t FailoverTransport::start() {
    for (int r = 0; r < nranks_; ++r) {
        PeerState& p = (*peers_[size_t(r)]);
        if (!p.failover) continue;
        for (int path = 0; path < kPaths; ++path) {
            for (int s = 0; s < kControlSlots; ++s) post_control(r, path, s);
        }
        post_envelopes(r);
        p.last_ack_ns = now_ns();
        telemetry_path_event(telemetry_, r, 0, telemetry::PathState::Up);
        telemetry_path_event(telemetry_, r, 1, telemetry::PathState::Standby);
    }
    VCCL_INFO(kLogNet, "failover: rank %d: primary %s, backup %s, link monitor on %s/%s", rank_, device(0), device(1),
              links_.device(0).empty() ? "-" : links_.device(0).c_str(),
              links_.device(1).empty() ? "-" : links_.device(1).c_str());
    return vcclSuccess;
}

/* ---- sending ---- */

vcclResult_t FailoverTransport::isend(int peer, uint64_t tag, const void* buf, size_t bytes, MemType mem, bool sync,
                                      TransportRequest** out) {
    if (peer < 0 || peer >= nranks_) return set_last_error(vcclInternalError, "failover: bad peer %d", peer);
    PeerState& p = (*peers_[size_t(peer)]);
    auto app = std::make_unique<AppRequest>();
    app->peer = peer;
    if (!p.failover) {
        VCCL_RETURN_IF_ERROR(paths_[0]->isend(peer, tag, buf, bytes, mem, sync, &app->direct));
        *out = app.release();
        return vcclSuccess;
    }
    if (p.failed != vcclSuccess) return set_last_error(p.failed, "%s", p.failed_text.c_str());
    auto m = std::make_unique<OutMsg>();
    m->id = p.next_send_id++ & kIdMask;
    m->buf = static_cast<const char*>(buf);
    m->bytes = bytes;
    m->mem = mem;
    m->ttag = transfer_tag_;
    bool inline_data = mem == MemType::Host && bytes <= kInlineBytes;
    if (!inline_data && bytes > 0) {
        m->chunk_bytes = std::max<uint64_t>(kMinChunkBytes, (bytes + kMaxChunks - 1) / kMaxChunks);
        m->chunk_bytes = (m->chunk_bytes + 4095) & ~uint64_t(4095);
        m->nchunks = uint32_t((bytes + m->chunk_bytes - 1) / m->chunk_bytes);
    }
    m->envelope.resize(sizeof(Envelope) + (inline_data ? bytes : 0));
    Envelope env{};
    env.magic = kEnvelopeMagic;
    env.id = m->id;
    env.tag = tag;
    env.bytes = bytes;
    env.chunk_bytes = m->chunk_bytes;
    env.nchunks = m->nchunks;
    memcpy(m->envelope.data(), &env, sizeof(env));
    if (inline_data && bytes > 0) memcpy(m->envelope.data() + sizeof(env), buf, bytes);
    m->app = app.get();
    OutMsg* raw = m.get();
    p.out.push_back(std::move(m));
    // Beyond the window, or while the peer has not told us where to resume, the message waits its turn.
    if (!p.awaiting_resume && p.out.size() <= kSendWindow) {
        vcclResult_t st = post_message(peer, raw);
        if (st != vcclSuccess) {
            p.out.pop_back();
            return st;
        }
    }
    *out = app.release();
    return vcclSuccess;
}

vcclResult_t FailoverTransport::post_message(int peer, OutMsg* m) {
    PeerState& p = (*peers_[size_t(peer)]);
    int path = p.active;
    release_sends(m);
    m->posted = true;
    m->path = path;
    m->env_acked = false;
    m->sent_ns = now_ns();
    m->reqs.assign(1 + m->nchunks, nullptr);
    m->post_ns.assign(1 + m->nchunks, 0);
    Transport* t = paths_[path].get();
    record_post(peer, path, telemetry::Dir::Send, m->envelope.size(), &m->post_ns[0]);
    vcclResult_t st = t->isend(peer, wire_tag(Kind::kEnvelope, m->id, 0), m->envelope.data(), m->envelope.size(),
                               MemType::Host, false, &m->reqs[0]);
    for (uint32_t c = 0; st == vcclSuccess && c < m->nchunks; ++c) {
        size_t off = size_t(c) * m->chunk_bytes;
        size_t len = std::min<size_t>(m->chunk_bytes, m->bytes - off);
        record_post(peer, path, telemetry::Dir::Send, len, &m->post_ns[1 + c]);
        st = t->isend(peer, wire_tag(Kind::kData, m->id, c), m->buf + off, len, m->mem, false, &m->reqs[1 + c]);
    }
    if (st != vcclSuccess) {
        // The path refused the post (its connection is gone): the health check moves the peer to the
        // other path, and the RESUME exchange sends this message again.
        path_lost(peer, path, std::string("posting failed: ") + std::string("post_message: ") + last_error_message());
    }
    return vcclSuccess;
}

void FailoverTransport::release_sends(OutMsg* m) {
    for (TransportRequest*& r : m->reqs) {
        if (r != nullptr) paths_[m->path]->release(r);
        r = nullptr;
    }
}

void FailoverTransport::poll_sends(int peer) {
    PeerState& p = (*peers_[size_t(peer)]);
    for (auto& mp : p.out) {
        OutMsg* m = mp.get();
        if (!m->posted) break;
        for (size_t i = 0; i < m->reqs.size(); ++i) {
            TransportRequest* r = m->reqs[i];
            if (r == nullptr) continue;
            vcclResult_t st = paths_[m->path]->test(r);
            if (st == vcclInProgress) continue;
            size_t len = i == 0 ? m->envelope.size()
                                : std::min<size_t>(m->chunk_bytes, m->bytes - (i - 1) * m->chunk_bytes);
            record_done(peer, m->path, telemetry::Dir::Send, len, m->post_ns[i], m->ttag, st == vcclSuccess);
            paths_[m->path]->release(r);
            m->reqs[i] = nullptr;
            // A send left on a path traffic has moved from fails when that path is closed; the path may be
            // reconnected by now, and its own state (peer_status) tells whether it works. Only the active
            // path's failures say something about the path in use.
            if (st != vcclSuccess && m->path == p.active) {
                path_lost(peer, m->path, std::string("poll_sends: ") + last_error_message());
            }
        }
    }
}

void FailoverTransport::complete_out(int peer, uint32_t id) {
    PeerState& p = (*peers_[size_t(peer)]);
    for (auto it = p.out.begin(); it != p.out.end(); ++it) {
        OutMsg* m = it->get();
        if (m->id != id) continue;
        if (!m->posted) return; // an acknowledgement of a message not sent yet: a stale or forged one
        release_sends(m);
        complete_app(m->app, vcclSuccess, "");
        p.out.erase(it);
        break;
    }
    // The window moved: post what waited for it.
    if (p.awaiting_resume) return;
    size_t n = 0;
    for (auto& mp : p.out) {
        if (++n > kSendWindow) break;
        if (!mp->posted) post_message(peer, mp.get());
    }
}

/* ---- receiving ---- */

vcclResult_t FailoverTransport::irecv(int peer, uint64_t tag, void* buf, size_t bytes, MemType mem,
                                      TransportRequest** out) {
    if (peer < 0 || peer >= nranks_) return set_last_error(vcclInternalError, "failover: bad peer %d", peer);
    PeerState& p = (*peers_[size_t(peer)]);
    auto app = std::make_unique<AppRequest>();
    app->peer = peer;
    app->is_recv = true;
    if (!p.failover) {
        VCCL_RETURN_IF_ERROR(paths_[0]->irecv(peer, tag, buf, bytes, mem, &app->direct));
        *out = app.release();
        return vcclSuccess;
    }
    if (p.failed != vcclSuccess) return set_last_error(p.failed, "%s", p.failed_text.c_str());
    PostedRecv r{app.get(), tag, static_cast<char*>(buf), bytes, mem, transfer_tag_};
    *out = app.release();
    for (auto it = p.unexpected.begin(); it != p.unexpected.end(); ++it) {
        if ((*it)->env.tag != tag) continue;
        InMsg* m = *it;
        p.unexpected.erase(it);
        match(peer, m, r);
        return vcclSuccess;
    }
    p.posted.push_back(r);
    return vcclSuccess;
}

void FailoverTransport::post_envelopes(int peer) {
    PeerState& p = (*peers_[size_t(peer)]);
    while (((p.next_post_env - p.next_env_id) & kIdMask) < kEnvelopeWindow) {
        uint32_t id = p.next_post_env;
        if (p.in.count(id) != 0) { // arrived before a switch: the peer does not send it again
            p.next_post_env = (id + 1) & kIdMask;
            continue;
        }
        auto slot = std::make_unique<EnvelopeSlot>();
        slot->buf.resize(sizeof(Envelope) + kInlineBytes);
        slot->path = p.active;
        if (paths_[p.active]->irecv_upto(peer, wire_tag(Kind::kEnvelope, id, 0), slot->buf.data(), slot->buf.size(),
                                         MemType::Host, &slot->req) != vcclSuccess) {
            path_lost(peer, p.active, std::string("post_envelopes: ") + last_error_message());
            return;
        }
        p.env_slots[id] = std::move(slot);
        p.next_post_env = (id + 1) & kIdMask;
    }
}

void FailoverTransport::poll_envelopes(int peer) {
    PeerState& p = (*peers_[size_t(peer)]);
    std::vector<uint32_t> done;
    for (auto& kv : p.env_slots) {
        EnvelopeSlot* s = kv.second.get();
        if (s->req == nullptr) continue;
        vcclResult_t st = paths_[s->path]->test(s->req);
        if (st == vcclInProgress) continue;
        size_t len = paths_[s->path]->received_bytes(s->req);
        paths_[s->path]->release(s->req);
        s->req = nullptr;
        if (st != vcclSuccess) {
            path_lost(peer, s->path, std::string("poll_envelopes: ") + last_error_message());
            return; // the switch reposted the slots
        }
        done.push_back(kv.first);
        p.last_rx_ns[s->path] = now_ns();
        envelope_arrived(peer, kv.first, s->buf.data(), len);
    }
    for (uint32_t id : done) p.env_slots.erase(id);
    for (size_t d = 0; d < p.slot_drain.size();) {
        EnvelopeSlot* s = p.slot_drain[d].second.get();
        vcclResult_t st = paths_[s->path]->test(s->req);
        if (st == vcclInProgress) {
            ++d;
            continue;
        }
        size_t len = paths_[s->path]->received_bytes(s->req);
        paths_[s->path]->release(s->req);
        s->req = nullptr;
        if (st == vcclSuccess) envelope_arrived(peer, p.slot_drain[d].first, s->buf.data(), len); // a duplicate is ignored
        p.slot_drain.erase(p.slot_drain.begin() + long(d));
    }
    if (!done.empty()) post_envelopes(peer);
}

void FailoverTransport::envelope_arrived(int peer, uint32_t id, const char* data, size_t len) {
    PeerState& p = (*peers_[size_t(peer)]);
    Envelope env;
    if (len < sizeof(env)) return;
    memcpy(&env, data, sizeof(env));
    if (env.magic != kEnvelopeMagic || env.id != id || p.in.count(id) != 0) return;
    if (((id - p.next_env_id) & kIdMask) >= 4 * kSendWindow) return; // a resent copy of a finished message
    if (env.nchunks == 0 && len != sizeof(env) + env.bytes) return;
    auto m = std::make_unique<InMsg>();
    m->id = id;
    m->env = env;
    if (env.nchunks == 0) m->inline_data.assign(data + sizeof(env), data + len);
    p.in[id] = std::move(m);
    // Match in id order: the caller's (peer, tag) order is the sender's posting order.
    for (;;) {
        auto it = p.in.find(p.next_env_id);
        if (it == p.in.end() || it->second->seen) break;
        InMsg* next = it->second.get();
        next->seen = true;
        p.next_env_id = (p.next_env_id + 1) & kIdMask;
        p.ack_upto_dirty = true;
        bool matched = false;
        for (auto r = p.posted.begin(); r != p.posted.end(); ++r) {
            if (r->tag != next->env.tag) continue;
            PostedRecv recv = *r;
            p.posted.erase(r);
            match(peer, next, recv);
            matched = true;
            break;
        }
        if (!matched) p.unexpected.push_back(next);
    }
}

void FailoverTransport::match(int peer, InMsg* m, const PostedRecv& r) {
    m->recv = r;
    m->matched = true;
    if (m->env.bytes != r.bytes) {
        char why[160];
        snprintf(why, sizeof(why),
                 "message from rank %d has %llu bytes, %zu expected: the ranks called mismatched operations or counts",
                 peer, (unsigned long long)m->env.bytes, r.bytes);
        finish_in(peer, m, vcclInvalidUsage, why);
        return;
    }
    if (m->env.nchunks == 0) {
        if (r.bytes > 0) memcpy(r.buf, m->inline_data.data(), r.bytes);
        finish_in(peer, m, vcclSuccess, nullptr);
        return;
    }
    m->reqs.assign(m->env.nchunks, nullptr);
    m->got.assign(m->env.nchunks, 0);
    m->post_ns.assign(m->env.nchunks, 0);
    post_chunks(peer, m, 0);
}

void FailoverTransport::post_chunks(int peer, InMsg* m, uint32_t from) {
    PeerState& p = *peers_[size_t(peer)];
    for (uint32_t c = 0; c < m->env.nchunks; ++c) {
        if (m->reqs[c] == nullptr) continue;
        paths_[m->path]->cancel(m->reqs[c]);
        m->draining.push_back({m->path, c, m->reqs[c]});
        m->reqs[c] = nullptr;
    }
    m->path = p.active;
    m->last_progress_ns = now_ns();
    for (uint32_t c = from; c < m->env.nchunks; ++c) {
        // Chunks from `from` on are all (re)sent by the peer, also those that already arrived: receive
        // them again into the same bytes rather than leave duplicates unmatched.
        size_t off = size_t(c) * m->env.chunk_bytes;
        size_t len = std::min<size_t>(m->env.chunk_bytes, m->env.bytes - off);
        record_post(peer, m->path, telemetry::Dir::Recv, len, &m->post_ns[c]);
        if (paths_[m->path]->irecv(peer, wire_tag(Kind::kData, m->id, c), m->recv.buf + off, len, m->recv.mem,
                                   &m->reqs[c]) != vcclSuccess) {
            path_lost(peer, m->path, std::string("post_chunks: ") + last_error_message());
            return;
        }
    }
}

void FailoverTransport::poll_chunks(int peer) {
    PeerState& p = (*peers_[size_t(peer)]);
    std::vector<InMsg*> complete;
    for (auto& kv : p.in) {
        InMsg* m = kv.second.get();
        if (!m->matched) continue;
        for (uint32_t c = 0; c < m->reqs.size(); ++c) {
            TransportRequest* r = m->reqs[c];
            if (r == nullptr) continue;
            vcclResult_t st = paths_[m->path]->test(r);
            if (st == vcclInProgress) continue;
            size_t len = std::min<size_t>(m->env.chunk_bytes, m->env.bytes - size_t(c) * m->env.chunk_bytes);
            record_done(peer, m->path, telemetry::Dir::Recv, len, m->post_ns[c], m->recv.ttag, st == vcclSuccess);
            paths_[m->path]->release(r);
            m->reqs[c] = nullptr;
            if (st != vcclSuccess) {
                path_lost(peer, m->path, std::string("poll_chunks: ") + last_error_message());
                return;
            }
            if (!m->got[c]) {
                m->got[c] = 1;
                m->received++;
            }
            m->last_progress_ns = now_ns();
            p.last_rx_ns[m->path] = m->last_progress_ns;
        }
        for (size_t d = 0; d < m->draining.size();) {
            InMsg::Draining& dr = m->draining[d];
            vcclResult_t st = paths_[dr.path]->test(dr.req);
            if (st == vcclInProgress) {
                ++d;
                continue;
            }
            if (st == vcclSuccess && !m->got[dr.chunk]) {
                m->got[dr.chunk] = 1;
                m->received++;
            }
            paths_[dr.path]->release(dr.req);
            m->draining.erase(m->draining.begin() + long(d));
        }
        bool idle = m->draining.empty();
        for (TransportRequest* r : m->reqs) idle = idle && r == nullptr;
        if (m->received == m->env.nchunks && idle) complete.push_back(m);
    }
    for (InMsg* m : complete) finish_in(peer, m, vcclSuccess, nullptr);
}

void FailoverTransport::finish_in(int peer, InMsg* m, vcclResult_t status, const char* why) {
    PeerState& p = (*peers_[size_t(peer)]);
    for (TransportRequest*& r : m->reqs) {
        if (r != nullptr) paths_[m->path]->release(r);
        r = nullptr;
    }
    complete_app(m->recv.app, status, why != nullptr ? why : "");
    if (status != vcclSuccess) set_last_error(status, "%s", why);
    p.ack_done.push_back(m->id);
    p.in.erase(m->id);
    flush_acks(peer);
}

/* ---- control ---- */

void FailoverTransport::post_control(int peer, int path, int slot) {
    ControlSlot& s = (*peers_[size_t(peer)]).ctrl[path][slot];
    if (s.req != nullptr) return;
    if (paths_[path]->irecv_upto(peer, wire_tag(Kind::kControl, 0, 0), &s.msg, sizeof(s.msg), MemType::Host,
                                 &s.req) != vcclSuccess) {
        s.req = nullptr; // the path is broken; reposted when it is reconnected
    }
}

void FailoverTransport::poll_control(int peer) {
    PeerState& p = (*peers_[size_t(peer)]);
    for (int path = 0; path < kPaths; ++path) {
        for (int s = 0; s < kControlSlots; ++s) {
            ControlSlot& slot = p.ctrl[path][s];
            if (slot.req == nullptr) continue;
            vcclResult_t st = paths_[path]->test(slot.req);
            if (st == vcclInProgress) continue;
            size_t len = paths_[path]->received_bytes(slot.req);
            paths_[path]->release(slot.req);
            slot.req = nullptr;
            if (st != vcclSuccess) {
                path_lost(peer, path, std::string("poll_control: ") + last_error_message());
                continue;
            }
            Control c = slot.msg;
            p.last_rx_ns[path] = now_ns();
            post_control(peer, path, s);
            if (len >= kControlHeader && c.magic == kControlMagic) on_control(peer, path, c, len);
        }
    }
}

void FailoverTransport::send_control(int peer, int path, const Control& c, size_t len) {
    auto s = std::make_unique<ControlSend>();
    s->msg = c;
    s->msg.magic = kControlMagic;
    s->path = path;
    if (paths_[path]->isend(peer, wire_tag(Kind::kControl, 0, 0), &s->msg, len, MemType::Host, false, &s->req) !=
        vcclSuccess) {
        return; // the health check notices the broken path
    }
    paths_[path]->progress(); // out now, so a peer waiting on it need not wait for our next call
    control_sends_.push_back(std::move(s));
}

void FailoverTransport::reap_control_sends() {
    for (auto it = control_sends_.begin(); it != control_sends_.end();) {
        ControlSend* s = it->get();
        if (paths_[s->path]->test(s->req) == vcclInProgress) {
            ++it;
            continue;
        }
        paths_[s->path]->release(s->req);
        it = control_sends_.erase(it);
    }
}

void FailoverTransport::flush_acks(int peer) {
    PeerState& p = (*peers_[size_t(peer)]);
    if (!p.ack_upto_dirty && p.ack_done.empty()) return;
    size_t at = 0;
    do {
        Control c;
        memset(&c, 0, kControlHeader);
        c.type = uint32_t(ControlType::kAck);
        c.upto = p.next_env_id;
        size_t n = std::min<size_t>(p.ack_done.size() - at, 2 * kControlItems);
        for (size_t i = 0; i < n; ++i) c.ids[i] = p.ack_done[at + i];
        c.count = uint32_t(n);
        at += n;
        send_control(peer, p.active, c, kControlHeader + n * sizeof(uint32_t));
    } while (at < p.ack_done.size());
    p.ack_done.clear();
    p.ack_upto_dirty = false;
}

void FailoverTransport::on_control(int peer, int path, const Control& c, size_t len) {
    PeerState& p = (*peers_[size_t(peer)]);
    switch (ControlType(c.type)) {
    case ControlType::kAck: {
        size_t n = std::min<size_t>(c.count, (len - kControlHeader) / sizeof(uint32_t));
        if (path == p.active) {
            p.last_ack_ns = now_ns();
            p.stall_since = 0;
        }
        for (auto& mp : p.out) {
            if (mp->posted && id_below(mp->id, c.upto)) mp->env_acked = true;
        }
        for (size_t i = 0; i < n; ++i) complete_out(peer, c.ids[i]);
        break;
    }
    case ControlType::kResume: apply_resume(peer, c); break;
    case ControlType::kProbe: {
        Control r;
        memset(&r, 0, kControlHeader);
        r.type = uint32_t(ControlType::kProbeReply);
        r.nonce = c.nonce;
        r.path = c.path;
        r.upto = kNeverReceived;
        if (c.path < uint32_t(kPaths) && p.last_rx_ns[c.path] != 0) {
            uint64_t idle_ms = (now_ns() - std::min(now_ns(), p.last_rx_ns[c.path])) / 1000000;
            r.upto = uint32_t(std::min<uint64_t>(idle_ms, kNeverReceived - 1));
        }
        if (c.count == 1) {
            // Completed here: its envelope arrived (ids below next_env_id) and it left `in`.
            bool arrived = id_below(c.epoch, p.next_env_id);
            r.count = arrived && p.in.count(c.epoch & kIdMask) == 0 ? 1 : 0;
        }
        send_control(peer, path, r, kControlHeader);
        break;
    }
    case ControlType::kProbeReply:
        if (c.nonce == p.probe_nonce && path == p.probe_path) {
            p.probe_answered = true;
            p.probe_peer_idle_ms = c.upto;
            p.probe_ask_completed = p.probe_asks && c.count == 1;
        }
        if (c.nonce == p.failback_nonce && path == 0) p.failback_answered = true;
        break;
    }
}

/* ---- switching ---- */

void FailoverTransport::switch_path(int peer, int path, uint32_t epoch, const std::string& cause, bool failback) {
    PeerState& p = (*peers_[size_t(peer)]);
    int old = p.active;
    p.active = path;
    p.epoch = epoch;
    p.switch_started_ns = now_ns();
    p.switch_cause = cause;
    p.switch_failback = failback;
    p.stall_since = 0;
    p.probe_path = -1;
    p.good_probes = 0;
    VCCL_WARN(kLogNet, "failover: rank %d <-> rank %d: leaving path %d (%s) for path %d (%s): %s", rank_, peer, old,
              device(old), path, device(path), cause.c_str());
    telemetry_path_event(telemetry_, peer, old,
                         path == 0 ? telemetry::PathState::Standby : telemetry::PathState::Down);
    telemetry_path_event(telemetry_, peer, path, telemetry::PathState::Up);
    if (old == 0 && path != 0) {
        p.primary_lost_ns = now_ns();
        if (p.hold_shift < kMaxHoldShift) p.hold_shift++;
    }
    // Receiver side: every receive moves to the new path.
    for (auto& kv : p.env_slots) {
        if (kv.second->req == nullptr) continue;
        paths_[kv.second->path]->cancel(kv.second->req);
        p.slot_drain.emplace_back(kv.first, std::move(kv.second));
    }
    p.env_slots.clear();
    // Leaving a failed path: close it, so that receives UCX had already matched there end now instead of
    // writing into buffers later, or never ending (the peer closed its side, and the rail may drop the news).
    // Also when only the peer saw the failure. A healthy path left by failback drains by itself.
    if (!failback) {
        reset_connections(peer, old);
        paths_[old]->disconnect(peer);
        p.path_lost[old] = true;
    }
    p.next_post_env = p.next_env_id;
    post_envelopes(peer);
    for (auto& kv : p.in) {
        InMsg* m = kv.second.get();
        if (!m->matched) continue;
        uint32_t first = 0;
        while (first < m->env.nchunks && m->got[first]) ++first;
        post_chunks(peer, m, first);
    }
    // Sender side: nothing new goes out until the peer says where to resume.
    p.awaiting_resume = true;
    p.resume_sends = 0;
    send_resume(peer);
}

/* Before the endpoint of a failed path is closed: its TCP connections to the peer are shut down first and the
 * path's transport sees them break (socket_reset.h says why: two UCX tcp defects that crashed the process). */
void FailoverTransport::reset_connections(int peer, int path) {
    uint32_t local_ip = 0, peer_ip = 0;
    uint16_t probe_port = 0;
    if (!probe_.unique_peer_address(path, peer, &local_ip, &peer_ip, &probe_port)) return;
    int n = shutdown_tcp_receiving(local_ip, peer_ip, probe_port);
    if (n == 0) return;
    Deadline deadline = Deadline::after_ms(20); // one progress call normally suffices
    int polls = 0;
    while (paths_[path]->peer_status(peer) == vcclSuccess && !deadline.expired()) {
        paths_[path]->progress();
        ++polls;
    }
    VCCL_INFO(kLogNet, "failover: rank %d -> %d: shut down %d connection(s) of path %d before closing it (%s after "
              "%d poll(s))", rank_, peer, n, path,
              paths_[path]->peer_status(peer) == vcclSuccess ? "not yet seen broken" : "seen broken", polls);
}

void FailoverTransport::send_resume(int peer) {
    PeerState& p = (*peers_[size_t(peer)]);
    Control c;
    memset(&c, 0, kControlHeader);
    c.type = uint32_t(ControlType::kResume);
    c.epoch = p.epoch;
    c.path = uint32_t(p.active);
    c.upto = p.next_env_id;
    uint32_t n = 0;
    for (auto& kv : p.in) {
        InMsg* m = kv.second.get();
        uint32_t first = 0;
        if (m->matched) {
            while (first < m->env.nchunks && m->got[first]) ++first;
        }
        if (n < kControlItems) c.points[n++] = ResumePoint{m->id, first};
    }
    c.count = n;
    c.nonce = (p.awaiting_resume ? kResumeWantsAnswer : 0) | (p.switch_failback ? kResumeFailback : 0);
    p.resume_sent_epoch = p.epoch;
    if (p.awaiting_resume) p.resume_sends++;
    VCCL_INFO(kLogNet, "failover: rank %d -> %d: RESUME epoch %u on path %d (%u message(s) to resume, envelopes below %u "
              "arrived%s%s)", rank_, peer, c.epoch, p.active, n, c.upto,
              (c.nonce & kResumeWantsAnswer) != 0 ? ", answer wanted" : "", p.switch_failback ? ", failback" : "");
    send_control(peer, p.active, c, kControlHeader + n * sizeof(ResumePoint));
}

void FailoverTransport::apply_resume(int peer, const Control& c) {
    PeerState& p = (*peers_[size_t(peer)]);
    int path = int(c.path);
    if (path < 0 || path >= kPaths) return;
    VCCL_INFO(kLogNet, "failover: rank %d <- %d: RESUME epoch %u for path %d (here: epoch %u, path %d, last applied %u)",
              rank_, peer, c.epoch, path, p.epoch, p.active, p.last_resume_in);
    if (c.epoch < p.epoch) return; // an older switch, overtaken by a newer one
    // A failback leaves the old path open to drain, unless this side has seen it fail (then it is closed, so
    // that receives matched there end now, not at close_stuck_drains' timeout).
    bool failback = (c.nonce & kResumeFailback) != 0 && !p.path_lost[p.active];
    if (c.epoch == p.epoch && path != p.active) {
        // Both sides decided at once, differently: the lower rank's decision stands.
        if (peer > rank_) return;
        switch_path(peer, path, c.epoch, "the peer chose this path", failback);
    } else if (c.epoch > p.epoch) {
        if (path != p.active) switch_path(peer, path, c.epoch, failback ? "the peer failed back" : "the peer switched",
                                          failback);
        p.epoch = c.epoch;
        p.switch_failback = failback; // this epoch's RESUMEs from here describe the peer's switch
    } else if (c.epoch <= p.last_resume_in && p.last_resume_in != 0) {
        // Already applied. Sent again, it means the peer still waits for ours: it was lost.
        if ((c.nonce & kResumeWantsAnswer) != 0 && c.epoch == p.epoch) send_resume(peer);
        return;
    }
    p.last_resume_in = c.epoch;
    // Resend what the peer lacks, in id order: messages it names from their first missing chunk,
    // messages it has no envelope of in full; the rest it completed (their acknowledgement was lost).
    std::map<uint32_t, uint32_t> points;
    for (uint32_t i = 0; i < std::min<uint32_t>(c.count, kControlItems); ++i) points[c.points[i].id] = c.points[i].first_chunk;
    std::vector<uint32_t> completed;
    size_t n = 0;
    for (auto& mp : p.out) {
        OutMsg* m = mp.get();
        if (++n > kSendWindow) break;
        bool before_upto = id_below(m->id, c.upto);
        if (!m->posted) {
            post_message(peer, m);
            continue;
        }
        auto pt = points.find(m->id);
        if (pt != points.end()) {
            release_sends(m);
            m->path = p.active;
            m->env_acked = true;
            m->sent_ns = now_ns();
            Transport* t = paths_[p.active].get();
            for (uint32_t ch = pt->second; ch < m->nchunks; ++ch) {
                size_t off = size_t(ch) * m->chunk_bytes;
                size_t len = std::min<size_t>(m->chunk_bytes, m->bytes - off);
                record_post(peer, m->path, telemetry::Dir::Send, len, &m->post_ns[1 + ch]);
                if (t->isend(peer, wire_tag(Kind::kData, m->id, ch), m->buf + off, len, m->mem, false,
                             &m->reqs[1 + ch]) != vcclSuccess) {
                    path_lost(peer, p.active, std::string("apply_resume: ") + last_error_message());
                    return;
                }
            }
        } else if (before_upto) {
            completed.push_back(m->id);
        } else {
            post_message(peer, m);
        }
    }
    p.awaiting_resume = false;
    p.last_ack_ns = now_ns();
    for (uint32_t id : completed) complete_out(peer, id);
    // The peer waits for our RESUME of this epoch. Switching sent one; without a switch (we are on that path
    // already, e.g. a RESUME of an epoch in between was lost) it is sent now, else the peer never resumes.
    if ((c.nonce & kResumeWantsAnswer) != 0 && p.resume_sent_epoch != p.epoch) send_resume(peer);
    VCCL_WARN(kLogNet, "failover: rank %d <-> rank %d: traffic on path %d (%s) %.1f ms after the switch (%s)", rank_,
              peer, p.active, device(p.active), double(now_ns() - p.switch_started_ns) / 1e6,
              p.switch_cause.empty() ? "peer's decision" : p.switch_cause.c_str());
}

void FailoverTransport::path_lost(int peer, int path, const std::string& cause) {
    // Only noted here: callers are often in the middle of walking the peer's requests, which a switch
    // rebuilds. settle() acts on it once the walk is over.
    PeerState& p = *peers_[size_t(peer)];
    if (p.failed != vcclSuccess) return;
    if (!p.path_lost[path]) {
        p.path_lost[path] = true;
        if (path != p.active) telemetry_path_event(telemetry_, peer, path, telemetry::PathState::Down);
    }
    if (path == p.active && p.lost_cause.empty()) p.lost_cause = cause;
}

void FailoverTransport::settle(int peer) {
    PeerState& p = *peers_[size_t(peer)];
    if (p.lost_cause.empty()) return;
    std::string cause;
    cause.swap(p.lost_cause);
    if (p.failed != vcclSuccess || !p.path_lost[p.active]) return;
    int other = 1 - p.active;
    if (usable(peer, other)) switch_path(peer, other, p.epoch + 1, cause);
}

void FailoverTransport::fail_peer(int peer, const std::string& why) {
    PeerState& p = (*peers_[size_t(peer)]);
    if (p.failed != vcclSuccess) return;
    p.failed = vcclRemoteError;
    p.failed_text = "rank " + std::to_string(peer) + " is unreachable on every path: " + why;
    VCCL_WARN(kLogNet, "failover: %s", p.failed_text.c_str());
    for (int path = 0; path < kPaths; ++path) telemetry_path_event(telemetry_, peer, path, telemetry::PathState::Down);
    for (auto& mp : p.out) {
        release_sends(mp.get());
        complete_app(mp->app, p.failed, p.failed_text);
    }
    p.out.clear();
    for (auto& kv : p.in) {
        InMsg* m = kv.second.get();
        for (TransportRequest*& r : m->reqs) {
            if (r != nullptr) paths_[m->path]->release(r);
            r = nullptr;
        }
        for (InMsg::Draining& d : m->draining) paths_[d.path]->release(d.req);
        m->draining.clear();
        if (m->matched) complete_app(m->recv.app, p.failed, p.failed_text);
    }
    p.in.clear();
    p.unexpected.clear();
    for (PostedRecv& r : p.posted) complete_app(r.app, p.failed, p.failed_text);
    p.posted.clear();
}

void FailoverTransport::probe(int peer, int path, uint64_t now, const uint32_t* ask_id) {
    PeerState& p = (*peers_[size_t(peer)]);
    p.probe_nonce = ++nonce_ | (uint64_t(rank_) << 40);
    p.probe_path = path;
    p.probe_sent_ns = now;
    p.probe_answered = false;
    p.probe_peer_idle_ms = kNeverReceived;
    p.probe_asks = ask_id != nullptr;
    p.probe_ask_id = ask_id != nullptr ? *ask_id : 0;
    p.probe_ask_completed = false;
    Control c;
    memset(&c, 0, kControlHeader);
    c.type = uint32_t(ControlType::kProbe);
    c.nonce = p.probe_nonce;
    c.path = uint32_t(p.active);
    c.count = p.probe_asks ? 1 : 0;
    c.epoch = p.probe_ask_id;
    send_control(peer, path, c, kControlHeader);
}

/* A message sent in full whose envelope the peer acknowledged but whose completion it has not: either the peer
 * has not received it yet (no matching receive: it is busy elsewhere, which may last), or it has and the
 * acknowledgement was lost with the path. The envelope and chunk checks above see neither (everything was
 * acknowledged or arrived), yet in the second case this rank waits until TCP delivers the lost acknowledgement
 * after a repair (fault-blackhole: both ranks stalled the whole 3 s fault). Only the peer knows: asked on the
 * other path, its answer "completed" while nothing arrives on the active path proves the path lost it. */
void FailoverTransport::check_completion_wait(int peer, uint64_t now) {
    PeerState& p = (*peers_[size_t(peer)]);
    const uint64_t timeout = ms_to_ns(fo_.timeout_ms);
    int other = 1 - p.active;
    const OutMsg* oldest = nullptr;
    for (auto& mp : p.out) {
        if (!mp->posted) break;
        if (!mp->env_acked) return; // the envelope check covers it
        bool sent = true;
        for (TransportRequest* r : mp->reqs) sent = sent && r == nullptr;
        if (sent) {
            oldest = mp.get();
            break;
        }
    }
    uint64_t quiet_since = std::max({oldest != nullptr ? oldest->sent_ns : 0, p.last_ack_ns, p.switch_started_ns,
                                     p.last_rx_ns[p.active]});
    if (oldest == nullptr || p.awaiting_resume || now <= quiet_since || now - quiet_since <= timeout ||
        now < p.next_completion_ask_ns || !usable(peer, other)) {
        if (p.probe_path == other && p.probe_asks) p.probe_path = -1;
        return;
    }
    if (p.probe_path == other && p.probe_asks && p.probe_ask_id == oldest->id && p.probe_answered) {
        p.probe_path = -1;
        if (!p.probe_ask_completed) {
            p.next_completion_ask_ns = now + timeout; // not received yet: ask again later
            return;
        }
        VCCL_INFO(kLogNet, "failover: rank %d -> %d: message %u completed at the peer, its acknowledgement missing for "
                  "%.1f ms and nothing received on path %d since", rank_, peer, oldest->id,
                  double(now - quiet_since) / 1e6, p.active);
        p.path_lost[p.active] = true;
        switch_path(peer, other, p.epoch + 1,
                    "acknowledgements lost: nothing arrives for " + std::to_string(fo_.timeout_ms) + " ms while path " +
                        std::to_string(other) + " answers");
        return;
    }
    if (p.probe_path != other || !p.probe_asks || now - p.probe_sent_ns > timeout) {
        uint32_t id = oldest->id;
        probe(peer, other, now, &id);
    }
}

/* Receives left on an abandoned path end when their data arrives or the path breaks. A switch away from a failed
 * path closes it, which ends them; after a failback the path left works and they end as its data comes in,
 * unless that path fails silently too (the peer closed its side while the rail dropped every packet): then the
 * message, whose data came again on the active path, would wait for them until that rail carries traffic again.
 * So a path whose abandoned receives are still pending a timeout after their message last made progress is
 * closed now (and reconnected as usual). */
void FailoverTransport::close_stuck_drains(int peer, uint64_t now) {
    PeerState& p = (*peers_[size_t(peer)]);
    const uint64_t timeout = ms_to_ns(fo_.timeout_ms);
    size_t stuck[kPaths] = {0, 0};
    uint64_t longest = 0;
    for (auto& kv : p.in) {
        const InMsg* m = kv.second.get();
        if (m->draining.empty()) continue;
        uint64_t since = std::max(m->last_progress_ns, p.switch_started_ns);
        if (now <= since || now - since <= timeout) continue;
        for (const InMsg::Draining& d : m->draining) {
            if (d.path == p.active) continue;
            stuck[d.path]++;
            longest = std::max(longest, now - since);
        }
    }
    for (int path = 0; path < kPaths; ++path) {
        // Closed already (its requests end at the next poll; or they are UCX's own, see close_endpoint): once.
        if (stuck[path] == 0 || paths_[path]->peer_status(peer) != vcclSuccess) continue;
        VCCL_WARN(kLogNet, "failover: rank %d <-> rank %d: closing path %d (%s): %zu receive(s) left there at the switch "
                  "have not ended for %.1f ms", rank_, peer, path, device(path), stuck[path], double(longest) / 1e6);
        reset_connections(peer, path);
        paths_[path]->disconnect(peer);
        path_lost(peer, path, "receives left at a switch did not end");
    }
}

void FailoverTransport::check_health(int peer, uint64_t now) {
    PeerState& p = (*peers_[size_t(peer)]);
    if (p.failed != vcclSuccess) return;
    const uint64_t timeout = ms_to_ns(fo_.timeout_ms);
    // Paths that came back (link up, or a reconnect) become candidates again.
    for (int path = 0; path < kPaths; ++path) {
        if (!links_.up(path) && path == p.active) path_lost(peer, path, "link " + links_.device(path) + " is down");
        if (paths_[path]->peer_status(peer) != vcclSuccess && path == p.active) {
            path_lost(peer, path, "connection failed");
        }
    }
    settle(peer);
    // No usable path: give the peer VCCL_PEER_TIMEOUT_MS, then fail its operations.
    bool any = usable(peer, p.active) || usable(peer, 1 - p.active);
    bool waiting = !p.out.empty() || !p.in.empty() || !p.posted.empty();
    if (!any && waiting) {
        if (p.unusable_since == 0) p.unusable_since = now;
        if (now - p.unusable_since > ms_to_ns(fo_.peer_timeout_ms)) {
            fail_peer(peer, "no path for " + std::to_string(fo_.peer_timeout_ms) + " ms (VCCL_PEER_TIMEOUT_MS)");
            return;
        }
    } else {
        p.unusable_since = 0;
    }
    // Silent loss on the active path, per direction (see the top of this file).
    // Outbound: the oldest envelope still unacknowledged was posted over the timeout ago, and no
    // acknowledgement has arrived since.
    uint64_t out_ref = 0;
    size_t unacked = 0, stalled = 0;
    for (auto& mp : p.out) {
        if (!mp->posted || mp->env_acked) continue;
        if (unacked++ == 0) out_ref = mp->sent_ns;
    }
    out_ref = std::max({out_ref, p.last_ack_ns, p.switch_started_ns});
    // Inbound: a matched message lacks chunks, and nothing at all has arrived on the path for the timeout.
    uint64_t in_ref = std::max(p.last_rx_ns[p.active], p.switch_started_ns);
    for (auto& kv : p.in) {
        const InMsg* m = kv.second.get();
        if (!m->matched || m->received >= m->env.nchunks) continue;
        stalled++;
        in_ref = std::max(in_ref, m->last_progress_ns); // a receive posted late gets its own timeout
    }
    // A reference may be later than `now` (recorded since `now` was read): not silent then.
    bool out_silent = !p.awaiting_resume && unacked > 0 && now > out_ref && now - out_ref > timeout;
    bool in_silent = !p.awaiting_resume && stalled > 0 && now > in_ref && now - in_ref > timeout;
    bool silent = out_silent || in_silent;
    if (p.awaiting_resume && now > p.switch_started_ns && now - p.switch_started_ns > timeout) {
        // Our RESUME or the peer's was lost (both go on the active path; the peer answers a repeated one).
        // Said again every timeout while the path works, and the other path is probed meanwhile.
        silent = true;
        if (usable(peer, p.active) && now - std::max(p.switch_started_ns, p.resume_resent_ns) > timeout) {
            send_resume(peer);
            p.resume_resent_ns = now;
        }
    }
    if (silent) {
        if (p.stall_since == 0) p.stall_since = now;
        int other = 1 - p.active;
        if (p.probe_path == other && p.probe_answered) {
            // Only unacknowledged envelopes, while the peer still receives from us on the active path: the
            // acknowledgements are late (queued behind the peer's data), the path works.
            bool peer_receives = !in_silent && p.probe_peer_idle_ms != kNeverReceived &&
                                 uint64_t(p.probe_peer_idle_ms) * 1000000ull < timeout / 2;
            if (p.awaiting_resume && p.resume_sends >= 2) {
                // Said again a timeout ago and still unanswered, while the peer answers on the other path:
                // the active path is silently dead (a broken standby we moved to, or a primary that failed
                // again right after a failback). Resending on it forever would stall the pair for as long.
                VCCL_INFO(kLogNet, "failover: rank %d -> %d: RESUME sent %u time(s) on path %d, unanswered for %.1f "
                          "ms, while path %d answers", rank_, peer, p.resume_sends, p.active,
                          double(now - p.switch_started_ns) / 1e6, other);
                p.path_lost[p.active] = true;
                switch_path(peer, other, p.epoch + 1,
                            "RESUME unanswered on path " + std::to_string(p.active) + " while path " +
                                std::to_string(other) + " answers");
            } else if (p.awaiting_resume) {
                send_resume(peer); // the peer answers on the other path: it may not have our RESUME
                p.switch_started_ns = now;
            } else if (peer_receives) {
                VCCL_INFO(kLogNet, "failover: rank %d -> %d: %zu envelope(s) unacknowledged for %.1f ms, but the "
                          "peer received from us on path %d %u ms ago: staying", rank_, peer, unacked,
                          double(now - out_ref) / 1e6, p.active, p.probe_peer_idle_ms);
                p.stall_since = 0;
                p.probe_answered = false; // ask again once the timeout has passed
            } else {
                VCCL_INFO(kLogNet, "failover: rank %d -> %d: path %d silent: %zu envelope(s) unacknowledged for "
                          "%.1f ms, %zu message(s) without data, nothing received for %.1f ms, the peer heard "
                          "nothing from us for %s ms",
                          rank_, peer, p.active, unacked, unacked ? double(now - out_ref) / 1e6 : 0.0, stalled,
                          p.last_rx_ns[p.active] ? double(now - std::min(now, p.last_rx_ns[p.active])) / 1e6 : -1.0,
                          p.probe_peer_idle_ms == kNeverReceived ? "ever"
                                                                 : std::to_string(p.probe_peer_idle_ms).c_str());
                p.path_lost[p.active] = true;
                switch_path(peer, other, p.epoch + 1,
                            std::string(in_silent ? "no data arriving" : "no acknowledgement") + " for " +
                                std::to_string(fo_.timeout_ms) + " ms while path " + std::to_string(other) +
                                " answers");
            }
            if (!peer_receives) p.probe_path = -1;
        } else if (usable(peer, other) && (p.probe_path != other || now - p.probe_sent_ns > timeout)) {
            probe(peer, other, now);
        }
        if (p.stall_since != 0 && now - p.stall_since > ms_to_ns(fo_.peer_timeout_ms) && !usable(peer, other)) {
            fail_peer(peer, "no answer for " + std::to_string(fo_.peer_timeout_ms) + " ms");
            return;
        }
    } else {
        p.stall_since = 0;
        if (p.probe_path == 1 - p.active && !p.probe_asks) p.probe_path = -1;
        check_completion_wait(peer, now);
    }
    close_stuck_drains(peer, now);
    if (p.active == 0 && p.hold_shift > 0 && now - p.primary_lost_ns > 60 * ms_to_ns(fo_.failback_ms)) {
        p.hold_shift = 0; // a long healthy stretch forgets earlier flapping
    }
    // Closed or broken paths other than the active one are reconnected (both ranks) every interval, so they
    // can carry probes and, later, traffic. A link that comes back up is tried at once (progress()).
    if (now >= p.next_reconnect_ns) {
        p.next_reconnect_ns = now + ms_to_ns(fo_.failback_ms);
        // A link that just came back must stay up a while first, longer while it flaps (a connect cut by the
        // next drop blocks this thread), unless the active path is down too and this is the way out.
        bool way_out = !links_.up(p.active) || p.path_lost[p.active];
        for (int path = 0; path < kPaths; ++path) {
            if (path == p.active || !links_.up(path) || paths_[path]->peer_status(peer) == vcclSuccess) continue;
            uint64_t settle = std::max<uint64_t>(ms_to_ns(fo_.failback_ms) / 2, 1000000)
                              << std::min(std::max(links_.flap_streak(path) - 2, 0), 4);
            uint64_t stable = links_.stable_for_ns(path, now);
            if (!way_out && stable < settle) {
                p.next_reconnect_ns = std::min(p.next_reconnect_ns, now + (settle - stable));
                continue;
            }
            // And its rail must answer (rail_probe.h): UCX's tcp connect blocks while a rail drops packets.
            RailProbe::Result reach = probe_.poll(path, peer, now, ms_to_ns(fo_.failback_ms) / 2);
            if (reach != RailProbe::Result::Pending) {
                VCCL_INFO(kLogNet, "failover: rank %d -> %d: rail of path %d %s", rank_, peer, path,
                          reach == RailProbe::Result::Reachable     ? "answers: reconnecting"
                          : reach == RailProbe::Result::Unreachable ? "does not answer"
                                                                    : "cannot be probed: reconnecting");
            }
            if (reach == RailProbe::Result::Pending) {
                p.next_reconnect_ns = std::min(p.next_reconnect_ns, now + 1000000);
                continue;
            }
            if (reach == RailProbe::Result::Unreachable) {
                p.next_reconnect_ns = std::min(p.next_reconnect_ns, now + ms_to_ns(fo_.failback_ms) / 4);
                continue;
            }
            if (paths_[path]->reconnect(peer) != vcclSuccess) continue;
            for (int s = 0; s < kControlSlots; ++s) post_control(peer, path, s);
            // Usable again, the primary too: if the active path fails, moving to a reconnected primary beats
            // stalling. Only the voluntary move back (failback, below) waits for probes and the hold time.
            p.path_lost[path] = false;
            p.good_probes = 0;
        }
    }
    // Failback to the primary: the lower rank of the pair decides, after kFailbackProbes probes in a row each
    // answered before the next one (a quarter interval apart) and a hold time that grows with flapping.
    if (now < p.next_failback_ns) return;
    p.next_failback_ns = now + std::max<uint64_t>(ms_to_ns(fo_.failback_ms) / 4, 1000000);
    if (p.active == 0 || rank_ > peer || !fo_.failback || !links_.up(0) || paths_[0]->peer_status(peer) != vcclSuccess) {
        p.good_probes = 0;
        p.failback_nonce = 0;
        return;
    }
    if (p.failback_nonce != 0 && p.failback_answered) {
        p.good_probes++;
    } else if (p.failback_nonce != 0) {
        p.good_probes = 0;
    }
    uint64_t hold = ms_to_ns(fo_.failback_ms) << p.hold_shift;
    if (p.good_probes >= kFailbackProbes && now - p.primary_lost_ns >= hold) {
        p.path_lost[0] = false;
        p.failback_nonce = 0;
        switch_path(peer, 0, p.epoch + 1, "failback: the primary answered " + std::to_string(p.good_probes) + " probes",
                    true);
        return;
    }
    p.failback_nonce = ++nonce_ | (uint64_t(rank_) << 40) | (1ull << 62);
    p.failback_answered = false;
    Control c;
    memset(&c, 0, kControlHeader);
    c.type = uint32_t(ControlType::kProbe);
    c.nonce = p.failback_nonce;
    c.path = uint32_t(p.active);
    send_control(peer, 0, c, kControlHeader);
}

/* ---- requests ---- */

vcclResult_t FailoverTransport::test(TransportRequest* base) {
    auto* app = static_cast<AppRequest*>(base);
    if (app->direct != nullptr) return paths_[0]->test(app->direct);
    switch (app->state) {
    case AppRequest::kDone: return vcclSuccess;
    case AppRequest::kPending: return vcclInProgress;
    case AppRequest::kFailed: break;
    }
    return set_last_error(app->error, "%s", app->error_text.c_str());
}

void FailoverTransport::progress() {
    for (auto& t : paths_) t->progress();
    uint64_t now = now_ns();
    bool links_changed = false;
    if (now >= next_link_poll_ns_) {
        next_link_poll_ns_ = now + 1000000; // netlink is read once a millisecond, not on every poll
        links_changed = links_.poll();
        if (recording_ != nullptr) recording_->tick(); // counters held back by the publication interval
        if (links_changed) {
            for (int path = 0; path < kPaths; ++path) {
                VCCL_WARN(kLogNet, "failover: rank %d: link %s of path %d is %s", rank_,
                          links_.device(path).empty() ? "-" : links_.device(path).c_str(), path,
                          links_.up(path) ? "up" : "down");
            }
        }
    }
    for (int r = 0; r < nranks_; ++r) {
        PeerState& p = (*peers_[size_t(r)]);
        if (!p.failover || p.failed != vcclSuccess) continue;
        poll_control(r);
        poll_sends(r);
        poll_envelopes(r);
        poll_chunks(r);
        if (links_changed && !links_.up(p.active)) {
            path_lost(r, p.active, "link " + links_.device(p.active) + " went down");
        }
        settle(r);
        flush_acks(r);
        if (links_changed) {
            for (int path = 0; path < kPaths; ++path) {
                if (links_.up(path) && path != p.active && p.path_lost[path]) p.path_lost[path] = false;
            }
            p.next_reconnect_ns = 0; // a link that came back is reconnected at the next health check
        }
    }
    if (now >= next_health_ns_) {
        next_health_ns_ = now + ms_to_ns(fo_.timeout_ms) / 8;
        for (int r = 0; r < nranks_; ++r) {
            if ((*peers_[size_t(r)]).failover) check_health(r, now_ns()); // after the polls above
        }
    }
    if (!control_sends_.empty()) reap_control_sends();
}

void FailoverTransport::release(TransportRequest* base) {
    if (base == nullptr) return;
    auto* app = static_cast<AppRequest*>(base);
    if (app->direct != nullptr) {
        paths_[0]->release(app->direct);
        delete app;
        return;
    }
    if (app->state != AppRequest::kPending) {
        delete app;
        return;
    }
    // Still pending (an error elsewhere ended the operation): detach it from its message, which must no
    // longer touch the caller's buffer.
    PeerState& p = *peers_[size_t(app->peer)];
    if (!app->is_recv) {
        for (auto it = p.out.begin(); it != p.out.end(); ++it) {
            if ((*it)->app != app) continue;
            release_sends(it->get());
            p.out.erase(it);
            break;
        }
    } else {
        for (auto it = p.posted.begin(); it != p.posted.end(); ++it) {
            if (it->app != app) continue;
            p.posted.erase(it);
            break;
        }
        for (auto it = p.in.begin(); it != p.in.end(); ++it) {
            InMsg* m = it->second.get();
            if (!m->matched || m->recv.app != app) continue;
            for (TransportRequest*& r : m->reqs) {
                if (r != nullptr) paths_[m->path]->release(r);
                r = nullptr;
            }
            p.in.erase(it);
            break;
        }
    }
    delete app;
}

vcclResult_t FailoverTransport::close(Deadline deadline) {
    if (closed_) return vcclSuccess;
    closed_ = true;
    std::vector<std::unique_ptr<EnvelopeSlot>> drained_slots;
    for (int r = 0; r < nranks_; ++r) {
        PeerState& p = (*peers_[size_t(r)]);
        if (!p.failover) continue;
        for (auto& mp : p.out) release_sends(mp.get());
        for (auto& kv : p.env_slots) {
            if (kv.second->req != nullptr) paths_[kv.second->path]->release(kv.second->req);
        }
        for (auto& kv : p.in) {
            for (TransportRequest* q : kv.second->reqs) {
                if (q != nullptr) paths_[kv.second->path]->release(q);
            }
            for (InMsg::Draining& d : kv.second->draining) paths_[d.path]->release(d.req);
            kv.second->draining.clear();
        }
        // Cancelled envelope receives: released, their buffers kept until the paths have closed (UCX may
        // still write into a receive it had matched).
        for (auto& d : p.slot_drain) {
            if (d.second->req != nullptr) paths_[d.second->path]->release(d.second->req);
            d.second->req = nullptr;
            drained_slots.push_back(std::move(d.second));
        }
        p.slot_drain.clear();
        for (int path = 0; path < kPaths; ++path) {
            for (ControlSlot& s : p.ctrl[path]) {
                if (s.req != nullptr) paths_[path]->release(s.req);
                s.req = nullptr;
            }
        }
        p.out.clear();
        p.env_slots.clear();
        p.in.clear();
    }
    for (auto& c : control_sends_) paths_[c->path]->release(c->req);
    control_sends_.clear();
    vcclResult_t st = vcclSuccess;
    for (auto& t : paths_) {
        vcclResult_t one = t->close(deadline);
        if (st == vcclSuccess) st = one;
    }
    return st;
}

} // namespace
} // namespace failover

vcclResult_t failover_transport_create(Bootstrap* bootstrap, const TransportOptions& options,
                                       const FailoverOptions& fo, std::unique_ptr<Transport>* out) {
    TransportOptions path_options = options;
    path_options.peer_errors_everywhere = fo.every_peer;
    // UCX's tcp transport connects with a blocking connect() by default, also from inside progress when a
    // connection it is still establishing is dropped (uct_tcp_ep_handle_io_err): on a flapping or dead rail
    // that held a rank for seconds (1-6 s stalls in fault-flap, a rank silent for 40 s in fault-both-down).
    // Failover paths therefore use its non-blocking connect (UCX_TCP_CONN_NB=y unless the user set it). It
    // was turned off once because it crashed UCX 1.13; those crashes were the two defects that the socket
    // reset before a forced close now avoids (socket_reset.h). The rail probe still gates reconnects.
    path_options.nonblocking_tcp_connect = true;
    // The primary records the peers it serves directly; the failover layer records the rest per path.
    path_options.unrecorded_peers.assign(size_t(bootstrap->nranks()), true);
    for (int r = 0; r < bootstrap->nranks(); ++r) {
        bool same_host = !options.host_ids.empty() && options.host_ids[size_t(r)] == options.host_ids[size_t(bootstrap->rank())];
        if (r == bootstrap->rank() || (same_host && !fo.every_peer)) path_options.unrecorded_peers[size_t(r)] = false;
    }
    std::unique_ptr<Transport> primary, backup;
    VCCL_RETURN_IF_ERROR(ucx_transport_create(bootstrap, path_options, &primary));
    path_options.telemetry = nullptr;
    path_options.net_devices = fo.backup_devices;
    VCCL_RETURN_IF_ERROR(ucx_transport_create(bootstrap, path_options, &backup));
    auto t = std::make_unique<failover::FailoverTransport>(std::move(primary), std::move(backup), fo, options,
                                                           bootstrap->rank(), bootstrap->nranks());
    VCCL_RETURN_IF_ERROR(t->init_rail_probe(bootstrap));
    VCCL_RETURN_IF_ERROR(t->start());
    *out = std::move(t);
    return vcclSuccess;
}

} // namespace vccl

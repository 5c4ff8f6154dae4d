/* SPDX-License-Identifier: BSD-3-Clause */
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
 *
 * Spray (VCCL_MULTIPATH=spray): the chunks of a message of more than one chunk go over every path in the
 * sender's spray set (the active path, plus the other one while it is healthy), each chunk to the path
 * where it would finish first given that path's measured speed (EWMA of send completions, bytes over busy
 * time) and the bytes already outstanding on it; a slow path thus gets proportionally fewer chunks. The
 * envelope carries the split (one bit per chunk, wire.h) and the receiver posts each chunk receive on the
 * path named there. Envelopes, inline messages, single-chunk messages and control traffic stay on the active
 * path, so small messages travel exactly as in standby mode. Losing the other path (an error, its link
 * going down, or nothing arriving on it while the active path delivers) is a switch onto the same active
 * path: the side that sees it closes the lost path, reposts from each message's first missing chunk on the
 * active path and sends a RESUME marked kResumeSpray; the peer does the same and resends from those points,
 * as for any switch. Losing the active path is an ordinary switch. A lost path, primary or backup, is
 * reconnected as usual and rejoins the spray set after kFailbackProbes answered probes and the failback hold
 * (each rank decides for the chunks it sends); the active path does not move back.
 */
#ifndef VCCL_TRANSPORT_FAILOVER_FAILOVER_TRANSPORT_H_
#define VCCL_TRANSPORT_FAILOVER_FAILOVER_TRANSPORT_H_

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

/* The transport's state and class, shared by its two source files: failover_transport.cc (requests, data and
 * control traffic, close, the factory) and failover_recovery.cc (switching paths, RESUME, health checks,
 * probes, failback). Internal to libvccl (and tests/unit/test_failover_sim). */
namespace vccl {
namespace failover {

constexpr int kPaths = 2;
constexpr uint32_t kSendWindow = 64;     // messages in flight per peer: a RESUME list always fits
constexpr uint32_t kEnvelopeWindow = kSendWindow; // envelope receives posted ahead: every envelope in flight is acknowledged on arrival
constexpr int kControlSlots = 4;         // control receives kept posted per peer and path
constexpr int kFailbackProbes = 3;       // answered probes in a row before traffic returns to the primary
constexpr int kMaxHoldShift = 4;         // failback hold grows up to 16 x the interval for a flapping primary
static_assert(kSendWindow <= kControlItems, "a RESUME must be able to name every message in flight");

inline uint64_t ms_to_ns(int ms) { return uint64_t(ms > 0 ? ms : 1) * 1000000ull; }

/* Message `id` is below `frontier` (an "every id below arrived" mark), within the ids that can still be in
 * flight: ids wrap, so only the 4 x kSendWindow ids just below count. */
inline bool id_below(uint32_t id, uint32_t frontier) { return ((frontier - id - 1) & kIdMask) < kSendWindow * 4; }

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
    int peer = -1;
    const char* buf = nullptr;
    size_t bytes = 0;
    MemType mem = MemType::Host;
    uint64_t chunk_bytes = 0;
    uint32_t nchunks = 0;
    std::vector<char> envelope; // Envelope + inline data
    bool posted = false;
    int path = -1;
    std::vector<TransportRequest*> reqs; // inner sends: [0] envelope on `path`, [1 + c] chunk c on chunk_path[c]
    std::vector<uint8_t> chunk_path;     // the path of each chunk (spray: the split the envelope names)
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
    std::vector<TransportRequest*> reqs; // chunk receives on chunk_path[c], null once received
    std::vector<uint8_t> chunk_path;     // from the envelope's split (spray) or the active path
    uint64_t chunks_posted_ns = 0;       // when the chunk receives were last (re)posted
    uint64_t arrived_ns = 0;             // the envelope arrived (the peer has begun sending the chunks)
    uint64_t path_start[kPaths] = {0, 0}, path_last[kPaths] = {0, 0}, path_bytes[kPaths] = {0, 0};
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

/* Measured speed of one path towards one peer (the sender's side, for spraying). */
struct PathRate {
    double bps = 0;            // EWMA of bytes per second while busy; 0: not measured yet
    uint64_t outstanding = 0;  // chunk bytes posted and not yet completed
    uint64_t win_start = 0;    // the current measuring window began (a completion, or a post onto an idle path)
    uint64_t win_bytes = 0;    // bytes completed in it
    double peer_bps = 0;       // the receiver's measurement (kAck), preferred: send completions over TCP come
                               // early while the socket buffers fill, arrivals do not
    // Receiving side: what arrives from the peer on this path, reported back in acknowledgements.
    double rx_bps = 0;
    uint64_t rx_last_done = 0; // last chunk completed here
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
    bool switch_spray = false;      // the last switch kept the active path: the other one was lost (spray)
    uint64_t spray_probe_ns = 0;    // the active path was last probed for the spray silence check
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
    RailProbe::Result rail_seen[kPaths] = {RailProbe::Result::Unknown, RailProbe::Result::Unknown}; // last answer
    uint64_t rails_silent_since = 0; // waiting, nothing heard, and neither rail answering since
    std::string lost_cause;      // the active path was lost (path_lost): settle() switches
    // Failback.
    int good_probes = 0;
    uint64_t next_failback_ns = 0;
    int hold_shift = 0;
    uint64_t primary_lost_ns = 0;
    uint64_t failback_nonce = 0;
    bool failback_answered = false;
    uint64_t next_reconnect_ns = 0;
    int failback_path = 0;       // the path failback (standby) or rejoin (spray) probes
    // Spray.
    bool spray_live[kPaths] = {true, true}; // in the spray set (this rank's chunks may go there)
    std::string spray_lost_cause;           // the other path was lost while in service: settle() resprays
    bool spray_forced = false;              // ... or the peer sends chunks on a path unusable here
    uint64_t spray_lost_ns[kPaths] = {0, 0};
    PathRate rate[kPaths];
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
                !p.ack_done.empty() || p.ack_upto_dirty || p.awaiting_resume ||
                (!fo_.spray && p.active != 0 && fo_.failback) || (fo_.spray && !p.spray_live[1 - p.active]) ||
                p.path_lost[0] || p.path_lost[1] || p.stall_since != 0 || p.probe_path >= 0) {
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
    void release_sends(OutMsg* m, bool delivered = false);
    void poll_sends(int peer);
    void complete_out(int peer, uint32_t id);
    // Receiving.
    void post_envelopes(int peer);
    void poll_envelopes(int peer);
    void envelope_arrived(int peer, uint32_t id, const char* data, size_t len);
    void match(int peer, InMsg* m, const PostedRecv& r);
    void post_chunks(int peer, InMsg* m, uint32_t from, bool move);
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
    void check_health(int peer, uint64_t now); // the steps below, in this order
    bool check_paths(int peer, uint64_t now);
    bool check_silence(int peer, uint64_t now);
    void reconnect_paths(int peer, uint64_t now);
    /* Failback to the primary (the lower rank of the pair decides, after probes in a row and a hold time). */
    void try_failback(int peer, uint64_t now);
    void switch_path(int peer, int path, uint32_t epoch, const std::string& cause, bool failback = false);
    // Spray.
    bool spray_usable(int peer, int path) {
        return fo_.spray && (*peers_[size_t(peer)]).spray_live[path] && usable(peer, path);
    }
    bool carries(int peer, int path) const; // chunk requests of this peer outstanding on `path`
    void plan_spray(int peer, OutMsg* m);
    void rate_post(int peer, int path, uint64_t bytes);
    void rate_done(int peer, int path, uint64_t bytes, bool completed);
    int out_path(const OutMsg* m, size_t i) const { return i == 0 ? m->path : int(m->chunk_path[i - 1]); }
    size_t out_len(const OutMsg* m, size_t i) const {
        return i == 0 ? m->envelope.size() : std::min<size_t>(m->chunk_bytes, m->bytes - (i - 1) * m->chunk_bytes);
    }
    void check_spray_silence(int peer, uint64_t now);
    void try_rejoin(int peer, uint64_t now);
    // The answered-probe count both of them go by (failover_recovery.cc).
    void reset_return_probes(PeerState& p);
    void count_return_probe(PeerState& p);
    void send_return_probe(int peer, int path);
    void send_resume(int peer);
    void apply_resume(int peer, const Control& c);
    void path_lost(int peer, int path, const std::string& cause);
    void settle(int peer);
    void fail_peer(int peer, const std::string& why);
    void probe(int peer, int path, uint64_t now, const uint32_t* ask_id = nullptr);
    void check_completion_wait(int peer, uint64_t now);
    void check_waiting_peer(int peer, uint64_t now, bool waiting);
    RailProbe::Result poll_rail(int peer, int path, uint64_t now, uint64_t timeout_ns);
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

} // namespace failover
} // namespace vccl

#endif

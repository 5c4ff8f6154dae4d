/* SPDX-License-Identifier: BSD-3-Clause */
/* Failover transport (failover_transport.h): leaving a path (switch_path, RESUME), losing one or a peer, the
 * periodic health check (silence, probes, reconnects) and failback to the primary. */
#include "transport/failover/failover_transport.h"

namespace vccl {
namespace failover {

/* ---- switching ---- */

namespace {

/* The telemetry group of a switch's cause text (the texts are made in this folder: keep the two in step). */
telemetry::SwitchCause switch_cause_of(const std::string& cause) {
    auto has = [&](const char* s) { return cause.find(s) != std::string::npos; };
    if (cause.compare(0, 5, "link ") == 0) return telemetry::SwitchCause::LinkDown;
    if (cause.compare(0, 8, "the peer") == 0) return telemetry::SwitchCause::Peer;
    if (has("acknowledgement") || has("no data arriving") || has("unanswered") || has("did not end")) {
        return telemetry::SwitchCause::Timeout;
    }
    if (has(": ") || has("failed")) return telemetry::SwitchCause::Error; // "poll_sends: <transport error>"
    return telemetry::SwitchCause::Other;
}

} // namespace

/* A switch to `path`. Spray: `path` may be the active path itself (a respray): the other path was lost, the
 * active one stays, and only the chunks move (the same RESUME exchange, marked kResumeSpray). */
void FailoverTransport::switch_path(int peer, int path, uint32_t epoch, const std::string& cause, bool failback) {
    PeerState& p = (*peers_[size_t(peer)]);
    int old = p.active;
    bool respray = path == old;
    int lost = respray ? 1 - old : old;
    p.active = path;
    p.epoch = epoch;
    p.switch_started_ns = now_ns();
    p.switch_cause = cause;
    p.switch_failback = failback;
    p.switch_spray = respray;
    p.stall_since = 0;
    p.probe_path = -1;
    p.good_probes = 0;
    if (respray) {
        VCCL_WARN(kLogNet, "failover: rank %d <-> rank %d: path %d (%s) lost, its chunks move to path %d (%s): %s",
                  rank_, peer, lost, device(lost), path, device(path), cause.c_str());
        telemetry_count_failover(telemetry_, peer, lost, switch_cause_of(cause));
        telemetry_path_event(telemetry_, peer, lost, telemetry::PathState::Down);
    } else {
        VCCL_WARN(kLogNet, "failover: rank %d <-> rank %d: leaving path %d (%s) for path %d (%s): %s", rank_, peer,
                  old, device(old), path, device(path), cause.c_str());
        telemetry_path_switch(telemetry_, peer, old, path, switch_cause_of(cause), failback);
        if (fo_.spray && !failback) telemetry_path_event(telemetry_, peer, old, telemetry::PathState::Down);
    }
    if (!fo_.spray && old == 0 && path != 0) {
        p.primary_lost_ns = now_ns();
        if (p.hold_shift < kMaxHoldShift) p.hold_shift++;
    }
    if (fo_.spray && !failback) {
        // Out of the spray set until it rejoins (try_rejoin); its chunk sends are given up here (the RESUME
        // exchange resends them), so that their failures at the close below do not count as a new loss.
        p.spray_live[lost] = false;
        p.spray_lost_ns[lost] = now_ns();
        if (p.hold_shift < kMaxHoldShift) p.hold_shift++;
        for (auto& mp : p.out) {
            OutMsg* m = mp.get();
            for (size_t i = 0; i < m->reqs.size(); ++i) {
                if (m->reqs[i] == nullptr || out_path(m, i) != lost) continue;
                if (i > 0) rate_done(peer, lost, out_len(m, i), false);
                paths_[lost]->release(m->reqs[i]);
                m->reqs[i] = nullptr;
            }
        }
    }
    // Receiver side: every receive moves to the new path.
    if (!respray) {
        for (auto& kv : p.env_slots) {
            if (kv.second->req == nullptr) continue;
            paths_[kv.second->path]->cancel(kv.second->req);
            p.slot_drain.emplace_back(kv.first, std::move(kv.second));
        }
        p.env_slots.clear();
    }
    // Leaving a failed path: close it, so that receives UCX had already matched there end now instead of
    // writing into buffers later, or never ending (the peer closed its side, and the rail may drop the news).
    // Also when only the peer saw the failure. A healthy path left by failback drains by itself.
    if (!failback) {
        reset_connections(peer, lost);
        paths_[lost]->disconnect(peer);
        p.path_lost[lost] = true;
    }
    if (!respray) {
        p.next_post_env = p.next_env_id;
        post_envelopes(peer);
    }
    for (auto& kv : p.in) {
        InMsg* m = kv.second.get();
        if (!m->matched) {
            // The peer resends it in full on the active path (its RESUME point is 0), whatever its split said.
            std::fill(m->chunk_path.begin(), m->chunk_path.end(), uint8_t(kPaths));
            continue;
        }
        uint32_t first = 0;
        while (first < m->env.nchunks && m->got[first]) ++first;
        post_chunks(peer, m, first, true);
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
    c.nonce = (p.awaiting_resume ? kResumeWantsAnswer : 0) | (p.switch_failback ? kResumeFailback : 0) |
              (p.switch_spray ? kResumeSpray : 0);
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
        if (path != p.active) {
            switch_path(peer, path, c.epoch, failback ? "the peer failed back" : "the peer switched", failback);
        } else if (fo_.spray && (c.nonce & kResumeSpray) != 0) {
            switch_path(peer, path, c.epoch, "the peer lost path " + std::to_string(1 - path));
        }
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
                m->chunk_path[ch] = uint8_t(p.active);
                record_post(peer, m->path, telemetry::Dir::Send, len, &m->post_ns[1 + ch]);
                if (t->isend(peer, wire_tag(Kind::kData, m->id, ch), m->buf + off, len, m->mem, false,
                             &m->reqs[1 + ch]) != vcclSuccess) {
                    path_lost(peer, p.active, std::string("apply_resume: ") + last_error_message());
                    return;
                }
                rate_post(peer, p.active, len);
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
    // Spray: the other path in service (in the spray set, or carrying chunks) was lost: settle() resprays.
    if (fo_.spray && path != p.active && p.spray_lost_cause.empty() && (p.spray_live[path] || carries(peer, path))) {
        p.spray_lost_cause = cause;
    }
}

void FailoverTransport::settle(int peer) {
    PeerState& p = *peers_[size_t(peer)];
    if (!p.spray_lost_cause.empty() && p.lost_cause.empty()) {
        std::string cause;
        cause.swap(p.spray_lost_cause);
        int other = 1 - p.active;
        bool forced = p.spray_forced;
        p.spray_forced = false;
        if (p.failed == vcclSuccess && (p.path_lost[other] || forced) &&
            (p.spray_live[other] || carries(peer, other) || forced)) {
            switch_path(peer, p.active, p.epoch + 1, cause);
        }
        return;
    }
    p.spray_lost_cause.clear(); // the active path is lost too: the switch below closes the other one's use
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
    telemetry_count_failover(telemetry_, peer, p.active, telemetry::SwitchCause::Unreachable); // nowhere to go
    for (int path = 0; path < kPaths; ++path) telemetry_path_event(telemetry_, peer, path, telemetry::PathState::Down);
    // Close the peer's paths before its operations are reported failed: receives UCX has already matched
    // cannot be cancelled, and an open path would let them write into buffers the caller may free or reuse
    // once it sees the error. A failed peer is never reconnected (check_health skips it).
    for (int path = 0; path < kPaths; ++path) {
        if (paths_[path]->peer_status(peer) == vcclSuccess) reset_connections(peer, path);
        paths_[path]->disconnect(peer);
        p.path_lost[path] = true;
    }
    for (auto& mp : p.out) {
        release_sends(mp.get());
        complete_app(mp->app, p.failed, p.failed_text);
    }
    p.out.clear();
    for (auto& kv : p.in) {
        InMsg* m = kv.second.get();
        for (size_t c = 0; c < m->reqs.size(); ++c) {
            if (m->reqs[c] != nullptr) paths_[m->chunk_path[c]]->release(m->reqs[c]);
            m->reqs[c] = nullptr;
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

RailProbe::Result FailoverTransport::poll_rail(int peer, int path, uint64_t now, uint64_t timeout_ns) {
    RailProbe::Result r = probe_.poll(path, peer, now, timeout_ns);
    if (r != RailProbe::Result::Pending) (*peers_[size_t(peer)]).rail_seen[path] = r;
    return r;
}

/* The silence checks watch what this rank expects to arrive: acknowledgements of its envelopes and the data of
 * matched messages. A rank that only waits (its receives have no envelope yet, its sends were acknowledged)
 * expects nothing, since the peer may simply not have sent yet; so with both rails dropping everything it
 * waited for VCCL_OP_TIMEOUT_MS (10 minutes) while its peer, which had data in flight, failed it in seconds.
 * The peer's kernel answers the rail probe whatever its process is doing, so a waiting rank that hears nothing
 * and gets no answer on either rail for VCCL_PEER_TIMEOUT_MS fails the peer. Rails without an IPv4 netdev
 * cannot be probed (Unknown): then only VCCL_OP_TIMEOUT_MS ends the wait, as before. */
void FailoverTransport::check_waiting_peer(int peer, uint64_t now, bool waiting) {
    PeerState& p = (*peers_[size_t(peer)]);
    const uint64_t timeout = ms_to_ns(fo_.timeout_ms);
    uint64_t heard = std::max({p.last_rx_ns[0], p.last_rx_ns[1], p.switch_started_ns});
    if (!waiting || now <= heard || now - heard <= timeout) {
        p.rails_silent_since = 0;
        return;
    }
    bool silent = true;
    for (int path = 0; path < kPaths; ++path) {
        if (!links_.up(path)) continue; // a link down answers nothing
        poll_rail(peer, path, now, timeout);
        if (p.rail_seen[path] != RailProbe::Result::Unreachable) silent = false;
    }
    if (!silent) {
        p.rails_silent_since = 0;
        return;
    }
    if (p.rails_silent_since == 0) p.rails_silent_since = now;
    if (now - p.rails_silent_since > ms_to_ns(fo_.peer_timeout_ms)) {
        fail_peer(peer, "nothing received for " + std::to_string((now - heard) / 1000000) +
                            " ms and neither rail has answered a probe for " + std::to_string(fo_.peer_timeout_ms) +
                            " ms");
    }
}

void FailoverTransport::check_health(int peer, uint64_t now) {
    PeerState& p = (*peers_[size_t(peer)]);
    if (p.failed != vcclSuccess) return;
    if (!check_paths(peer, now)) return;
    if (!check_silence(peer, now)) return;
    close_stuck_drains(peer, now);
    if (!fo_.spray && p.active == 0 && p.hold_shift > 0 && now - p.primary_lost_ns > 60 * ms_to_ns(fo_.failback_ms)) {
        p.hold_shift = 0; // a long healthy stretch forgets earlier flapping
    }
    if (fo_.spray && p.hold_shift > 0 && p.spray_live[0] && p.spray_live[1] &&
        now - std::max(p.spray_lost_ns[0], p.spray_lost_ns[1]) > 60 * ms_to_ns(fo_.failback_ms)) {
        p.hold_shift = 0;
    }
    reconnect_paths(peer, now);
    if (fo_.spray) {
        check_spray_silence(peer, now);
        settle(peer);
        try_rejoin(peer, now);
    } else {
        try_failback(peer, now);
    }
}

/* Spray: chunks wait on the other path and nothing has arrived there for VCCL_FAILOVER_TIMEOUT_MS. A slow path
 * still delivers (each chunk within the timeout, as it gets fewer of them); a silent one is lost, once the
 * active path shows the peer is alive (anything received there within the timeout, else it is probed). */
void FailoverTransport::check_spray_silence(int peer, uint64_t now) {
    PeerState& p = (*peers_[size_t(peer)]);
    // Twice the timeout: a rate-limited rail that drops packets (tbf) can leave TCP in a retransmission timeout
    // (200 ms at least) while it still works; only a path that stays silent longer is taken out.
    const uint64_t timeout = 2 * ms_to_ns(fo_.timeout_ms);
    int other = 1 - p.active;
    if (p.awaiting_resume || !p.lost_cause.empty() || p.path_lost[other]) return;
    uint64_t ref = std::max(p.last_rx_ns[other], p.switch_started_ns);
    size_t waiting = 0;
    for (auto& kv : p.in) {
        const InMsg* m = kv.second.get();
        if (!m->matched) continue;
        for (size_t c = 0; c < m->reqs.size(); ++c) {
            if (m->reqs[c] == nullptr || m->chunk_path[c] != other) continue;
            waiting++;
            ref = std::max(ref, m->chunks_posted_ns);
            break;
        }
    }
    if (waiting == 0 || now <= ref || now - ref <= timeout) return;
    uint64_t heard = p.last_rx_ns[p.active];
    if (heard > now || now - heard > timeout) {
        if (now - p.spray_probe_ns > timeout / 2) { // anything received on the active path counts, the reply too
            p.spray_probe_ns = now;
            Control c;
            memset(&c, 0, kControlHeader);
            c.type = uint32_t(ControlType::kProbe);
            c.nonce = ++nonce_ | (uint64_t(rank_) << 40) | (1ull << 61);
            c.path = uint32_t(p.active);
            send_control(peer, p.active, c, kControlHeader);
        }
        return;
    }
    VCCL_INFO(kLogNet, "failover: rank %d -> %d: %zu message(s) wait for chunks on path %d, nothing received there for "
              "%.1f ms while path %d delivers", rank_, peer, waiting, other, double(now - ref) / 1e6, p.active);
    path_lost(peer, other, "no data arriving on path " + std::to_string(other) + " for " +
                               std::to_string(2 * fo_.timeout_ms) + " ms while path " + std::to_string(p.active) +
                               " delivers");
}

/* Spray: a lost path that was reconnected rejoins the spray set after kFailbackProbes probes in a row, each
 * answered before the next, and the failback hold (doubled for each loss, as for failback). Each rank decides
 * for the chunks it sends; the receiver follows the envelopes. */
void FailoverTransport::try_rejoin(int peer, uint64_t now) {
    PeerState& p = (*peers_[size_t(peer)]);
    if (now < p.next_failback_ns) return;
    p.next_failback_ns = now + std::max<uint64_t>(ms_to_ns(fo_.failback_ms) / 4, 1000000);
    int other = 1 - p.active;
    if (p.spray_live[other] || p.awaiting_resume || !links_.up(other) || p.path_lost[other] ||
        paths_[other]->peer_status(peer) != vcclSuccess) {
        reset_return_probes(p);
        return;
    }
    count_return_probe(p);
    uint64_t hold = ms_to_ns(fo_.failback_ms) << p.hold_shift;
    if (p.good_probes >= kFailbackProbes && now - p.spray_lost_ns[other] >= hold) {
        p.spray_live[other] = true;
        p.good_probes = 0;
        p.failback_nonce = 0;
        uint64_t outstanding = p.rate[other].outstanding;
        p.rate[other] = PathRate(); // measured afresh
        p.rate[other].outstanding = outstanding;
        VCCL_WARN(kLogNet, "failover: rank %d <-> rank %d: path %d (%s) rejoins the spray set (%d probes answered)",
                  rank_, peer, other, device(other), kFailbackProbes);
        telemetry_path_event(telemetry_, peer, other, telemetry::PathState::Up);
        return;
    }
    send_return_probe(peer, other);
}

/* Paths that came back become candidates again; with no usable path the peer gets VCCL_PEER_TIMEOUT_MS. False when
 * the peer failed. */
bool FailoverTransport::check_paths(int peer, uint64_t now) {
    PeerState& p = (*peers_[size_t(peer)]);
    // Paths that came back (link up, or a reconnect) become candidates again.
    for (int path = 0; path < kPaths; ++path) {
        if (!links_.up(path) && path == p.active) path_lost(peer, path, "link " + links_.device(path) + " is down");
        if (paths_[path]->peer_status(peer) != vcclSuccess && path == p.active) {
            path_lost(peer, path, "connection failed");
        }
        if (fo_.spray && path != p.active && (p.spray_live[path] || carries(peer, path))) {
            if (!links_.up(path)) path_lost(peer, path, "link " + links_.device(path) + " is down");
            else if (paths_[path]->peer_status(peer) != vcclSuccess) path_lost(peer, path, "connection failed");
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
            return false;
        }
    } else {
        p.unusable_since = 0;
    }
    check_waiting_peer(peer, now, waiting);
    return p.failed == vcclSuccess;
}

/* Silent loss on the active path, and what follows from it: probes of the other path, a switch, or the peer's
 * failure after VCCL_PEER_TIMEOUT_MS without an answer (false then). */
bool FailoverTransport::check_silence(int peer, uint64_t now) {
    PeerState& p = (*peers_[size_t(peer)]);
    const uint64_t timeout = ms_to_ns(fo_.timeout_ms);
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
        if (fo_.spray) {
            // Waiting only for chunks on the other path: check_spray_silence's case.
            bool on_active = false, pending = false;
            for (size_t c = 0; c < m->reqs.size(); ++c) {
                if (m->reqs[c] == nullptr) continue;
                pending = true;
                on_active = on_active || m->chunk_path[c] == p.active;
            }
            if (pending && !on_active) continue;
        }
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
        // Silent for VCCL_PEER_TIMEOUT_MS. An answer on the other path would have moved the pair there (or shown
        // the active path works, which ends the stall), so the peer answers on no path: both rails dropping
        // everything, or a peer that hangs. Waiting on would only end at VCCL_OP_TIMEOUT_MS (10 minutes).
        if (p.stall_since != 0 && now - p.stall_since > ms_to_ns(fo_.peer_timeout_ms)) {
            fail_peer(peer, "no answer on " + std::string(usable(peer, other) ? "either path" : "the only usable path") +
                                " for " + std::to_string(fo_.peer_timeout_ms) + " ms");
            return false;
        }
    } else {
        p.stall_since = 0;
        if (p.probe_path == 1 - p.active && !p.probe_asks) p.probe_path = -1;
        check_completion_wait(peer, now);
    }
    return true;
}

/* Closed or broken paths other than the active one, reconnected once their link is stable and their rail answers. */
void FailoverTransport::reconnect_paths(int peer, uint64_t now) {
    PeerState& p = (*peers_[size_t(peer)]);
    // Both ranks reconnect every interval, so that such paths can carry probes and, later, traffic. A link that
    // comes back up is tried at once (progress()).
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
            RailProbe::Result reach = poll_rail(peer, path, now, ms_to_ns(fo_.failback_ms) / 2);
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
}

/* Failback to the primary: the lower rank of the pair decides, after kFailbackProbes probes in a row each answered
 * before the next one (a quarter interval apart) and a hold time that grows with flapping. */
void FailoverTransport::try_failback(int peer, uint64_t now) {
    PeerState& p = (*peers_[size_t(peer)]);
    if (now < p.next_failback_ns) return;
    p.next_failback_ns = now + std::max<uint64_t>(ms_to_ns(fo_.failback_ms) / 4, 1000000);
    if (p.active == 0 || rank_ > peer || !fo_.failback || !links_.up(0) || paths_[0]->peer_status(peer) != vcclSuccess) {
        reset_return_probes(p);
        return;
    }
    count_return_probe(p);
    uint64_t hold = ms_to_ns(fo_.failback_ms) << p.hold_shift;
    if (p.good_probes >= kFailbackProbes && now - p.primary_lost_ns >= hold) {
        p.path_lost[0] = false;
        p.failback_nonce = 0;
        switch_path(peer, 0, p.epoch + 1, "failback: the primary answered " + std::to_string(p.good_probes) + " probes",
                    true);
        return;
    }
    send_return_probe(peer, 0);
}

/* The probes that let a path back in (failback to the primary, a lost spray path rejoining): kFailbackProbes
 * in a row, each answered before the next is sent. */
void FailoverTransport::reset_return_probes(PeerState& p) {
    p.good_probes = 0;
    p.failback_nonce = 0;
}

void FailoverTransport::count_return_probe(PeerState& p) {
    if (p.failback_nonce == 0) return; // none sent yet
    p.good_probes = p.failback_answered ? p.good_probes + 1 : 0;
}

void FailoverTransport::send_return_probe(int peer, int path) {
    PeerState& p = (*peers_[size_t(peer)]);
    p.failback_nonce = ++nonce_ | (uint64_t(rank_) << 40) | (1ull << 62);
    p.failback_path = path;
    p.failback_answered = false;
    Control c;
    memset(&c, 0, kControlHeader);
    c.type = uint32_t(ControlType::kProbe);
    c.nonce = p.failback_nonce;
    c.path = uint32_t(p.active);
    send_control(peer, path, c, kControlHeader);
}
} // namespace failover
} // namespace vccl

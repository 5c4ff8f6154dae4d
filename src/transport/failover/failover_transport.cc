/* SPDX-License-Identifier: BSD-3-Clause */
/* Failover transport (failover_transport.h): requests, sending and receiving messages in chunks, the control
 * traffic, close, and the factory. Switching, health checks and failback: failover_recovery.cc. Spray's
 * split of a message over the paths and the speeds it uses: failover_spray.cc. */
#include "transport/failover/failover_transport.h"

namespace vccl {
namespace failover {

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
        telemetry_path_event(telemetry_, r, 1, fo_.spray ? telemetry::PathState::Up : telemetry::PathState::Standby);
    }
    VCCL_INFO(kLogNet, "failover: rank %d: %s mode, primary %s, backup %s, link monitor on %s/%s", rank_,
              fo_.spray ? "spray" : "standby", device(0), device(1),
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
    m->peer = peer;
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
    m->chunk_path.assign(m->nchunks, uint8_t(path));
    if (m->nchunks > 0) {
        // Spray: the split is chosen now and written after the envelope (a message posted again after a
        // switch gets a new one, over the paths usable then).
        Envelope env;
        memcpy(&env, m->envelope.data(), sizeof(env));
        m->envelope.resize(sizeof(Envelope));
        env.flags = 0;
        if (m->nchunks > 1 && spray_usable(peer, 1 - path)) {
            plan_spray(peer, m);
            env.flags = kEnvelopeSplit;
            m->envelope.resize(sizeof(Envelope) + split_bytes(m->nchunks), 0);
            for (uint32_t c = 0; c < m->nchunks; ++c) {
                if (m->chunk_path[c] == 1) m->envelope[sizeof(Envelope) + c / 8] |= char(1u << (c % 8));
            }
        }
        memcpy(m->envelope.data(), &env, sizeof(env));
    }
    record_post(peer, path, telemetry::Dir::Send, m->envelope.size(), &m->post_ns[0]);
    vcclResult_t st = paths_[path]->isend(peer, wire_tag(Kind::kEnvelope, m->id, 0), m->envelope.data(),
                                          m->envelope.size(), MemType::Host, false, &m->reqs[0]);
    int failed_path = path;
    for (uint32_t c = 0; st == vcclSuccess && c < m->nchunks; ++c) {
        size_t off = size_t(c) * m->chunk_bytes;
        size_t len = std::min<size_t>(m->chunk_bytes, m->bytes - off);
        int cp = m->chunk_path[c];
        record_post(peer, cp, telemetry::Dir::Send, len, &m->post_ns[1 + c]);
        st = paths_[cp]->isend(peer, wire_tag(Kind::kData, m->id, c), m->buf + off, len, m->mem, false,
                               &m->reqs[1 + c]);
        if (st == vcclSuccess) rate_post(peer, cp, len);
        failed_path = cp;
    }
    if (st != vcclSuccess) {
        // The path refused the post (its connection is gone): the health check moves the peer to the
        // other path (spray: takes the path out of the spray set), and the RESUME exchange sends the rest.
        path_lost(peer, failed_path, std::string("posting failed: ") + std::string("post_message: ") +
                                         last_error_message());
    }
    return vcclSuccess;
}

void FailoverTransport::release_sends(OutMsg* m, bool delivered) {
    for (size_t i = 0; i < m->reqs.size(); ++i) {
        if (m->reqs[i] == nullptr) continue;
        // The receiver acknowledged the whole message: a send not polled yet is done (recorded and measured
        // now; the acknowledgement often comes before the last chunks' completions are polled).
        if (delivered) {
            record_done(m->peer, out_path(m, i), telemetry::Dir::Send, out_len(m, i), m->post_ns[i], m->ttag, true);
        }
        if (i > 0) rate_done(m->peer, out_path(m, i), out_len(m, i), delivered);
        paths_[out_path(m, i)]->release(m->reqs[i]);
        m->reqs[i] = nullptr;
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
            int path = out_path(m, i);
            vcclResult_t st = paths_[path]->test(r);
            if (st == vcclInProgress) continue;
            size_t len = out_len(m, i);
            record_done(peer, path, telemetry::Dir::Send, len, m->post_ns[i], m->ttag, st == vcclSuccess);
            if (i > 0) rate_done(peer, path, len, st == vcclSuccess);
            paths_[path]->release(r);
            m->reqs[i] = nullptr;
            // A send left on a path traffic has moved from fails when that path is closed; the path may be
            // reconnected by now, and its own state (peer_status) tells whether it works. Only the failures
            // of the paths in use (the active one; spray: the spray set) say something about them.
            if (st != vcclSuccess && (path == p.active || (fo_.spray && p.spray_live[path]))) {
                path_lost(peer, path, std::string("poll_sends: ") + last_error_message());
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
        release_sends(m, true);
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
    bool split = (env.flags & kEnvelopeSplit) != 0 && env.nchunks > 0;
    if (split && len < sizeof(env) + split_bytes(env.nchunks)) return;
    auto m = std::make_unique<InMsg>();
    m->id = id;
    m->env = env;
    m->arrived_ns = now_ns();
    if (env.nchunks == 0) m->inline_data.assign(data + sizeof(env), data + len);
    // The chunks' paths: the sender's split, else the active path at match time (kPaths).
    m->chunk_path.assign(env.nchunks, uint8_t(kPaths));
    for (uint32_t c = 0; split && c < env.nchunks; ++c) {
        m->chunk_path[c] = uint8_t((uint8_t(data[sizeof(env) + c / 8]) >> (c % 8)) & 1);
    }
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
    post_chunks(peer, m, 0, false);
}

/* Posts the chunk receives from `from` on. `move` (a switch): every receive still posted is cancelled and
 * all of them go to the active path, where the peer resends from `from`. Otherwise each chunk goes to the path
 * the sender's split names, or the active path where the envelope names none or a path unusable here (a
 * message the peer sent before it learnt of the loss: the RESUME exchange has it sent again in full). */
void FailoverTransport::post_chunks(int peer, InMsg* m, uint32_t from, bool move) {
    PeerState& p = *peers_[size_t(peer)];
    for (uint32_t c = 0; move && c < m->env.nchunks; ++c) {
        if (m->reqs[c] == nullptr) continue;
        paths_[m->chunk_path[c]]->cancel(m->reqs[c]);
        m->draining.push_back({int(m->chunk_path[c]), c, m->reqs[c]});
        m->reqs[c] = nullptr;
    }
    m->last_progress_ns = m->chunks_posted_ns = now_ns();
    for (uint32_t c = from; c < m->env.nchunks; ++c) {
        // Chunks from `from` on are all (re)sent by the peer, also those that already arrived: receive
        // them again into the same bytes rather than leave duplicates unmatched.
        size_t off = size_t(c) * m->env.chunk_bytes;
        size_t len = std::min<size_t>(m->env.chunk_bytes, m->env.bytes - off);
        int cp = m->chunk_path[c];
        if (!move && cp < kPaths && cp != p.active && !usable(peer, cp) && p.failed == vcclSuccess &&
            now_ns() - p.switch_started_ns > 2 * ms_to_ns(fo_.timeout_ms) && p.spray_lost_cause.empty()) {
            // Not a message sent before the peer learnt of our last switch (that one it sends again in full):
            // the peer sprays on a path this side cannot use. A respray tells it and has the chunks resent.
            p.spray_lost_cause = "the peer sends chunks on path " + std::to_string(cp) + ", unusable here";
            p.spray_forced = true;
        }
        if (move || cp >= kPaths || !usable(peer, cp)) cp = p.active;
        m->chunk_path[c] = uint8_t(cp);
        record_post(peer, cp, telemetry::Dir::Recv, len, &m->post_ns[c]);
        if (paths_[cp]->irecv(peer, wire_tag(Kind::kData, m->id, c), m->recv.buf + off, len, m->recv.mem,
                              &m->reqs[c]) != vcclSuccess) {
            path_lost(peer, cp, std::string("post_chunks: ") + last_error_message());
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
            int cp = m->chunk_path[c];
            vcclResult_t st = paths_[cp]->test(r);
            if (st == vcclInProgress) continue;
            size_t len = std::min<size_t>(m->env.chunk_bytes, m->env.bytes - size_t(c) * m->env.chunk_bytes);
            record_done(peer, cp, telemetry::Dir::Recv, len, m->post_ns[c], m->recv.ttag, st == vcclSuccess);
            paths_[cp]->release(r);
            m->reqs[c] = nullptr;
            if (st != vcclSuccess) {
                path_lost(peer, cp, std::string("poll_chunks: ") + last_error_message());
                return;
            }
            if (!m->got[c]) {
                m->got[c] = 1;
                m->received++;
            }
            m->last_progress_ns = now_ns();
            p.last_rx_ns[cp] = m->last_progress_ns;
            // Arrival speed per path: this message's bytes there over the time from when they could begin
            // to arrive (its envelope, or the path's previous chunk) to the last one.
            if (m->path_bytes[cp] == 0) m->path_start[cp] = std::max(m->arrived_ns, p.rate[cp].rx_last_done);
            m->path_bytes[cp] += len;
            m->path_last[cp] = p.rate[cp].rx_last_done = m->last_progress_ns;
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
    for (InMsg* m : complete) {
        for (int path = 0; path < kPaths; ++path) {
            uint64_t dt = m->path_last[path] - std::min(m->path_last[path], m->path_start[path]);
            if (m->path_bytes[path] < kMinChunkBytes || dt < 1000000) continue;
            double sample = double(m->path_bytes[path]) * 1e9 / double(dt);
            double& bps = p.rate[path].rx_bps;
            bps = bps > 0 ? 0.7 * bps + 0.3 * sample : sample;
        }
    }
    for (InMsg* m : complete) finish_in(peer, m, vcclSuccess, nullptr);
}

void FailoverTransport::finish_in(int peer, InMsg* m, vcclResult_t status, const char* why) {
    PeerState& p = (*peers_[size_t(peer)]);
    for (size_t c = 0; c < m->reqs.size(); ++c) {
        if (m->reqs[c] != nullptr) paths_[m->chunk_path[c]]->release(m->reqs[c]);
        m->reqs[c] = nullptr;
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
                // A switch closes the path it leaves, which ends the receives UCX had matched there with an
                // error, and the health check may reconnect that path before the error is seen here. A path
                // traffic has left that works again (its own state, peer_status, says so) did not fail: the
                // error is its closed connection's. Marking it lost would leave a later fault of the active
                // path nowhere to go; the slot is posted again instead (a reconnect posts only empty slots).
                if (path != p.active && paths_[path]->peer_status(peer) == vcclSuccess) {
                    post_control(peer, path, s);
                    continue;
                }
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
        for (int path = 0; path < kPaths; ++path) {
            uint64_t kib = uint64_t(std::min(p.rate[path].rx_bps / 1024.0, 4e9));
            c.nonce |= kib << (32 * path);
        }
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
        for (int i = 0; i < kPaths; ++i) {
            uint64_t kib = (c.nonce >> (32 * i)) & 0xffffffffu;
            if (kib != 0) p.rate[i].peer_bps = double(kib) * 1024.0;
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
        if (c.nonce == p.failback_nonce && path == p.failback_path) p.failback_answered = true;
        break;
    }
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
        if (links_changed && fo_.spray && !links_.up(1 - p.active)) {
            path_lost(r, 1 - p.active, "link " + links_.device(1 - p.active) + " went down");
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
            for (size_t c = 0; c < m->reqs.size(); ++c) {
                if (m->reqs[c] != nullptr) paths_[m->chunk_path[c]]->release(m->reqs[c]);
                m->reqs[c] = nullptr;
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
            for (size_t c = 0; c < kv.second->reqs.size(); ++c) {
                if (kv.second->reqs[c] != nullptr) paths_[kv.second->chunk_path[c]]->release(kv.second->reqs[c]);
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

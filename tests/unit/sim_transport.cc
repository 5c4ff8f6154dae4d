/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SimWorld: one mutex guards the whole mailbox (tests run a handful of ranks on a couple of cores; clarity
 * wins over scalability). A matched (message, receive) pair becomes a Delivery with a due time; progress()
 * on any rank performs due deliveries. Waiting ranks sleep on a condition variable that every state
 * change signals.
 */
#include "sim_transport.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace vccl {
namespace test {

namespace {

enum class State { Posted, Matched, Done, Failed };

struct SimReq;

/* A message in flight: either its own copy of the data (eager, or a sender cancelled after matching) or
 * the sender's buffer (rendezvous). */
struct Message {
    int from = 0;
    size_t bytes = 0;
    std::vector<char> data;
    const void* src = nullptr;
    SimReq* sender = nullptr; // completes when the message is delivered; nullptr when detached
};

struct SimReq {
    bool is_send = false;
    int owner = 0;
    int peer = 0;
    uint64_t tag = 0;
    void* dst = nullptr; // receives
    size_t bytes = 0;
    State state = State::Posted;
    uint64_t done_at_ns = 0; // eager sends: completion becomes visible then
    vcclResult_t error = vcclSuccess;
    Message* msg = nullptr;  // sends: its message while unmatched or undelivered
};

struct Delivery {
    Message* msg;
    SimReq* recv; // nullptr once the receiver cancelled
    uint64_t due_ns;
};

using Key = std::pair<int, uint64_t>; // (source, tag)

struct Mailbox {
    std::map<Key, std::deque<Message*>> unexpected;
    std::map<Key, std::deque<SimReq*>> posted;
};

} // namespace

struct SimWorld::Impl {
    class Endpoint;

    int nranks;
    SimOptions opt;
    mutable std::mutex mu;
    /* Per rank: bumped and signalled when something that rank may wait for changes (a message for it
     * arrived, one of its requests completed). Only that rank's thread sleeps on it. */
    std::vector<std::condition_variable> cvs;
    std::vector<uint64_t> epochs;
    std::vector<Mailbox> boxes;
    std::list<Delivery> deliveries;
    std::vector<std::unique_ptr<Endpoint>> endpoints;
    std::mt19937_64 rng;
    size_t live_requests = 0;
    std::vector<size_t> sent; // [from * nranks + to]: bytes posted

    uint64_t due_time() {
        if (opt.max_delay_us <= 0) return 0;
        return now_ns() + (rng() % uint64_t(opt.max_delay_us + 1)) * 1000ull;
    }
    void changed(int rank) {
        ++epochs[size_t(rank)];
        cvs[size_t(rank)].notify_all();
    }
    /* Pairs a message with a receive; without delays the data moves at once. */
    void match(Message* msg, SimReq* recv) {
        recv->state = State::Matched;
        if (msg->sender != nullptr) msg->sender->state = State::Matched;
        Delivery d{msg, recv, due_time()};
        if (d.due_ns == 0) {
            deliver(d);
        } else {
            deliveries.push_back(d);
        }
    }
    /* Moves the data (or fails both sides on a size mismatch), completes both requests, frees the message. */
    void deliver(const Delivery& d) {
        Message* msg = d.msg;
        SimReq* recv = d.recv;
        vcclResult_t result = vcclSuccess;
        if (recv != nullptr) {
            if (recv->bytes != msg->bytes) {
                result = vcclInvalidUsage;
                recv->error = result;
                recv->state = State::Failed;
            } else {
                const void* src = msg->sender != nullptr ? msg->src : msg->data.data();
                if (msg->bytes > 0) memcpy(recv->dst, src, msg->bytes);
                recv->state = State::Done;
            }
            changed(recv->owner);
        }
        if (msg->sender != nullptr) {
            msg->sender->state = result == vcclSuccess ? State::Done : State::Failed;
            msg->sender->error = result;
            msg->sender->msg = nullptr;
            changed(msg->from);
        }
        delete msg;
    }
    /* Performs every delivery that has come due; true if there was any. */
    bool deliver_due() {
        bool any = false;
        uint64_t now = now_ns();
        for (auto it = deliveries.begin(); it != deliveries.end();) {
            if (it->due_ns > now) {
                ++it;
                continue;
            }
            deliver(*it);
            it = deliveries.erase(it);
            any = true;
        }
        return any;
    }
    /* Detaches a message from its sender by taking a private copy of the data. */
    static void detach(Message* msg) {
        msg->data.assign(static_cast<const char*>(msg->src), static_cast<const char*>(msg->src) + msg->bytes);
        msg->sender = nullptr;
        msg->src = nullptr;
    }
};

class SimWorld::Impl::Endpoint : public Transport {
public:
    Endpoint(Impl* w, int rank) : w_(w), rank_(rank) {}
    const char* name() const override { return "sim"; }

    vcclResult_t isend(int peer, uint64_t tag, const void* buf, size_t bytes, MemType mem, bool sync,
                       TransportRequest** out) override {
        if (peer < 0 || peer >= w_->nranks) return set_last_error(vcclInvalidArgument, "sim: bad peer %d", peer);
        std::lock_guard<std::mutex> lock(w_->mu);
        SimReq* req = new SimReq;
        req->is_send = true;
        req->owner = rank_;
        req->peer = peer;
        req->tag = tag & kTagMask;
        req->bytes = bytes;
        w_->sent[size_t(rank_) * size_t(w_->nranks) + size_t(peer)] += bytes;
        Message* msg = new Message;
        msg->from = rank_;
        msg->bytes = bytes;
        if (w_->opt.eager && !sync) {
            msg->data.assign(static_cast<const char*>(buf), static_cast<const char*>(buf) + bytes);
            req->state = State::Done;
            req->done_at_ns = w_->due_time();
        } else {
            msg->src = buf;
            msg->sender = req;
            req->msg = msg;
        }
        Mailbox& box = w_->boxes[size_t(peer)];
        Key key(rank_, req->tag);
        auto posted = box.posted.find(key);
        if (posted != box.posted.end() && !posted->second.empty()) {
            SimReq* recv = posted->second.front();
            posted->second.pop_front();
            w_->match(msg, recv);
        } else {
            box.unexpected[key].push_back(msg);
        }
        ++w_->live_requests;
        w_->changed(peer);
        *out = reinterpret_cast<TransportRequest*>(req);
        return vcclSuccess;
    }

    vcclResult_t irecv(int peer, uint64_t tag, void* buf, size_t bytes, MemType mem,
                       TransportRequest** out) override {
        if (peer < 0 || peer >= w_->nranks) return set_last_error(vcclInvalidArgument, "sim: bad peer %d", peer);
        std::lock_guard<std::mutex> lock(w_->mu);
        SimReq* req = new SimReq;
        req->owner = rank_;
        req->peer = peer;
        req->tag = tag & kTagMask;
        req->dst = buf;
        req->bytes = bytes;
        Mailbox& box = w_->boxes[size_t(rank_)];
        Key key(peer, req->tag);
        auto unexpected = box.unexpected.find(key);
        if (unexpected != box.unexpected.end() && !unexpected->second.empty()) {
            Message* msg = unexpected->second.front();
            unexpected->second.pop_front();
            w_->match(msg, req);
        } else {
            box.posted[key].push_back(req);
        }
        ++w_->live_requests;
        *out = reinterpret_cast<TransportRequest*>(req);
        return vcclSuccess;
    }

    vcclResult_t test(TransportRequest* r) override {
        SimReq* req = reinterpret_cast<SimReq*>(r);
        std::lock_guard<std::mutex> lock(w_->mu);
        switch (req->state) {
        case State::Done:
            if (req->done_at_ns != 0 && now_ns() < req->done_at_ns) return vcclInProgress;
            return vcclSuccess;
        case State::Failed:
            return set_last_error(req->error, "sim: %s of %zu bytes %s rank %d: size mismatch",
                                  req->is_send ? "send" : "receive", req->bytes, req->is_send ? "to" : "from",
                                  req->peer);
        default: return vcclInProgress;
        }
    }

    void progress() override {
        std::unique_lock<std::mutex> lock(w_->mu);
        uint64_t& epoch = w_->epochs[size_t(rank_)];
        if (!w_->deliveries.empty() && w_->deliver_due()) return;
        if (epoch == seen_) {
            // Nothing new for this rank since it last looked: sleep until something changes. With delays,
            // wake up soon anyway: a delivery may come due without anybody signalling.
            auto limit = w_->opt.max_delay_us > 0 ? std::chrono::microseconds(20) : std::chrono::microseconds(2000);
            w_->cvs[size_t(rank_)].wait_for(lock, limit);
        }
        seen_ = epoch;
    }

    void release(TransportRequest* r) override {
        SimReq* req = reinterpret_cast<SimReq*>(r);
        std::lock_guard<std::mutex> lock(w_->mu);
        if (req->is_send) {
            if (req->msg != nullptr) {
                // Rendezvous send cancelled. Unmatched: withdraw the message. Matched: let it be delivered
                // from a private copy (the caller may reuse the buffer once release returns).
                Mailbox& box = w_->boxes[size_t(req->peer)];
                auto& q = box.unexpected[Key(rank_, req->tag)];
                bool withdrawn = false;
                for (auto it = q.begin(); it != q.end(); ++it) {
                    if (*it == req->msg) {
                        delete *it;
                        q.erase(it);
                        withdrawn = true;
                        break;
                    }
                }
                if (!withdrawn) Impl::detach(req->msg);
            }
        } else if (req->state == State::Posted) {
            auto& q = w_->boxes[size_t(rank_)].posted[Key(req->peer, req->tag)];
            for (auto it = q.begin(); it != q.end(); ++it) {
                if (*it == req) {
                    q.erase(it);
                    break;
                }
            }
        } else if (req->state == State::Matched) {
            for (Delivery& d : w_->deliveries) {
                if (d.recv == req) d.recv = nullptr; // the data is dropped on delivery
            }
        }
        delete req;
        --w_->live_requests;
    }

    vcclResult_t close(Deadline) override { return vcclSuccess; }

private:
    Impl* w_;
    int rank_;
    uint64_t seen_ = ~0ull;
};

SimWorld::SimWorld(int nranks, const SimOptions& options) : impl_(new Impl) {
    impl_->nranks = nranks;
    impl_->opt = options;
    impl_->boxes.resize(size_t(nranks));
    impl_->cvs = std::vector<std::condition_variable>(size_t(nranks));
    impl_->epochs.assign(size_t(nranks), 0);
    impl_->sent.assign(size_t(nranks) * size_t(nranks), 0);
    impl_->rng.seed(options.seed);
    for (int r = 0; r < nranks; ++r) impl_->endpoints.emplace_back(new Impl::Endpoint(impl_.get(), r));
}

SimWorld::~SimWorld() {
    for (Delivery& d : impl_->deliveries) delete d.msg;
    for (Mailbox& box : impl_->boxes) {
        for (auto& kv : box.unexpected) {
            for (Message* m : kv.second) delete m;
        }
    }
}

int SimWorld::nranks() const { return impl_->nranks; }

Transport* SimWorld::transport(int rank) { return impl_->endpoints[size_t(rank)].get(); }

void SimWorld::run(const std::function<void(int rank)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < impl_->nranks; ++r) threads.emplace_back(fn, r);
    for (std::thread& t : threads) t.join();
}

size_t SimWorld::outstanding_requests() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->live_requests;
}

size_t SimWorld::bytes_sent(int from, int to) const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->sent[size_t(from) * size_t(impl_->nranks) + size_t(to)];
}

size_t SimWorld::unmatched() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    size_t n = impl_->deliveries.size();
    for (const Mailbox& box : impl_->boxes) {
        for (const auto& kv : box.unexpected) n += kv.second.size();
        for (const auto& kv : box.posted) n += kv.second.size();
    }
    return n;
}

} // namespace test
} // namespace vccl

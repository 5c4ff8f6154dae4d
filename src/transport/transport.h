/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Transport: nonblocking tagged messages between the ranks of one communicator. The UCX implementation
 * (ucx/) is the data path between processes; the interface leaves room for a second path per peer
 * (failover), CUDA IPC, and device memory (MemType::Cuda).
 *
 * Matching: a send from rank s to rank d with tag t matches a receive posted on d for (s, t); messages with
 * equal (s, t) match in the order posted. Tags are 44 bits (kTagBits); the sender's rank is added by the
 * transport. Requests complete in any order; every request must be released.
 *
 * Threading: one thread at a time drives a transport (the communicator serialises its users).
 */
#ifndef VCCL_TRANSPORT_TRANSPORT_H_
#define VCCL_TRANSPORT_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/mem_type.h"
#include "telemetry/format.h"
#include "vccl.h"

namespace vccl {

class Bootstrap;
namespace telemetry {
class Telemetry;
}

constexpr int kTagBits = 44;
constexpr uint64_t kTagMask = (1ull << kTagBits) - 1;

/* A pending transfer; each transport derives its own request type from this. */
struct TransportRequest {
    virtual ~TransportRequest() = default;
};

struct TransportOptions {
    std::string net_devices; // primary path devices, empty: transport's choice
    std::string tls;         // transport selection (UCX_TLS for UCX), empty: default
    std::vector<uint64_t> host_ids; // per rank, equal for ranks on one host (empty: treat all as remote)
    telemetry::Telemetry* telemetry = nullptr; // records every transfer when set (owned by the communicator)
    std::vector<bool> unrecorded_peers; // per rank: true leaves its transfers to the layer above (failover)
    /* Use peer error handling on every endpoint, also to ranks on this host (failover paths must learn of
     * a dead connection; the cost is UCX preferring TCP over shared memory on one host). */
    bool peer_errors_everywhere = false;
    /* UCX tcp connects without blocking the thread (UCX_TCP_CONN_NB=y unless set in the environment). */
    bool nonblocking_tcp_connect = false;
};

using telemetry::TransferTag;

class Transport {
public:
    virtual ~Transport() = default;
    virtual const char* name() const = 0;

    /* `sync`: the send completes only once the receiver has matched it (used where a missing receive
     * must be detected, e.g. point-to-point sends). */
    virtual vcclResult_t isend(int peer, uint64_t tag, const void* buf, size_t bytes, MemType mem, bool sync,
                               TransportRequest** req) = 0;
    virtual vcclResult_t irecv(int peer, uint64_t tag, void* buf, size_t bytes, MemType mem,
                               TransportRequest** req) = 0;
    /* Like irecv, but a message shorter than `max_bytes` also matches; received_bytes() then gives its
     * length. Transports without it match exactly `max_bytes`. */
    virtual vcclResult_t irecv_upto(int peer, uint64_t tag, void* buf, size_t max_bytes, MemType mem,
                                    TransportRequest** req) {
        return irecv(peer, tag, buf, max_bytes, mem, req);
    }
    virtual size_t received_bytes(TransportRequest* req) const { (void)req; return 0; }
    /* vcclSuccess while the connection to `peer` works; the error that broke it otherwise. */
    virtual vcclResult_t peer_status(int peer) { (void)peer; return vcclSuccess; }
    /* Asks a pending receive to end early (it then completes with an error, or with its data if that was
     * already arriving); the request stays the caller's to test and release. */
    virtual void cancel(TransportRequest* req) { (void)req; }
    /* Closes the connection to `peer` at once: its pending requests end with errors and touch no buffer
     * afterwards; peer_status() reports it closed until reconnect(). */
    virtual void disconnect(int peer) { (void)peer; }
    /* Replaces a broken connection to `peer` with a new one (failback after an endpoint error). */
    virtual vcclResult_t reconnect(int peer) { (void)peer; return vcclInvalidUsage; }
    /* vcclSuccess when req completed, vcclInProgress while pending, an error if it failed (peer lost, size
     * mismatch). Does not progress; call progress() in between. */
    virtual vcclResult_t test(TransportRequest* req) = 0;
    /* Moves pending work forward; cheap when there is none. */
    virtual void progress() = 0;
    /* True when the transport has work of its own between operations (failover: acknowledgements, path
     * switches) and should be progressed while the communicator is idle (comm/idle_progress.h). */
    virtual bool wants_idle_progress() const { return false; }
    /* True while messages, acknowledgements or a path switch are in flight (a peer may be waiting on this
     * rank): idle progress then keeps its short interval. Called under the operation lock. */
    virtual bool has_pending() const { return false; }
    /* Measurement hook (vccl-perf --baseline telemetry-paused): while paused, transfers posted are not
     * recorded, as with VCCL_TELEMETRY=0 but on the same communicator (path events still are). Called between
     * operations, under the operation lock. */
    virtual void pause_telemetry(bool paused) { (void)paused; }
    /* Frees req; cancels it first if it is still pending. */
    virtual void release(TransportRequest* req) = 0;
    /* Flushes outstanding sends to peers and closes connections; gives up at `deadline`. */
    virtual vcclResult_t close(Deadline deadline) = 0;

    /* The collective (kind, sequence number) that requests posted from now on belong to, for telemetry;
     * a default TransferTag means point-to-point. Set by the thread that drives the transport. */
    void set_transfer_tag(const TransferTag& tag) { transfer_tag_ = tag; }
    const TransferTag& transfer_tag() const { return transfer_tag_; }

protected:
    TransferTag transfer_tag_;
};

/* Tags the requests posted during its lifetime with `tag`, then goes back to point-to-point. */
class ScopedTransferTag {
public:
    ScopedTransferTag(Transport* t, const TransferTag& tag) : t_(t) { t_->set_transfer_tag(tag); }
    ~ScopedTransferTag() { t_->set_transfer_tag(TransferTag()); }
    ScopedTransferTag(const ScopedTransferTag&) = delete;
    ScopedTransferTag& operator=(const ScopedTransferTag&) = delete;
private:
    Transport* t_;
};

/* Creates and connects the UCX transport over `bootstrap` (collective over its ranks). */
vcclResult_t ucx_transport_create(Bootstrap* bootstrap, const TransportOptions& options,
                                  std::unique_ptr<Transport>* out);

struct FailoverOptions {
    std::string backup_devices; // UCX_NET_DEVICES of the backup path
    bool every_peer = false;    // also peers on this host (VCCL_FAILOVER=on)
    int timeout_ms = 250;       // VCCL_FAILOVER_TIMEOUT_MS
    int failback_ms = 500;      // VCCL_FAILBACK_INTERVAL_MS
    bool failback = true;       // VCCL_FAILBACK: return to the primary once it works again
    int peer_timeout_ms = 10000; // VCCL_PEER_TIMEOUT_MS
    bool spray = false;         // VCCL_MULTIPATH=spray: chunks over every healthy path, not primary + standby
};

/* Creates the primary (`options.net_devices`) and backup paths and the failover layer over them
 * (failover/failover_transport.cc; collective over the bootstrap's ranks). */
vcclResult_t failover_transport_create(Bootstrap* bootstrap, const TransportOptions& options,
                                       const FailoverOptions& failover, std::unique_ptr<Transport>* out);

} // namespace vccl

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Is a peer reachable over one rail right now? Asked before a broken path is reconnected: UCX's default tcp
 * connect blocks the calling thread while the rail drops packets (a blackhole held every rank still for the
 * whole fault). Failover paths now connect without blocking (failover_transport_create), and the probe still
 * keeps reconnects off rails that do not answer.
 *
 * Each rank binds (without listening) a TCP socket to its own address on each rail and shares address and
 * port. A probe is a non-blocking connect from this rank's rail address to the peer's: the peer's kernel
 * answers a SYN to a bound, non-listening port with a reset, so "connection refused" proves a round trip over
 * the rail; silence (a blackhole) or an unreachable network does not. Nothing listens, so nothing accepts a
 * connection. Rails without an IPv4 netdev (RDMA device names) are unknown: the caller reconnects blindly.
 */
#ifndef VCCL_TRANSPORT_FAILOVER_RAIL_PROBE_H_
#define VCCL_TRANSPORT_FAILOVER_RAIL_PROBE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/status.h"

namespace vccl {
namespace failover {

class RailProbe {
public:
    enum class Result { Unknown, Pending, Reachable, Unreachable };

    RailProbe() = default;
    ~RailProbe();
    RailProbe(const RailProbe&) = delete;
    RailProbe& operator=(const RailProbe&) = delete;

    /* Collective: netdevs[path] is the watched netdev of each path ("" for none). */
    vcclResult_t init(Bootstrap* bootstrap, const std::vector<std::string>& netdevs);
    /* Non-blocking. Starts a probe of `peer` over `path` when none is running; Pending until the answer or
     * `timeout_ns`, then Reachable or Unreachable once (the next call starts a new probe). */
    Result poll(int path, int peer, uint64_t now, uint64_t timeout_ns);
    /* This rank's and `peer`'s IPv4 addresses on the rail of `path` (network order) and the port of the
     * peer's probe socket, when the peer's address there is its alone (no other rank shares it, so a
     * connection to it is a connection to that peer); false otherwise. */
    bool unique_peer_address(int path, int peer, uint32_t* local_ip, uint32_t* peer_ip, uint16_t* probe_port) const;

private:
    struct Addr {
        uint32_t ip = 0;   // network order, 0: none
        uint16_t port = 0; // network order
        uint16_t pad = 0;
    };
    struct Attempt {
        int fd = -1;
        uint64_t started = 0;
    };
    int rank_ = 0;
    int nranks_ = 0;
    int paths_ = 0;
    std::vector<int> bound_fds_;        // per path
    std::vector<Addr> addrs_;           // [rank * paths_ + path]
    std::vector<Attempt> attempts_;     // [peer * paths_ + path]
    Result finish(Attempt& a, Result r);
};

} // namespace failover
} // namespace vccl

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Resets this process's TCP connections between two IPv4 addresses, for a failover path that is about to be
 * abandoned (failover_recovery.cc, switch_path).
 *
 * Why: two defects of UCX's tcp transport (read in the 1.13.1 source; UCX 1.16 crashed the same way) crashed
 * ranks after a switch. (1) A destroyed endpoint whose connection carries both directions stays alive for
 * receiving and queues the "no more data" message it owes the peer behind unsent data; on a failed rail that
 * data never leaves, so the endpoint keeps waiting for "writable"; when the peer's own "no more data" arrives,
 * UCX frees the endpoint while reading it and then runs the write handler of the freed endpoint in the same
 * event (a call through a stale function table: fault-slow, fault-blackhole, fault-alternate). (2) A send
 * that fails while a zero-copy send is in progress completes that send twice (assertion `comp->count > 0`).
 * Shutting down only the reading side avoids both: UCX reads end-of-stream before any send can fail, marks
 * the endpoint failed (its write handler becomes a no-op), and the forced close then frees it at once.
 * Measured 2026-11-23: on UCX 1.13 fault-slow crashed in 3 of 12 and 2 of 8 runs before, and none of 29 runs of
 * fault-slow, fault-blackhole and fault-alternate after; on UCX 1.16 fault-alternate crashed in 4 of 10 runs
 * before and in none of 18 after.
 */
#ifndef VCCL_TRANSPORT_FAILOVER_SOCKET_RESET_H_
#define VCCL_TRANSPORT_FAILOVER_SOCKET_RESET_H_

#include <cstdint>

namespace vccl {
namespace failover {

/* Shuts down the reading side of every connected TCP socket of this process whose local address is `local_ip`
 * and whose peer address is `peer_ip` (network order), except those to port `spare_peer_port` (network
 * order, 0: none). Returns how many it shut down. */
int shutdown_tcp_receiving(uint32_t local_ip, uint32_t peer_ip, uint16_t spare_peer_port);

} // namespace failover
} // namespace vccl

#endif

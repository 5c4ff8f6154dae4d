/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Link state of the network devices under the failover paths, from the kernel's netlink link events
 * (RTMGRP_LINK) and, for a while after each, the devices' carrier read directly: a rail whose carrier drops
 * is known within a few milliseconds, long before any timeout. A path whose device is not a netdev (an
 * InfiniBand name like mlx5_0:1) is watched through verbs port events instead (port_events.h); one that is
 * neither surfaces its failures as endpoint errors or acknowledgement timeouts.
 */
#ifndef VCCL_TRANSPORT_FAILOVER_LINK_MONITOR_H_
#define VCCL_TRANSPORT_FAILOVER_LINK_MONITOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/failover/port_events.h"

namespace vccl {
namespace failover {

class LinkMonitor {
public:
    /* devices[i]: UCX device list of path i ("rail0", "eth0,eth1", "mlx5_0:1"); the first netdev named is
     * watched. */
    explicit LinkMonitor(const std::vector<std::string>& devices);
    ~LinkMonitor();
    LinkMonitor(const LinkMonitor&) = delete;
    LinkMonitor& operator=(const LinkMonitor&) = delete;

    /* Reads pending link events (nonblocking). Returns true when some watched device changed state. */
    bool poll();
    /* False once the watched device of `path` lost its carrier or went down; true when unknown. */
    bool up(int path) const { return up_[size_t(path)]; }
    /* Nanoseconds (now_ns clock) since the watched device of `path` last changed state; a large value when it
     * never changed since the monitor started. */
    uint64_t stable_for_ns(int path, uint64_t now) const {
        uint64_t t = changed_ns_[size_t(path)];
        return now > t ? now - t : 0;
    }
    /* State changes of that device in a row, each within 2 s of the one before: 1 after a single drop or
     * return, more while it flaps. */
    int flap_streak(int path) const { return streak_[size_t(path)]; }
    const std::string& device(int path) const { return labels_[size_t(path)]; }

private:
    /* Administratively up with a carrier (the driver's, when it answers ETHTOOL_GLINK). */
    static bool query_up(const std::string& name);
    void set_state(size_t i, bool up, bool* changed);
    static constexpr uint64_t kDirectWindowNs = 1500000000ull; // longer than the kernel's 1 s batching
    static constexpr uint64_t kDirectIntervalNs = 2000000ull;
    uint64_t direct_until_ns_ = 0;
    uint64_t next_direct_ns_ = 0;
    int fd_ = -1;
    std::vector<std::string> names_; // watched netdev per path, empty: none
    std::vector<std::string> labels_; // the netdev or RDMA port watched per path, for messages
    std::unique_ptr<PortEvents> ports_;
    std::vector<int> ifindex_;
    std::vector<bool> up_;
    std::vector<uint64_t> changed_ns_; // when up_ last changed (0: never)
    std::vector<int> streak_;
    void note_change(size_t i);
};

} // namespace failover
} // namespace vccl

#endif

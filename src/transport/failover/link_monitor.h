/*
 * Link state of the network devices under the failover paths, from the kernel's netlink link events
 * (RTMGRP_LINK): a rail whose carrier drops is known within a poll, long before any timeout. Devices that
 * are not netdevs (RDMA names like mlx5_0) are not watched; their failures surface as endpoint errors or
 * acknowledgement timeouts instead.
 */
#ifndef VCCL_TRANSPORT_FAILOVER_LINK_MONITOR_H_
#define VCCL_TRANSPORT_FAILOVER_LINK_MONITOR_H_

#include <string>
#include <vector>

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
    const std::string& device(int path) const { return names_[size_t(path)]; }

private:
    static bool query_up(const std::string& name);
    int fd_ = -1;
    std::vector<std::string> names_; // watched netdev per path, empty: none
    std::vector<int> ifindex_;
    std::vector<bool> up_;
};

} // namespace failover
} // namespace vccl

#endif

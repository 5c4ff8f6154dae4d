/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Port state of the RDMA devices under the failover paths, from verbs asynchronous events: a port that goes
 * down (IBV_EVENT_PORT_ERR) or a device that dies (IBV_EVENT_DEVICE_FATAL) is known within a poll, before
 * UCX's endpoints time out. The netdev rails of TCP and RoCE are watched by the link monitor's netlink socket
 * instead (link_monitor.h); this covers the device names netlink cannot see (mlx5_0:1 on InfiniBand).
 *
 * Port and device events reach every context opened on a device, so a context of our own sees them; QP and CQ
 * errors reach only the context that owns the queue (UCX's) and surface as UCX endpoint errors.
 * Without libibverbs (VCCL_HAVE_VERBS 0) or without such a device, nothing is watched.
 */
#ifndef VCCL_TRANSPORT_FAILOVER_PORT_EVENTS_H_
#define VCCL_TRANSPORT_FAILOVER_PORT_EVENTS_H_

#include <memory>
#include <string>
#include <vector>

namespace vccl {
namespace failover {

/* The events that change a port's state; everything else (LID or GID changes, QP events) does not. */
enum class PortEvent { kPortActive, kPortError, kDeviceFatal, kOther };

/* One watched port. A device that died stays down: only a new context could use it again. */
struct PortWatch {
    std::string device;
    int port = 1;
    bool up = true;
    bool fatal = false;
};

/* Applies an event of `port` (ignored for device events) to w; true when w.up changed. */
bool apply_port_event(PortWatch* w, PortEvent event, int port);

/* "mlx5_0:1,mlx5_1:1" -> {"mlx5_0", 1}: the first entry of a UCX device list; the port defaults to 1.
 * False when the list is empty or the port is not a positive number. */
bool parse_rdma_device(const std::string& list, std::string* device, int* port);

class PortEvents {
public:
    /* devices[i]: the UCX device list of path i. Opens a verbs context for each path whose first entry names
     * an RDMA device of this host; other paths are not watched. */
    explicit PortEvents(const std::vector<std::string>& devices);
    ~PortEvents();
    PortEvents(const PortEvents&) = delete;
    PortEvents& operator=(const PortEvents&) = delete;

    bool watched(int path) const;
    /* True when not watched. */
    bool up(int path) const;
    const std::string& name(int path) const; // "mlx5_0:1", empty when not watched
    /* Reads pending events of every watched device (nonblocking). True when a watched port changed. */
    bool poll();

private:
    struct Device;
    std::vector<std::unique_ptr<Device>> devices_; // per path, null when not watched
    std::vector<std::string> names_;
};

} // namespace failover
} // namespace vccl

#endif

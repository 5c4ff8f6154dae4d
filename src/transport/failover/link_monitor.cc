/* SPDX-License-Identifier: BSD-3-Clause */
#include "transport/failover/link_monitor.h"

#include <linux/ethtool.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/clock.h"
#include "core/log.h"

namespace vccl {
namespace failover {

namespace {

/* "rail0", "eth0:1,eth1" -> "rail0", "eth0": the first entry that names an interface of this namespace. */
std::string first_netdev(const std::string& list) {
    size_t start = 0;
    while (start <= list.size()) {
        size_t end = list.find(',', start);
        if (end == std::string::npos) end = list.size();
        std::string entry = list.substr(start, end - start);
        size_t colon = entry.find(':');
        if (colon != std::string::npos) entry.resize(colon);
        if (!entry.empty() && if_nametoindex(entry.c_str()) != 0) return entry;
        start = end + 1;
    }
    return "";
}

} // namespace

bool LinkMonitor::query_up(const std::string& name) {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return true;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
    bool up = true;
    int flags_rc = ioctl(s, SIOCGIFFLAGS, &ifr);
    if (flags_rc != 0 && (errno == ENODEV || errno == ENXIO)) up = false; // removed or moved to another namespace
    if (flags_rc == 0) {
        up = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
        // IFF_RUNNING follows the operational state, which the kernel's link watcher may update up to a second
        // late; the driver's carrier (ETHTOOL_GLINK) is current. Used when the device answers it.
        struct ethtool_value link;
        memset(&link, 0, sizeof(link));
        link.cmd = ETHTOOL_GLINK;
        struct ifreq eifr;
        memset(&eifr, 0, sizeof(eifr));
        strncpy(eifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
        eifr.ifr_data = reinterpret_cast<char*>(&link);
        if ((ifr.ifr_flags & IFF_UP) && ioctl(s, SIOCETHTOOL, &eifr) == 0) up = link.data != 0;
    }
    close(s);
    return up;
}

LinkMonitor::LinkMonitor(const std::vector<std::string>& devices) {
    for (const std::string& d : devices) {
        std::string name = first_netdev(d);
        names_.push_back(name);
        ifindex_.push_back(name.empty() ? 0 : int(if_nametoindex(name.c_str())));
        up_.push_back(name.empty() ? true : query_up(name));
        changed_ns_.push_back(0);
        streak_.push_back(0);
    }
    // Paths without a netdev may name an RDMA device: its port events stand in for link events.
    std::vector<std::string> rdma(devices.size());
    for (size_t i = 0; i < devices.size(); ++i) {
        if (names_[i].empty()) rdma[i] = devices[i];
    }
    ports_.reset(new PortEvents(rdma));
    labels_ = names_;
    for (size_t i = 0; i < devices.size(); ++i) {
        if (!ports_->watched(int(i))) continue;
        labels_[i] = ports_->name(int(i));
        up_[i] = ports_->up(int(i));
    }
    bool any = false;
    for (const std::string& n : names_) any = any || !n.empty();
    if (!any) return;
    fd_ = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd_ < 0) {
        VCCL_INFO(kLogNet, "failover: no netlink socket (%s); link loss is found by timeouts", strerror(errno));
        return;
    }
    struct sockaddr_nl addr;
    memset(&addr, 0, sizeof(addr));
    addr.nl_family = AF_NETLINK;
    addr.nl_groups = RTMGRP_LINK;
    if (bind(fd_, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) != 0) {
        VCCL_INFO(kLogNet, "failover: netlink bind failed (%s); link loss is found by timeouts", strerror(errno));
        ::close(fd_);
        fd_ = -1;
    }
}

LinkMonitor::~LinkMonitor() {
    if (fd_ >= 0) ::close(fd_);
}

void LinkMonitor::note_change(size_t i) {
    uint64_t now = now_ns();
    streak_[i] = changed_ns_[i] != 0 && now - changed_ns_[i] < 2000000000ull ? streak_[i] + 1 : 1;
    changed_ns_[i] = now;
}

void LinkMonitor::set_state(size_t i, bool up, bool* changed) {
    if (up == up_[i]) return;
    up_[i] = up;
    *changed = true;
    note_change(i);
}

bool LinkMonitor::poll() {
    bool changed = false;
    if (ports_->poll()) {
        for (size_t i = 0; i < up_.size(); ++i) {
            if (ports_->watched(int(i))) set_state(i, ports_->up(int(i)), &changed);
        }
    }
    if (fd_ < 0) return changed;
    bool event = false; // a watched device reported something: its neighbours' reports may be held back
    alignas(struct nlmsghdr) char buf[8192];
    for (;;) {
        ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && errno == ENOBUFS) {
            event = true; // events were lost: the direct queries below find the state
            continue;
        }
        if (n <= 0) break;
        for (auto* h = reinterpret_cast<struct nlmsghdr*>(buf); NLMSG_OK(h, size_t(n)); h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK) continue;
            auto* info = static_cast<struct ifinfomsg*>(NLMSG_DATA(h));
            for (size_t i = 0; i < names_.size(); ++i) {
                if (ifindex_[i] == 0 || info->ifi_index != ifindex_[i]) continue;
                event = true;
                if (h->nlmsg_type == RTM_DELLINK) set_state(i, false, &changed);
            }
        }
    }
    // The kernel reports a carrier change at once only when no other link event came in the second before
    // (its link watcher batches the rest, up to a second later): when two rails fail together, the second
    // would be seen a second late. So after any event, the devices' own state is read directly every
    // kDirectIntervalNs for kDirectWindowNs.
    uint64_t now = now_ns();
    if (event) direct_until_ns_ = now + kDirectWindowNs;
    if (now < direct_until_ns_ && (event || now >= next_direct_ns_)) {
        next_direct_ns_ = now + kDirectIntervalNs;
        for (size_t i = 0; i < names_.size(); ++i) {
            if (!names_[i].empty()) set_state(i, query_up(names_[i]), &changed);
        }
    }
    return changed;
}

} // namespace failover
} // namespace vccl

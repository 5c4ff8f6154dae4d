#include "transport/failover/link_monitor.h"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

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
    if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) up = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
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

bool LinkMonitor::poll() {
    if (fd_ < 0) return false;
    bool changed = false;
    alignas(struct nlmsghdr) char buf[8192];
    for (;;) {
        ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && errno == ENOBUFS) {
            // Events were lost: ask the interfaces directly.
            for (size_t i = 0; i < names_.size(); ++i) {
                if (names_[i].empty()) continue;
                bool now = query_up(names_[i]);
                if (now != up_[i]) {
                    changed = true;
                    note_change(i);
                }
                up_[i] = now;
            }
            continue;
        }
        if (n <= 0) break;
        for (auto* h = reinterpret_cast<struct nlmsghdr*>(buf); NLMSG_OK(h, size_t(n)); h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK) continue;
            auto* info = static_cast<struct ifinfomsg*>(NLMSG_DATA(h));
            for (size_t i = 0; i < names_.size(); ++i) {
                if (ifindex_[i] == 0 || info->ifi_index != ifindex_[i]) continue;
                bool now = h->nlmsg_type == RTM_NEWLINK && (info->ifi_flags & IFF_UP) && (info->ifi_flags & IFF_RUNNING);
                if (now != up_[i]) {
                    up_[i] = now;
                    changed = true;
                    note_change(i);
                }
            }
        }
    }
    return changed;
}

} // namespace failover
} // namespace vccl

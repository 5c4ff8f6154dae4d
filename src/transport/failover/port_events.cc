/* SPDX-License-Identifier: BSD-3-Clause */
#include "transport/failover/port_events.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "config.h"
#include "core/log.h"

#if VCCL_HAVE_VERBS
#include <fcntl.h>
#include <infiniband/verbs.h>
#endif

namespace vccl {
namespace failover {

bool apply_port_event(PortWatch* w, PortEvent event, int port) {
    bool was = w->up;
    switch (event) {
    case PortEvent::kDeviceFatal:
        w->fatal = true;
        w->up = false;
        break;
    case PortEvent::kPortError:
        if (port == w->port) w->up = false;
        break;
    case PortEvent::kPortActive:
        if (port == w->port && !w->fatal) w->up = true;
        break;
    case PortEvent::kOther:
        break;
    }
    return w->up != was;
}

bool parse_rdma_device(const std::string& list, std::string* device, int* port) {
    std::string entry = list.substr(0, list.find(','));
    size_t colon = entry.find(':');
    *port = 1;
    if (colon != std::string::npos) {
        const char* digits = entry.c_str() + colon + 1;
        char* end = nullptr;
        long p = strtol(digits, &end, 10);
        if (*digits == '\0' || *end != '\0' || p < 1 || p > 255) return false;
        *port = int(p);
        entry.resize(colon);
    }
    *device = entry;
    return !entry.empty();
}

#if VCCL_HAVE_VERBS

struct PortEvents::Device {
    ibv_context* ctx = nullptr;
    PortWatch watch;
    ~Device() {
        if (ctx != nullptr) ibv_close_device(ctx);
    }
};

namespace {

PortEvent classify(ibv_event_type type) {
    switch (type) {
    case IBV_EVENT_PORT_ACTIVE: return PortEvent::kPortActive;
    case IBV_EVENT_PORT_ERR: return PortEvent::kPortError;
    case IBV_EVENT_DEVICE_FATAL: return PortEvent::kDeviceFatal;
    default: return PortEvent::kOther;
    }
}

/* Opens `name` with a nonblocking event channel; null (logged) when it cannot. */
ibv_context* open_device(const std::string& name) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list == nullptr) return nullptr;
    ibv_context* ctx = nullptr;
    for (int i = 0; i < n && ctx == nullptr; ++i) {
        if (name == ibv_get_device_name(list[i])) ctx = ibv_open_device(list[i]);
    }
    ibv_free_device_list(list);
    if (ctx == nullptr) return nullptr;
    int flags = fcntl(ctx->async_fd, F_GETFL);
    if (flags < 0 || fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        VCCL_WARN(kLogNet, "failover: %s: cannot make its event channel nonblocking (%s); port events not watched",
                  name.c_str(), strerror(errno));
        ibv_close_device(ctx);
        return nullptr;
    }
    return ctx;
}

} // namespace

PortEvents::PortEvents(const std::vector<std::string>& devices) {
    for (const std::string& list : devices) {
        std::unique_ptr<Device> d;
        std::string dev;
        int port = 1;
        if (parse_rdma_device(list, &dev, &port)) {
            ibv_context* ctx = open_device(dev);
            if (ctx != nullptr) {
                d.reset(new Device);
                d->ctx = ctx;
                d->watch.device = dev;
                d->watch.port = port;
                ibv_port_attr attr;
                memset(&attr, 0, sizeof(attr));
                if (ibv_query_port(ctx, uint8_t(port), &attr) == 0) {
                    d->watch.up = attr.state == IBV_PORT_ACTIVE;
                } else {
                    VCCL_WARN(kLogNet, "failover: %s has no port %d; its events are not watched", dev.c_str(), port);
                    d.reset();
                }
            }
        }
        names_.push_back(d ? d->watch.device + ":" + std::to_string(d->watch.port) : std::string());
        if (d) {
            VCCL_INFO(kLogNet, "failover: watching port events of %s (port %s)", names_.back().c_str(),
                      d->watch.up ? "active" : "not active");
        }
        devices_.push_back(std::move(d));
    }
}

bool PortEvents::poll() {
    bool changed = false;
    for (size_t i = 0; i < devices_.size(); ++i) {
        Device* d = devices_[i].get();
        if (d == nullptr) continue;
        ibv_async_event ev;
        while (ibv_get_async_event(d->ctx, &ev) == 0) { // the channel is nonblocking: -1 (EAGAIN) when empty
            PortEvent kind = classify(ev.event_type);
            int port = kind == PortEvent::kPortActive || kind == PortEvent::kPortError ? ev.element.port_num : 0;
            if (kind != PortEvent::kOther) {
                VCCL_WARN(kLogNet, "failover: %s: %s (port %d)", names_[i].c_str(), ibv_event_type_str(ev.event_type),
                          port);
            }
            ibv_ack_async_event(&ev);
            if (apply_port_event(&d->watch, kind, port)) changed = true;
        }
    }
    return changed;
}

#else

struct PortEvents::Device {
    PortWatch watch;
};

PortEvents::PortEvents(const std::vector<std::string>& devices) {
    devices_.resize(devices.size());
    names_.resize(devices.size());
}

bool PortEvents::poll() { return false; }

#endif

PortEvents::~PortEvents() = default;

bool PortEvents::watched(int path) const {
    return path >= 0 && size_t(path) < devices_.size() && devices_[size_t(path)] != nullptr;
}

bool PortEvents::up(int path) const { return !watched(path) || devices_[size_t(path)]->watch.up; }

const std::string& PortEvents::name(int path) const { return names_[size_t(path)]; }

} // namespace failover
} // namespace vccl

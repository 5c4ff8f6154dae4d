/* SPDX-License-Identifier: BSD-3-Clause */
/* The override variables are lists because one value serves every rank of a node: local rank i takes
 * entry i mod length. A malformed entry is an error, not a warning: silently ignoring the user's device
 * choice would put traffic on a rail they meant to avoid. */
#include "topo/overrides.h"

#include <cstdlib>

#include "core/status.h"
#include "topo/cpulist.h"

namespace vccl {

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
    std::vector<std::string> items;
    size_t pos = 0;
    while (true) {
        size_t next = text.find(sep, pos);
        std::string item = text.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
        size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
        items.push_back(b == std::string::npos ? "" : item.substr(b, e - b + 1));
        if (next == std::string::npos) return items;
        pos = next + 1;
    }
}

bool valid_name(const std::string& name) {
    return !name.empty() && name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-@") ==
                                std::string::npos;
}

} // namespace

vcclResult_t topo_parse_devices(const std::string& text, const char* var, std::vector<DeviceEntry>* out) {
    std::vector<DeviceEntry> entries;
    std::vector<std::string> items = split(text, ',');
    for (size_t i = 0; i < items.size(); ++i) {
        const std::string& item = items[i];
        DeviceEntry entry;
        size_t colon = item.find(':');
        entry.device = item.substr(0, colon);
        bool ok = valid_name(entry.device);
        if (ok && colon != std::string::npos) {
            std::string port = item.substr(colon + 1);
            ok = !port.empty() && port.size() < 4 && port.find_first_not_of("0123456789") == std::string::npos;
            entry.port = ok ? atoi(port.c_str()) : 0;
            ok = ok && entry.port > 0;
        }
        if (!ok)
            return set_last_error(vcclInvalidArgument, "%s entry %zu \"%s\" is not NAME or NAME:PORT (e.g. mlx5_0:1)",
                                  var, i, item.c_str());
        entries.push_back(entry);
    }
    *out = std::move(entries);
    return vcclSuccess;
}

vcclResult_t topo_parse_cpulists(const std::string& text, const char* var, std::vector<std::string>* out) {
    std::vector<std::string> lists;
    std::vector<std::string> items = split(text, ';');
    for (size_t i = 0; i < items.size(); ++i) {
        std::string normalized;
        if (!topo_cpulist_normalize(items[i], &normalized))
            return set_last_error(vcclInvalidArgument, "%s entry %zu \"%s\" is not a cpulist (e.g. 0-15,32-47)", var, i,
                                  items[i].c_str());
        lists.push_back(normalized);
    }
    *out = std::move(lists);
    return vcclSuccess;
}

} // namespace vccl

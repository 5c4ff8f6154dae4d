/* SPDX-License-Identifier: BSD-3-Clause */
// libFuzzer target: the topology overrides (src/topo/overrides.h: VCCL_NET_DEVICES and
// VCCL_BACKUP_NET_DEVICES lists, VCCL_PROXY_CPUS cpulists) and the cpulist normaliser under them.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "topo/cpulist.h"
#include "topo/overrides.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    std::vector<vccl::DeviceEntry> devices;
    if (vccl::topo_parse_devices(text, "VCCL_NET_DEVICES", &devices) == vcclSuccess) {
        for (const auto& d : devices) {
            if (d.device.empty() || d.port < 0) abort();
        }
    }
    std::vector<std::string> lists;
    if (vccl::topo_parse_cpulists(text, "VCCL_PROXY_CPUS", &lists) == vcclSuccess) {
        for (const auto& l : lists) {
            std::string again;
            // A normalised cpulist is valid and normalises to itself.
            if (!vccl::topo_cpulist_normalize(l, &again) || again != l) abort();
        }
    }
    std::string norm;
    if (vccl::topo_cpulist_normalize(text, &norm)) {
        std::string again;
        if (!vccl::topo_cpulist_normalize(norm, &again) || again != norm) abort();
    }
    return 0;
}

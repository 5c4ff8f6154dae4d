/* SPDX-License-Identifier: BSD-3-Clause */
/* Path classification between PCI devices, the way `nvidia-smi topo -m` reports it.
 *
 * hwloc shows every PCIe port as a bridge: a switch appears as its upstream port with one bridge per
 * downstream port below it. nvidia-smi counts a switch as ONE bridge (GPUs on the same PLX switch are PIX),
 * so downstream ports are merged into the switch above them before counting hops. */
#include "topo/classify.h"

#include <set>

namespace vccl {
namespace topo_detail {

bool is_host_bridge(hwloc_obj_t obj) {
    return obj != nullptr && obj->type == HWLOC_OBJ_BRIDGE && obj->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

bool is_pci_bridge(hwloc_obj_t obj) {
    return obj != nullptr && obj->type == HWLOC_OBJ_BRIDGE && obj->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

namespace {

/* The bridge that stands for `bridge` when counting hops: a downstream port (a bridge whose parent bridge
 * fans out to several children) is part of its parent's switch. */
hwloc_obj_t hop_of(hwloc_obj_t bridge) {
    while (is_pci_bridge(bridge->parent) && bridge->parent->io_arity >= 2) bridge = bridge->parent;
    return bridge;
}

/* hwloc_get_common_ancestor_obj() compares depths, which I/O objects do not have; walk parents instead. */
hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b) {
    std::set<hwloc_obj_t> above_a;
    for (hwloc_obj_t up = a; up != nullptr; up = up->parent) above_a.insert(up);
    for (hwloc_obj_t up = b; up != nullptr; up = up->parent)
        if (above_a.count(up) != 0) return up;
    return nullptr;
}

} // namespace

bool is_switch(hwloc_obj_t bridge) {
    return is_pci_bridge(bridge) && hop_of(bridge) == bridge && bridge->io_arity >= 2;
}

hwloc_obj_t nearest_switch(hwloc_obj_t pci) {
    for (hwloc_obj_t up = pci->parent; is_pci_bridge(up); up = up->parent) {
        hwloc_obj_t hop = hop_of(up);
        if (hop->io_arity >= 2) return hop;
        up = hop; // skip the merged ports; the loop steps to the parent
    }
    return nullptr;
}

int numa_of(hwloc_topology_t topo, hwloc_obj_t io) {
    hwloc_obj_t cpu_side = hwloc_get_non_io_ancestor_obj(topo, io);
    if (cpu_side == nullptr || cpu_side->nodeset == nullptr || hwloc_bitmap_weight(cpu_side->nodeset) != 1) return -1;
    return hwloc_bitmap_first(cpu_side->nodeset);
}

Path classify(hwloc_topology_t topo, hwloc_obj_t a, hwloc_obj_t b) {
    Path path;
    if (a == b) {
        path.type = PathType::kPIX;
        return path;
    }
    hwloc_obj_t common = common_ancestor(a, b);
    if (is_host_bridge(common)) {
        path.type = PathType::kPHB;
        return path;
    }
    if (is_pci_bridge(common)) {
        std::set<hwloc_obj_t> hops{hop_of(common)};
        for (hwloc_obj_t end : {a, b})
            for (hwloc_obj_t up = end->parent; up != common; up = up->parent)
                if (is_pci_bridge(up)) hops.insert(hop_of(up));
        path.type = hops.size() <= 1 ? PathType::kPIX : PathType::kPXB;
        return path;
    }
    /* Different host bridges: NODE when both sit on the same single NUMA node, else the SMP interconnect
     * (or unknown locality, which we must not report as close). */
    int numa_a = numa_of(topo, a), numa_b = numa_of(topo, b);
    path.type = numa_a >= 0 && numa_a == numa_b ? PathType::kNODE : PathType::kSYS;
    return path;
}

} // namespace topo_detail
} // namespace vccl

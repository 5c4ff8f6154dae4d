/* SPDX-License-Identifier: BSD-3-Clause */
/* topo_load: hwloc discovery (live machine or VCCL_TOPO_FILE) of GPUs, NICs, NUMA nodes and PCIe
 * switches, and the path matrices between them. hwloc is released before returning: Topology is plain
 * data, so choices and tests never depend on hwloc object lifetimes. */
#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "core/env.h"
#include "core/log.h"
#include "core/status.h"
#include "topo/classify.h"
#include "topo/cpulist.h"
#include "topo/topo.h"

namespace vccl {

namespace {

using topo_detail::classify;
using topo_detail::numa_of;

constexpr unsigned kNvidiaVendor = 0x10de;
constexpr unsigned kClass3D = 0x0302;
constexpr unsigned kClassVga = 0x0300;

/* Owns the hwloc topology for the duration of the load. */
struct HwlocTopology {
    hwloc_topology_t topo = nullptr;
    ~HwlocTopology() {
        if (topo != nullptr) hwloc_topology_destroy(topo);
    }
};

struct Bitmap {
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    ~Bitmap() { hwloc_bitmap_free(set); }
};

std::string format_busid(unsigned domain, unsigned bus, unsigned dev, unsigned func) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", domain, bus, dev, func);
    return buf;
}

std::string busid_of(hwloc_obj_t pci) {
    const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p = pci->attr->pcidev;
    return format_busid(p.domain, p.bus, p.dev, p.func);
}

/* CUDA writes "0000:1B:00.0", NVML "00000000:1B:00.0"; both name the same device. */
bool parse_busid(const std::string& text, unsigned* domain, unsigned* bus, unsigned* dev, unsigned* func) {
    char tail = 0;
    return sscanf(text.c_str(), "%x:%x:%x.%x%c", domain, bus, dev, func, &tail) == 4 && *bus <= 0xff &&
           *dev <= 0x1f && *func <= 7;
}

hwloc_obj_t pci_parent(hwloc_obj_t osdev) {
    for (hwloc_obj_t up = osdev->parent; up != nullptr; up = up->parent)
        if (up->type == HWLOC_OBJ_PCI_DEVICE) return up;
    return nullptr;
}

/* The PUs of a NUMA node, or of the object's CPU-side locality when the node is unknown. */
std::string local_cpulist(hwloc_topology_t topo, hwloc_obj_t io, int numa) {
    if (numa >= 0) {
        hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(topo, static_cast<unsigned>(numa));
        if (node != nullptr && node->cpuset != nullptr) return topo_cpulist_text(node->cpuset);
    }
    hwloc_obj_t cpu_side = io != nullptr ? hwloc_get_non_io_ancestor_obj(topo, io) : hwloc_get_root_obj(topo);
    return topo_cpulist_text(cpu_side->cpuset);
}

void find_numa_nodes(hwloc_topology_t topo, TopologyData* data) {
    for (hwloc_obj_t node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr); node != nullptr;
         node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node)) {
        TopoNuma numa;
        numa.os_index = static_cast<int>(node->os_index);
        numa.cpulist = topo_cpulist_text(node->cpuset);
        data->numa_nodes.push_back(numa);
    }
}

void find_switches(hwloc_topology_t topo, TopologyData* data, std::map<hwloc_obj_t, int>* index) {
    for (hwloc_obj_t br = hwloc_get_next_bridge(topo, nullptr); br != nullptr; br = hwloc_get_next_bridge(topo, br)) {
        if (!topo_detail::is_switch(br)) continue;
        const hwloc_obj_attr_u::hwloc_pcidev_attr_s& up = br->attr->bridge.upstream.pci;
        TopoSwitch sw;
        sw.busid = format_busid(up.domain, up.bus, up.dev, up.func);
        sw.numa = numa_of(topo, br);
        (*index)[br] = static_cast<int>(data->switches.size());
        data->switches.push_back(sw);
    }
}

int switch_index(const std::map<hwloc_obj_t, int>& index, hwloc_obj_t pci) {
    auto it = index.find(topo_detail::nearest_switch(pci));
    return it == index.end() ? -1 : it->second;
}

vcclResult_t find_gpus(hwloc_topology_t topo, const TopoOptions& options, const std::map<hwloc_obj_t, int>& switches,
                       TopologyData* data, std::vector<hwloc_obj_t>* objs) {
    if (!options.gpu_busids.empty()) {
        for (const std::string& text : options.gpu_busids) {
            unsigned domain, bus, dev, func;
            if (!parse_busid(text, &domain, &bus, &dev, &func))
                return set_last_error(vcclInvalidArgument, "GPU PCI bus id \"%s\" is not DOMAIN:BUS:DEV.FN", text.c_str());
            objs->push_back(hwloc_get_pcidev_by_busid(topo, domain, bus, dev, func));
        }
    } else {
        for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci != nullptr; pci = hwloc_get_next_pcidev(topo, pci)) {
            unsigned cls = pci->attr->pcidev.class_id;
            if (pci->attr->pcidev.vendor_id == kNvidiaVendor && (cls == kClass3D || cls == kClassVga)) objs->push_back(pci);
        }
        /* PCI bus order is CUDA_DEVICE_ORDER=PCI_BUS_ID order. */
        std::sort(objs->begin(), objs->end(), [](hwloc_obj_t x, hwloc_obj_t y) { return busid_of(x) < busid_of(y); });
    }
    for (size_t i = 0; i < objs->size(); ++i) {
        hwloc_obj_t pci = (*objs)[i];
        TopoGpu gpu;
        if (pci == nullptr) {
            /* Containers often hide the PCI tree; keep the GPU (local ranks index GPUs) but claim nothing. */
            unsigned domain, bus, dev, func;
            parse_busid(options.gpu_busids[i], &domain, &bus, &dev, &func);
            gpu.busid = format_busid(domain, bus, dev, func);
            gpu.located = false;
            gpu.cpulist = local_cpulist(topo, nullptr, -1);
            VCCL_WARN(kLogTopo, "GPU %zu (%s) is not in the hwloc topology; its paths are reported as SYS", i,
                      gpu.busid.c_str());
        } else {
            gpu.busid = busid_of(pci);
            gpu.numa = numa_of(topo, pci);
            gpu.pci_switch = switch_index(switches, pci);
            gpu.cpulist = local_cpulist(topo, pci, gpu.numa);
        }
        data->gpus.push_back(gpu);
    }
    return vcclSuccess;
}

/* Port numbers named by "Port<N>..." infos of an OpenFabrics device; {1} when there are none. */
std::vector<int> ib_ports(hwloc_obj_t osdev) {
    std::vector<int> ports;
    for (unsigned i = 0; i < osdev->infos_count; ++i) {
        int port = 0;
        if (sscanf(osdev->infos[i].name, "Port%d", &port) == 1 && port > 0 &&
            std::find(ports.begin(), ports.end(), port) == ports.end())
            ports.push_back(port);
    }
    if (ports.empty()) ports.push_back(1);
    std::sort(ports.begin(), ports.end());
    return ports;
}

const char* port_info(hwloc_obj_t osdev, int port, const char* what) {
    char name[64];
    snprintf(name, sizeof(name), "Port%d%s", port, what);
    return hwloc_obj_get_info_by_name(osdev, name);
}

/* hwloc's Linux backend reports state and LID; some exports add LinkLayer. RoCE ports have LID 0. */
std::string link_layer_of(hwloc_obj_t osdev, int port) {
    if (const char* ll = port_info(osdev, port, "LinkLayer")) return ll;
    if (const char* lid = port_info(osdev, port, "LID")) return strtoul(lid, nullptr, 0) != 0 ? "InfiniBand" : "Ethernet";
    return "";
}

hwloc_obj_t sibling_osdev(hwloc_obj_t pci, hwloc_obj_osdev_type_t type) {
    for (hwloc_obj_t child = pci->io_first_child; child != nullptr; child = child->next_sibling)
        if (child->type == HWLOC_OBJ_OS_DEVICE && child->attr->osdev.type == type) return child;
    return nullptr;
}

struct FoundNic {
    TopoNic nic;
    hwloc_obj_t pci;
};

void find_nics(hwloc_topology_t topo, const std::map<hwloc_obj_t, int>& switches, TopologyData* data,
               std::vector<hwloc_obj_t>* objs) {
    std::vector<FoundNic> rdma, plain;
    for (hwloc_obj_t os = hwloc_get_next_osdev(topo, nullptr); os != nullptr; os = hwloc_get_next_osdev(topo, os)) {
        hwloc_obj_osdev_type_t type = os->attr->osdev.type;
        if (type != HWLOC_OBJ_OSDEV_OPENFABRICS && type != HWLOC_OBJ_OSDEV_NETWORK) continue;
        if (os->name == nullptr) continue; // possible in an XML file; a NIC is chosen by its name
        hwloc_obj_t pci = pci_parent(os);
        if (pci == nullptr) {
            VCCL_TRACE(kLogTopo, "skipping %s: not on a PCI device (virtual)", os->name);
            continue;
        }
        FoundNic found;
        found.pci = pci;
        found.nic.device = os->name;
        found.nic.busid = busid_of(pci);
        found.nic.numa = numa_of(topo, pci);
        found.nic.pci_switch = switch_index(switches, pci);
        if (type == HWLOC_OBJ_OSDEV_NETWORK) {
            /* The netdev of an RDMA function is reported with the RDMA device, not as a NIC of its own. */
            if (sibling_osdev(pci, HWLOC_OBJ_OSDEV_OPENFABRICS) != nullptr) continue;
            found.nic.netdev = os->name;
            plain.push_back(found);
            continue;
        }
        hwloc_obj_t net = sibling_osdev(pci, HWLOC_OBJ_OSDEV_NETWORK);
        found.nic.rdma = true;
        found.nic.netdev = net != nullptr && net->name != nullptr ? net->name : "";
        for (int port : ib_ports(os)) {
            FoundNic p = found;
            p.nic.port = port;
            p.nic.link_layer = link_layer_of(os, port);
            const char* state = port_info(os, port, "State");
            p.nic.active = state == nullptr || strtol(state, nullptr, 10) == 4; // 4: IBV_PORT_ACTIVE
            rdma.push_back(p);
        }
    }
    auto by_pci = [](const FoundNic& x, const FoundNic& y) {
        return x.nic.busid != y.nic.busid ? x.nic.busid < y.nic.busid : x.nic.port < y.nic.port;
    };
    std::sort(rdma.begin(), rdma.end(), by_pci);
    std::sort(plain.begin(), plain.end(), by_pci);
    /* A card is one PCI device (domain:bus:dev); its functions and ports share it. */
    std::map<std::string, int> cards;
    for (std::vector<FoundNic>* list : {&rdma, &plain}) {
        for (FoundNic& f : *list) {
            std::string card = f.nic.busid.substr(0, f.nic.busid.find('.'));
            auto it = cards.emplace(card, static_cast<int>(cards.size())).first;
            f.nic.hca = it->second;
            data->nics.push_back(f.nic);
            objs->push_back(f.pci);
        }
    }
}

vcclResult_t fill_paths(hwloc_topology_t topo, const TopoOptions& options, const std::vector<hwloc_obj_t>& gpus,
                        const std::vector<hwloc_obj_t>& nics, TopologyData* data) {
    size_t ng = gpus.size(), nn = nics.size();
    auto path_between = [topo](hwloc_obj_t a, hwloc_obj_t b) {
        return a != nullptr && b != nullptr ? classify(topo, a, b) : Path();
    };
    data->gpu_nic.assign(ng, std::vector<Path>(nn));
    data->gpu_gpu.assign(ng, std::vector<Path>(ng));
    data->nic_nic.assign(nn, std::vector<Path>(nn));
    for (size_t g = 0; g < ng; ++g) {
        for (size_t n = 0; n < nn; ++n) data->gpu_nic[g][n] = path_between(gpus[g], nics[n]);
        for (size_t h = 0; h < ng; ++h) data->gpu_gpu[g][h] = path_between(gpus[g], gpus[h]);
    }
    for (size_t a = 0; a < nn; ++a)
        for (size_t b = 0; b < nn; ++b) data->nic_nic[a][b] = path_between(nics[a], nics[b]);

    if (options.nvlinks.empty()) return vcclSuccess;
    if (options.nvlinks.size() != ng)
        return set_last_error(vcclInvalidArgument, "NVLink matrix has %zu rows for %zu GPUs", options.nvlinks.size(), ng);
    for (size_t g = 0; g < ng; ++g) {
        if (options.nvlinks[g].size() != ng)
            return set_last_error(vcclInvalidArgument, "NVLink matrix row %zu has %zu entries for %zu GPUs", g,
                                  options.nvlinks[g].size(), ng);
        for (size_t h = 0; h < ng; ++h) {
            if (g == h || options.nvlinks[g][h] <= 0) continue;
            data->gpu_gpu[g][h].type = PathType::kNV;
            data->gpu_gpu[g][h].nvlinks = options.nvlinks[g][h];
        }
    }
    return vcclSuccess;
}

/* Hosts without GPUs anchor on the process: the NUMA nodes its CPU binding touches. */
vcclResult_t fill_anchor(hwloc_topology_t topo, const TopoOptions& options, bool live, TopologyData* data) {
    Bitmap binding;
    if (!options.cpu_binding.empty()) {
        if (!topo_cpulist_parse(options.cpu_binding, binding.set))
            return set_last_error(vcclInvalidArgument, "CPU binding \"%s\" is not a cpulist", options.cpu_binding.c_str());
    } else if (!live || hwloc_get_cpubind(topo, binding.set, HWLOC_CPUBIND_PROCESS) != 0 ||
               hwloc_bitmap_iszero(binding.set)) {
        hwloc_bitmap_copy(binding.set, hwloc_topology_get_topology_cpuset(topo));
    }
    Bitmap cpus;
    std::vector<int> nodes;
    for (const TopoNuma& numa : data->numa_nodes) {
        hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(topo, static_cast<unsigned>(numa.os_index));
        if (node == nullptr || !hwloc_bitmap_intersects(node->cpuset, binding.set)) continue;
        hwloc_bitmap_or(cpus.set, cpus.set, node->cpuset);
        nodes.push_back(numa.os_index);
    }
    data->anchor_cpulist = topo_cpulist_text(nodes.empty() ? binding.set : cpus.set);
    for (const TopoNic& nic : data->nics) {
        Path path;
        path.type = std::find(nodes.begin(), nodes.end(), nic.numa) != nodes.end() ? PathType::kNODE : PathType::kSYS;
        data->anchor_nic.push_back(path);
    }
    return vcclSuccess;
}

} // namespace

int Topology::find_nic(const std::string& device, int port) const {
    for (size_t i = 0; i < data_.nics.size(); ++i)
        if (data_.nics[i].device == device && (port == 0 || data_.nics[i].port == port)) return static_cast<int>(i);
    return -1;
}

vcclResult_t topo_load(const TopoOptions& options, std::unique_ptr<Topology>* out) {
    std::string xml = !options.xml_file.empty() ? options.xml_file : env::get_str(env::kTopoFile);
    HwlocTopology h;
    if (hwloc_topology_init(&h.topo) != 0) return set_last_error(vcclSystemError, "hwloc_topology_init failed");
    /* GPUs and NICs are I/O objects, which hwloc drops by default. */
    hwloc_topology_set_io_types_filter(h.topo, HWLOC_TYPE_FILTER_KEEP_ALL);
    if (!xml.empty()) {
        /* hwloc's own message for a missing file is vague; say which file and which variable. */
        FILE* f = fopen(xml.c_str(), "r");
        if (f == nullptr)
            return set_last_error(vcclInvalidArgument, "topology file \"%s\" (VCCL_TOPO_FILE) cannot be read: %s",
                                  xml.c_str(), strerror(errno));
        fclose(f);
        if (hwloc_topology_set_xml(h.topo, xml.c_str()) != 0)
            return set_last_error(vcclInvalidArgument, "topology file \"%s\" (VCCL_TOPO_FILE) is not hwloc XML",
                                  xml.c_str());
    }
    if (hwloc_topology_load(h.topo) != 0)
        return set_last_error(xml.empty() ? vcclSystemError : vcclInvalidArgument, "hwloc could not load %s%s",
                              xml.empty() ? "this machine's topology" : "topology file ", xml.c_str());

    TopologyData data;
    data.source = xml.empty() ? "live" : xml;
    std::map<hwloc_obj_t, int> switches;
    std::vector<hwloc_obj_t> gpu_objs, nic_objs;
    find_numa_nodes(h.topo, &data);
    find_switches(h.topo, &data, &switches);
    VCCL_RETURN_IF_ERROR(find_gpus(h.topo, options, switches, &data, &gpu_objs));
    find_nics(h.topo, switches, &data, &nic_objs);
    VCCL_RETURN_IF_ERROR(fill_paths(h.topo, options, gpu_objs, nic_objs, &data));
    VCCL_RETURN_IF_ERROR(fill_anchor(h.topo, options, xml.empty(), &data));
    VCCL_INFO(kLogTopo, "topology (%s): %zu GPUs, %zu NICs, %zu NUMA nodes, %zu PCIe switches", data.source.c_str(),
              data.gpus.size(), data.nics.size(), data.numa_nodes.size(), data.switches.size());
    *out = std::make_unique<Topology>(std::move(data));
    return vcclSuccess;
}

} // namespace vccl

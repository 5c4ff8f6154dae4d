/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Topology: what the node looks like (GPUs, NICs, NUMA nodes, PCIe switches), how far apart the devices
 * are, and which NICs and cores each local rank should use.
 *
 *   load.cc      hwloc (live machine or an XML file) -> TopologyData
 *   classify.cc  the path class between two PCI objects (PIX, PXB, PHB, NODE, SYS)
 *   choose.cc    primary and backup NIC and proxy CPUs per GPU or process; overrides.cc parses VCCL_*
 *   format.cc    the nvidia-smi-like matrix and the choices as text or JSON (vccl-info -t)
 *
 * This layer sits above src/core only: no CUDA, no UCX, no MPI. GPU bus ids and NVLink counts, which only
 * CUDA/NVML know, come in through TopoOptions.
 */
#ifndef VCCL_TOPO_TOPO_H_
#define VCCL_TOPO_TOPO_H_

#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "vccl.h"

namespace vccl {

/* Path classes, best first, as in `nvidia-smi topo -m`. kNV is only reported from an NVLink matrix. */
enum class PathType : int {
    kNV = 0,   // NVLink (Path::nvlinks links)
    kPIX = 1,  // at most one PCIe switch between the devices
    kPXB = 2,  // several PCIe switches, no host bridge
    kPHB = 3,  // through the PCIe host bridge (root complex) they share
    kNODE = 4, // across host bridges within one NUMA node
    kSYS = 5,  // across NUMA nodes (SMP interconnect), or location unknown
};

struct Path {
    PathType type = PathType::kSYS;
    int nvlinks = 0; // > 0 only for kNV
};

/* "NV4", "PIX", ... */
std::string path_name(const Path& path);

struct TopoGpu {
    std::string busid;      // "0000:1b:00.0"
    int numa = -1;          // NUMA node os index, -1 unknown
    int pci_switch = -1;    // index into switches(), -1 when on a root port of its own
    std::string cpulist;    // PUs of its NUMA node (or of its nearest CPU-side object)
    bool located = true;    // false: a given bus id that hwloc does not show
};

struct TopoNic {
    std::string device;     // "mlx5_0" (RDMA) or "eth0" (plain netdev)
    int port = 0;           // 1-based RDMA port, 0 for a plain netdev
    bool rdma = false;
    bool active = true;     // false when hwloc reports the port state and it is not ACTIVE
    std::string link_layer; // "InfiniBand", "Ethernet" or "" when unknown
    std::string netdev;     // netdev of the same PCI function ("ib0"), may be empty
    std::string busid;
    int hca = -1;           // physical adapter index: NICs sharing it share a card
    int numa = -1;
    int pci_switch = -1;
    /* The name UCX_NET_DEVICES takes: "mlx5_0:1" for RDMA, the netdev name otherwise. */
    std::string ucx_name() const;
};

struct TopoNuma {
    int os_index = 0;
    std::string cpulist;
};

struct TopoSwitch {
    std::string busid;      // bus id of its upstream port
    int numa = -1;
};

/* Plain data; load.cc fills it, tests may build one by hand. Matrices are indexed [row][column]. */
struct TopologyData {
    std::string source;                      // "live" or the XML file name
    std::vector<TopoGpu> gpus;               // CUDA order when bus ids were given, else PCI bus order
    std::vector<TopoNic> nics;               // RDMA ports first (PCI order), then plain netdevs
    std::vector<TopoNuma> numa_nodes;
    std::vector<TopoSwitch> switches;
    std::vector<std::vector<Path>> gpu_nic;  // [gpu][nic]
    std::vector<std::vector<Path>> gpu_gpu;  // [gpu][gpu], diagonal unused
    std::vector<std::vector<Path>> nic_nic;  // [nic][nic], diagonal unused
    /* Anchor for hosts without GPUs: the process's CPU binding. */
    std::string anchor_cpulist;              // PUs of the NUMA nodes the binding touches
    std::vector<Path> anchor_nic;            // [nic]: NODE when the NIC is local to the anchor, else SYS
};

class Topology {
public:
    explicit Topology(TopologyData data) : data_(std::move(data)) {}
    const std::vector<TopoGpu>& gpus() const { return data_.gpus; }
    const std::vector<TopoNic>& nics() const { return data_.nics; }
    const std::vector<TopoNuma>& numa_nodes() const { return data_.numa_nodes; }
    const std::vector<TopoSwitch>& switches() const { return data_.switches; }
    Path path(int gpu, int nic) const { return data_.gpu_nic[gpu][nic]; }
    Path gpu_path(int gpu_a, int gpu_b) const { return data_.gpu_gpu[gpu_a][gpu_b]; }
    Path nic_path(int nic_a, int nic_b) const { return data_.nic_nic[nic_a][nic_b]; }
    Path anchor_path(int nic) const { return data_.anchor_nic[nic]; }
    const std::string& anchor_cpulist() const { return data_.anchor_cpulist; }
    const std::string& source() const { return data_.source; }
    /* Index of the NIC with this device name and port (port 0: any), -1 if none. */
    int find_nic(const std::string& device, int port) const;

private:
    TopologyData data_;
};

struct TopoOptions {
    std::string xml_file;                  // empty: VCCL_TOPO_FILE, then the live machine
    std::vector<std::string> gpu_busids;   // CUDA's bus ids in device order; empty: NVIDIA PCI devices
    std::vector<std::vector<int>> nvlinks; // optional NVLink counts [gpu][gpu] in gpu_busids order
    std::string cpu_binding;               // cpulist anchor for hosts without GPUs; empty: this process's
};

/* Loads the topology. Errors: vcclInvalidArgument (bad file, bus id or matrix), vcclSystemError (hwloc). */
vcclResult_t topo_load(const TopoOptions& options, std::unique_ptr<Topology>* out);

struct RailChoice {
    int local_rank = 0;
    int gpu = -1;                   // index into Topology::gpus(), -1 on hosts without GPUs
    std::string primary_device;     // "mlx5_0" or "eth0"; empty: no NIC found
    int primary_port = 0;
    std::string backup_device;      // empty: no backup
    int backup_port = 0;
    std::string primary_ucx;        // "mlx5_0:1" or "eth0" (UCX_NET_DEVICES syntax)
    std::string backup_ucx;
    std::string cpulist;            // proxy thread CPUs, "0-15,32-47"
    std::vector<std::string> reasons;  // why, one line per decision
    std::vector<std::string> warnings; // what is weak about it (no backup, shared card); topo_choose logs them
};

/* The choice for one local rank: GPU local_rank % #GPUs (or the process anchor without GPUs), then
 * VCCL_NET_DEVICES, VCCL_BACKUP_NET_DEVICES and VCCL_PROXY_CPUS applied. Deterministic: every rank of a
 * node computes the same plan. Errors: vcclInvalidArgument (malformed override or rank). */
vcclResult_t topo_choose(const Topology& topo, int local_rank, int local_size, RailChoice* out);

/* For the transport (comm_init): the primary device list for UCX_NET_DEVICES of this local rank, from the
 * live topology (or VCCL_TOPO_FILE) and the overrides. Empty means "let UCX choose": no RDMA NIC was found
 * (plain netdevs are left to UCX, which also sees namespaces and virtual links hwloc does not), or the
 * topology could not be loaded (logged). */
std::string topo_primary_devices(int local_rank, int local_size,
                                 const std::vector<std::string>& gpu_busids = {});
/* The same for the backup (failover) path: VCCL_BACKUP_NET_DEVICES, or the topology's backup RDMA NIC.
 * Empty: no backup, no failover in VCCL_FAILOVER=auto. */
std::string topo_backup_devices(int local_rank, int local_size,
                                const std::vector<std::string>& gpu_busids = std::vector<std::string>());

/* Text like `nvidia-smi topo -m` followed by the choice of every local rank in `choices`; JSON with the
 * same content (one object, no trailing newline). */
std::string topo_format_text(const Topology& topo, const std::vector<RailChoice>& choices);
std::string topo_format_json(const Topology& topo, const std::vector<RailChoice>& choices);

} // namespace vccl

#endif

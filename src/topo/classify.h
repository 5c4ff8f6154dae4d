/* SPDX-License-Identifier: BSD-3-Clause */
/* Path classes between hwloc PCI objects (the rules of `nvidia-smi topo -m`). Internal to src/topo. */
#ifndef VCCL_TOPO_CLASSIFY_H_
#define VCCL_TOPO_CLASSIFY_H_

#include <hwloc.h>

#include "topo/topo.h"

namespace vccl {
namespace topo_detail {

bool is_host_bridge(hwloc_obj_t obj);
bool is_pci_bridge(hwloc_obj_t obj);

/* The PCIe switch a PCI device hangs off: the nearest bridge above it that fans out to two or more
 * children (a switch's upstream port), nullptr when only root ports lie between it and the host bridge. */
hwloc_obj_t nearest_switch(hwloc_obj_t pci);

/* True for a bridge that is a switch of its own (not a downstream port merged into its parent switch)
 * and fans out; these are the PCIe switches Topology::switches() lists. */
bool is_switch(hwloc_obj_t bridge);

/* NUMA node os index of an I/O object's CPU-side locality, -1 when it spans several nodes or none. */
int numa_of(hwloc_topology_t topo, hwloc_obj_t io);

/* Class of the path between two PCI devices (a == b: kPIX, they share the device). */
Path classify(hwloc_topology_t topo, hwloc_obj_t a, hwloc_obj_t b);

} // namespace topo_detail
} // namespace vccl

#endif

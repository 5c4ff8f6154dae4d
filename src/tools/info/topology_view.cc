/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-info -t: the topology vccl sees (VCCL_TOPO_FILE or this machine) and the rail choice of every local
 * GPU, as a table like `nvidia-smi topo -m` or as JSON. vccl-info has no CUDA context, so GPUs are the
 * NVIDIA PCI devices hwloc shows, in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID). */
#include <memory>
#include <vector>

#include "core/status.h"
#include "tools/info/info.h"
#include "topo/topo.h"

namespace vinfo {

namespace {

/* One choice per local GPU (one rank per GPU), or one for a process on a host without GPUs. */
bool load_and_choose(std::unique_ptr<vccl::Topology>* topo, std::vector<vccl::RailChoice>* choices) {
    if (vccl::topo_load(vccl::TopoOptions(), topo) != vcclSuccess) {
        fprintf(stderr, "vccl-info: %s\n", vccl::last_error_message());
        return false;
    }
    int ranks = (*topo)->gpus().empty() ? 1 : static_cast<int>((*topo)->gpus().size());
    for (int r = 0; r < ranks; ++r) {
        vccl::RailChoice choice;
        if (vccl::topo_choose(**topo, r, ranks, &choice) != vcclSuccess) {
            fprintf(stderr, "vccl-info: %s\n", vccl::last_error_message());
            return false;
        }
        choices->push_back(choice);
    }
    return true;
}

} // namespace

bool print_topology(FILE* out) {
    std::unique_ptr<vccl::Topology> topo;
    std::vector<vccl::RailChoice> choices;
    if (!load_and_choose(&topo, &choices)) return false;
    fputs(vccl::topo_format_text(*topo, choices).c_str(), out);
    return true;
}

bool print_topology_json(FILE* out) {
    std::unique_ptr<vccl::Topology> topo;
    std::vector<vccl::RailChoice> choices;
    if (!load_and_choose(&topo, &choices)) return false;
    fputs(vccl::topo_format_json(*topo, choices).c_str(), out);
    return true;
}

} // namespace vinfo

/* SPDX-License-Identifier: BSD-3-Clause */
/* Rail choice: primary NIC, backup NIC and proxy CPUs for each GPU (or for the process on hosts without
 * GPUs), then the user's overrides.
 *
 * Every rank of a node computes the same whole-node plan from the same topology, so the assignment is
 * consistent without any communication: GPUs spread over equally close NICs (one rail each), and backups
 * avoid sharing a PCIe switch or a card with the primary, so one switch or port failure cannot take both. */
#include <algorithm>
#include <cstdio>
#include <tuple>

#include "core/env.h"
#include "core/log.h"
#include "core/status.h"
#include "topo/overrides.h"
#include "topo/topo.h"

namespace vccl {

namespace {

/* RDMA ports when there are any; plain netdevs serve only hosts without RDMA. */
std::vector<int> candidate_nics(const Topology& topo) {
    std::vector<int> rdma, plain;
    for (size_t i = 0; i < topo.nics().size(); ++i) (topo.nics()[i].rdma ? rdma : plain).push_back(static_cast<int>(i));
    return rdma.empty() ? plain : rdma;
}

/* Where the rail starts: a GPU, or the process anchor (gpu < 0). */
Path path_from(const Topology& topo, int gpu, int nic) {
    return gpu >= 0 ? topo.path(gpu, nic) : topo.anchor_path(nic);
}

std::string nic_label(const Topology& topo, int nic) { return topo.nics()[nic].ucx_name(); }

/* 0: different switch and card; 1: same switch, other card; 2: another port of the same card. */
int isolation_tier(const TopoNic& primary, const TopoNic& other) {
    if (other.hca == primary.hca) return 2;
    if (primary.pci_switch >= 0 && other.pci_switch == primary.pci_switch) return 1;
    return 0;
}

const char* const kTierText[] = {"on another PCIe switch and card", "on the same PCIe switch but another card",
                                 "another port of the same card"};

/* Best backup for a rail starting at `gpu` whose primary is `primary`; `rotate` spreads equally good
 * candidates (per-GPU load in a plan, the local rank on hosts without GPUs). Returns -1 when none. */
int pick_backup(const Topology& topo, int gpu, int primary, const std::vector<int>& cands,
                const std::vector<int>& load, int rotate, std::vector<std::string>* reasons,
                std::vector<std::string>* warnings) {
    const TopoNic& p = topo.nics()[primary];
    using Key = std::tuple<int, int, int, int, int>;
    std::vector<std::pair<Key, int>> keyed;
    for (int c : cands) {
        const TopoNic& n = topo.nics()[c];
        if (c == primary || (n.device == p.device && n.port == p.port)) continue;
        /* A backup on another fabric (IB vs Ethernet) cannot reach the peer's backup: last resort. */
        int other_fabric = !p.link_layer.empty() && !n.link_layer.empty() && n.link_layer != p.link_layer;
        keyed.push_back({Key(other_fabric, !n.active, isolation_tier(p, n), static_cast<int>(path_from(topo, gpu, c).type),
                             load.empty() ? 0 : load[c]),
                         c});
    }
    if (keyed.empty()) {
        warnings->push_back("no backup NIC: " + nic_label(topo, primary) +
                            " is the only usable port, so a failure of it cannot fail over");
        return -1;
    }
    std::stable_sort(keyed.begin(), keyed.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    size_t ties = 1;
    while (ties < keyed.size() && keyed[ties].first == keyed[0].first) ++ties;
    int chosen = keyed[static_cast<size_t>(rotate) % ties].second;
    int tier = isolation_tier(p, topo.nics()[chosen]);
    reasons->push_back("backup " + nic_label(topo, chosen) + ": " + path_name(path_from(topo, gpu, chosen)) + ", " +
                       kTierText[tier]);
    if (tier == 2) warnings->push_back("backup " + nic_label(topo, chosen) + " shares a card with primary " +
                                       nic_label(topo, primary) + "; a card or switch failure takes both");
    if (std::get<0>(keyed[0].first) != 0)
        warnings->push_back("backup " + nic_label(topo, chosen) + " is on another fabric than the primary");
    return chosen;
}

void set_primary(const Topology& topo, int nic, RailChoice* choice) {
    choice->primary_device = topo.nics()[nic].device;
    choice->primary_port = topo.nics()[nic].port;
    choice->primary_ucx = topo.nics()[nic].ucx_name();
}

void set_backup(const Topology& topo, int nic, RailChoice* choice) {
    choice->backup_device = nic >= 0 ? topo.nics()[nic].device : "";
    choice->backup_port = nic >= 0 ? topo.nics()[nic].port : 0;
    choice->backup_ucx = nic >= 0 ? topo.nics()[nic].ucx_name() : "";
}

/* The choice for every GPU, computed together so that GPUs spread over rails. */
std::vector<RailChoice> plan_gpus(const Topology& topo, std::vector<int>* primaries, std::vector<int>* backups) {
    const size_t ngpus = topo.gpus().size();
    std::vector<int> cands = candidate_nics(topo);
    std::vector<RailChoice> plan(ngpus);
    primaries->assign(ngpus, -1);
    backups->assign(ngpus, -1);
    for (size_t g = 0; g < ngpus; ++g) {
        plan[g].gpu = static_cast<int>(g);
        plan[g].cpulist = topo.gpus()[g].cpulist;
        plan[g].reasons.push_back("proxy CPUs " + plan[g].cpulist + ": " +
                                  (topo.gpus()[g].numa >= 0 ? "cores of NUMA node " + std::to_string(topo.gpus()[g].numa)
                                                            : std::string("GPU's NUMA node unknown, all cores")));
    }
    if (cands.empty()) {
        for (RailChoice& c : plan) c.warnings.push_back("no network device found");
        return plan;
    }
    /* Closest NICs per GPU (active ports first), then the most constrained GPUs pick first so that a
     * GPU with a single close NIC is not crowded out by one that had a choice. */
    std::vector<std::vector<int>> ties(ngpus);
    for (size_t g = 0; g < ngpus; ++g) {
        auto key = [&](int n) { return std::make_pair(!topo.nics()[n].active, static_cast<int>(topo.path(g, n).type)); };
        auto best = key(cands[0]);
        for (int n : cands) best = std::min(best, key(n));
        for (int n : cands)
            if (key(n) == best) ties[g].push_back(n);
    }
    std::vector<size_t> order(ngpus);
    for (size_t g = 0; g < ngpus; ++g) order[g] = g;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ties[a].size() < ties[b].size(); });
    std::vector<int> load(topo.nics().size(), 0);
    for (size_t g : order) {
        int chosen = ties[g][0];
        for (int n : ties[g])
            if (load[n] < load[chosen]) chosen = n;
        ++load[chosen];
        (*primaries)[g] = chosen;
        set_primary(topo, chosen, &plan[g]);
        plan[g].reasons.insert(plan[g].reasons.begin(),
                               "primary " + nic_label(topo, chosen) + ": " + path_name(topo.path(g, chosen)) + ", " +
                                   std::to_string(ties[g].size()) + " NIC(s) equally close");
    }
    for (size_t g = 0; g < ngpus; ++g)
        if (load[(*primaries)[g]] > 1)
            plan[g].reasons.push_back(nic_label(topo, (*primaries)[g]) + " is the primary of " +
                                      std::to_string(load[(*primaries)[g]]) + " GPUs");
    std::vector<int> backup_load(topo.nics().size(), 0);
    for (size_t g = 0; g < ngpus; ++g) {
        int b = pick_backup(topo, static_cast<int>(g), (*primaries)[g], cands, backup_load, 0, &plan[g].reasons,
                            &plan[g].warnings);
        if (b >= 0) ++backup_load[b];
        (*backups)[g] = b;
        set_backup(topo, b, &plan[g]);
    }
    return plan;
}

/* Hosts without GPUs: rails are spread over the NICs closest to the process's NUMA nodes by local rank. */
RailChoice plan_process(const Topology& topo, int local_rank, int* primary, int* backup) {
    RailChoice choice;
    choice.cpulist = topo.anchor_cpulist();
    choice.reasons.push_back("no GPU: rails chosen for the process, proxy CPUs " + choice.cpulist +
                             " (NUMA nodes of its CPU binding)");
    *primary = *backup = -1;
    std::vector<int> cands = candidate_nics(topo);
    if (cands.empty()) {
        choice.warnings.push_back("no network device found");
        return choice;
    }
    auto key = [&](int n) { return std::make_pair(!topo.nics()[n].active, static_cast<int>(topo.anchor_path(n).type)); };
    auto best = key(cands[0]);
    for (int n : cands) best = std::min(best, key(n));
    std::vector<int> ties;
    for (int n : cands)
        if (key(n) == best) ties.push_back(n);
    *primary = ties[static_cast<size_t>(local_rank) % ties.size()];
    set_primary(topo, *primary, &choice);
    choice.reasons.insert(choice.reasons.begin() + 0,
                          "primary " + nic_label(topo, *primary) + ": " + path_name(topo.anchor_path(*primary)) +
                              " to the process, local rank " + std::to_string(local_rank) + " of " +
                              std::to_string(ties.size()) + " equally close NIC(s)");
    *backup = pick_backup(topo, -1, *primary, cands, {}, local_rank, &choice.reasons, &choice.warnings);
    set_backup(topo, *backup, &choice);
    return choice;
}

vcclResult_t read_override(env::Id id, const char* var, int local_rank, DeviceEntry* out, bool* set) {
    *set = false;
    std::string text = env::get_str(id);
    if (text.empty()) return vcclSuccess;
    std::vector<DeviceEntry> entries;
    VCCL_RETURN_IF_ERROR(topo_parse_devices(text, var, &entries));
    *out = entries[static_cast<size_t>(local_rank) % entries.size()];
    *set = true;
    return vcclSuccess;
}

/* A user-named device: take the port from the topology when it is an RDMA device named without one. */
void set_named(const Topology& topo, const DeviceEntry& entry, std::string* device, int* port, std::string* ucx) {
    int nic = topo.find_nic(entry.device, entry.port);
    *device = entry.device;
    *port = entry.port != 0 ? entry.port : nic >= 0 ? topo.nics()[nic].port : 0;
    *ucx = *port > 0 ? entry.device + ":" + std::to_string(*port) : entry.device;
}

vcclResult_t apply_overrides(const Topology& topo, int local_rank, int gpu, RailChoice* choice) {
    DeviceEntry primary, backup;
    bool primary_set, backup_set;
    VCCL_RETURN_IF_ERROR(read_override(env::kNetDevices, "VCCL_NET_DEVICES", local_rank, &primary, &primary_set));
    VCCL_RETURN_IF_ERROR(
        read_override(env::kBackupNetDevices, "VCCL_BACKUP_NET_DEVICES", local_rank, &backup, &backup_set));
    if (primary_set) {
        set_named(topo, primary, &choice->primary_device, &choice->primary_port, &choice->primary_ucx);
        choice->reasons.push_back("primary " + choice->primary_ucx + " from VCCL_NET_DEVICES");
        int nic = topo.find_nic(choice->primary_device, choice->primary_port);
        if (nic < 0)
            choice->warnings.push_back("VCCL_NET_DEVICES names " + choice->primary_ucx +
                                       ", which the topology does not show; using it as given");
        if (!backup_set && nic >= 0) {
            /* The backup must still be isolated from the primary the user picked. */
            auto about_backup = [](const std::string& line) {
                return line.rfind("backup ", 0) == 0 || line.rfind("no backup", 0) == 0;
            };
            for (std::vector<std::string>* lines : {&choice->reasons, &choice->warnings})
                lines->erase(std::remove_if(lines->begin(), lines->end(), about_backup), lines->end());
            int b = pick_backup(topo, gpu, nic, candidate_nics(topo), {}, local_rank, &choice->reasons, &choice->warnings);
            set_backup(topo, b, choice);
        } else if (!backup_set && choice->backup_ucx == choice->primary_ucx) {
            set_backup(topo, -1, choice);
            choice->warnings.push_back("no backup NIC: the topology's backup is the device VCCL_NET_DEVICES chose");
        }
    }
    if (backup_set) {
        if (backup.device == "none") {
            set_backup(topo, -1, choice);
            choice->reasons.push_back("no backup: VCCL_BACKUP_NET_DEVICES is none");
        } else {
            set_named(topo, backup, &choice->backup_device, &choice->backup_port, &choice->backup_ucx);
            choice->reasons.push_back("backup " + choice->backup_ucx + " from VCCL_BACKUP_NET_DEVICES");
            if (choice->backup_ucx == choice->primary_ucx)
                choice->warnings.push_back("VCCL_BACKUP_NET_DEVICES gives the primary device as backup: no failover");
        }
    }
    std::string cpus = env::get_str(env::kProxyCpus);
    if (!cpus.empty()) {
        std::vector<std::string> lists;
        VCCL_RETURN_IF_ERROR(topo_parse_cpulists(cpus, "VCCL_PROXY_CPUS", &lists));
        choice->cpulist = lists[static_cast<size_t>(local_rank) % lists.size()];
        choice->reasons.push_back("proxy CPUs " + choice->cpulist + " from VCCL_PROXY_CPUS");
    }
    return vcclSuccess;
}

} // namespace

vcclResult_t topo_choose(const Topology& topo, int local_rank, int local_size, RailChoice* out) {
    if (local_size < 1 || local_rank < 0 || local_rank >= local_size)
        return set_last_error(vcclInvalidArgument, "local rank %d is not in [0, %d)", local_rank, local_size);
    RailChoice choice;
    int gpu = -1;
    if (!topo.gpus().empty()) {
        std::vector<int> primaries, backups;
        gpu = local_rank % static_cast<int>(topo.gpus().size());
        choice = plan_gpus(topo, &primaries, &backups)[static_cast<size_t>(gpu)];
    } else {
        int primary, backup;
        choice = plan_process(topo, local_rank, &primary, &backup);
    }
    choice.local_rank = local_rank;
    VCCL_RETURN_IF_ERROR(apply_overrides(topo, local_rank, gpu, &choice));
    // Rails matter for RDMA NICs; a host with only plain netdevs (a laptop, a CI runner) runs over shared
    // memory and TCP, where a missing backup rail is expected, so it is not worth a warning there.
    int primary_nic = topo.find_nic(choice.primary_device, choice.primary_port);
    bool rdma = primary_nic >= 0 && topo.nics()[static_cast<size_t>(primary_nic)].rdma;
    for (const std::string& w : choice.warnings) {
        if (rdma) {
            VCCL_WARN(kLogTopo, "local rank %d: %s", local_rank, w.c_str());
        } else {
            VCCL_INFO(kLogTopo, "local rank %d: %s", local_rank, w.c_str());
        }
    }
    VCCL_INFO(kLogTopo, "local rank %d: GPU %d primary %s backup %s proxy CPUs %s", local_rank, gpu,
              choice.primary_ucx.empty() ? "-" : choice.primary_ucx.c_str(),
              choice.backup_ucx.empty() ? "-" : choice.backup_ucx.c_str(), choice.cpulist.c_str());
    *out = std::move(choice);
    return vcclSuccess;
}

std::string topo_primary_devices(int local_rank, int local_size, const std::vector<std::string>& gpu_busids) {
    TopoOptions options;
    options.gpu_busids = gpu_busids;
    std::unique_ptr<Topology> topo;
    RailChoice choice;
    if (topo_load(options, &topo) != vcclSuccess) {
        /* Without a topology the user's list still holds; otherwise UCX chooses. */
        VCCL_WARN(kLogTopo, "topology unavailable (%s)", last_error_message());
        DeviceEntry entry;
        bool set = false;
        if (local_size < 1 || local_rank < 0 ||
            read_override(env::kNetDevices, "VCCL_NET_DEVICES", local_rank, &entry, &set) != vcclSuccess || !set)
            return "";
        return entry.port > 0 ? entry.device + ":" + std::to_string(entry.port) : entry.device;
    }
    if (topo_choose(*topo, local_rank, local_size, &choice) != vcclSuccess) {
        VCCL_WARN(kLogTopo, "no rail choice (%s); leaving the network device choice to UCX", last_error_message());
        return "";
    }
    if (env::is_set(env::kNetDevices)) return choice.primary_ucx;
    int nic = topo->find_nic(choice.primary_device, choice.primary_port);
    return nic >= 0 && topo->nics()[nic].rdma ? choice.primary_ucx : "";
}

std::string topo_backup_devices(int local_rank, int local_size, const std::vector<std::string>& gpu_busids) {
    TopoOptions options;
    options.gpu_busids = gpu_busids;
    std::unique_ptr<Topology> topo;
    RailChoice choice;
    if (topo_load(options, &topo) != vcclSuccess) {
        DeviceEntry entry;
        bool set = false;
        if (local_size < 1 || local_rank < 0 ||
            read_override(env::kBackupNetDevices, "VCCL_BACKUP_NET_DEVICES", local_rank, &entry, &set) != vcclSuccess ||
            !set || entry.device == "none")
            return "";
        return entry.port > 0 ? entry.device + ":" + std::to_string(entry.port) : entry.device;
    }
    if (topo_choose(*topo, local_rank, local_size, &choice) != vcclSuccess) return "";
    if (choice.backup_ucx.empty() || choice.backup_ucx == choice.primary_ucx) return "";
    if (env::is_set(env::kBackupNetDevices)) return choice.backup_ucx;
    /* A backup chosen by the topology alone is used only on RDMA NICs, as for the primary. */
    int nic = topo->find_nic(choice.backup_device, choice.backup_port);
    return nic >= 0 && topo->nics()[nic].rdma ? choice.backup_ucx : "";
}

} // namespace vccl

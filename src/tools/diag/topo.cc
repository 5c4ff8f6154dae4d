/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-diag topo: what the rail choice of src/topo gives each GPU (the same plan every rank computes), how
 * far each GPU is from its NICs, and whether the PCIe links run at the width and speed they were built for. */
#include <cstdio>
#include <memory>
#include <set>

#include "core/status.h"
#include "tools/diag/diag.h"
#include "topo/topo.h"

namespace vdiag {

namespace {

using vtel::json_str;

std::string link_text(const PcieLink& l) {
    if (!l.present) return "link n/a";
    char buf[96];
    snprintf(buf, sizeof(buf), "x%d/x%d %.1f/%.1f GT/s", l.width, l.max_width, l.speed, l.max_speed);
    return buf;
}

std::string link_json(const PcieLink& l) {
    if (!l.present) return "null";
    char buf[160];
    snprintf(buf, sizeof(buf), "{\"width\":%d,\"max_width\":%d,\"speed\":%.1f,\"max_speed\":%.1f,\"degraded\":%s}",
             l.width, l.max_width, l.speed, l.max_speed,
             l.width_degraded() || l.speed_degraded() ? "true" : "false");
    return buf;
}

/* A degraded width is always a finding. A lower speed is one for NICs; GPUs lower their link speed when
 * idle to save power, so for them it is only a note (check again under load). */
void judge_link(const std::string& what, const PcieLink& l, bool is_gpu, Section* out, std::vector<std::string>* notes) {
    char buf[256];
    if (l.width_degraded()) {
        snprintf(buf, sizeof(buf), "%s: PCIe link x%d, below its maximum x%d (degraded)", what.c_str(), l.width,
                 l.max_width);
        out->findings.push_back(buf);
    }
    if (l.speed_degraded()) {
        snprintf(buf, sizeof(buf), "%s: PCIe link %.1f GT/s, below its maximum %.1f GT/s%s", what.c_str(), l.speed,
                 l.max_speed, is_gpu ? " (GPUs slow their link when idle: check under load)" : " (degraded)");
        (is_gpu ? *notes : out->findings).push_back(buf);
    }
}

struct Rail {
    int nic = -1;
    vccl::Path path;
};

Rail rail(const vccl::Topology& topo, int gpu, const std::string& device, int port) {
    Rail r;
    if (device.empty()) return r;
    r.nic = topo.find_nic(device, port);
    if (r.nic >= 0) r.path = gpu >= 0 ? topo.path(gpu, r.nic) : topo.anchor_path(r.nic);
    return r;
}

std::string rail_json(const vccl::Topology& topo, const Rail& r, const std::string& ucx) {
    if (ucx.empty()) return "null";
    std::string j = "{\"device\":" + json_str(ucx);
    if (r.nic >= 0) j += ",\"busid\":" + json_str(topo.nics()[size_t(r.nic)].busid) + ",\"path\":" +
                         json_str(vccl::path_name(r.path));
    return j + "}";
}

std::string rail_text(const Rail& r, const std::string& ucx) {
    if (ucx.empty()) return "none";
    return ucx + (r.nic >= 0 ? " (" + vccl::path_name(r.path) + ")" : " (not in topology)");
}

} // namespace

bool check_topo(const TopoOptions& o, Section* out, std::string* error) {
    out->name = "topo";
    std::unique_ptr<vccl::Topology> topo;
    if (vccl::topo_load(vccl::TopoOptions(), &topo) != vcclSuccess) {
        *error = std::string("cannot load the topology: ") + vccl::last_error_message();
        return false;
    }
    const auto& gpus = topo->gpus();
    const auto& nics = topo->nics();
    std::vector<std::string> notes;
    std::string t = "topo: source " + topo->source() + ", " + std::to_string(gpus.size()) + " GPU(s), " +
                    std::to_string(nics.size()) + " NIC(s)\n";
    std::string j = "{\"source\":" + json_str(topo->source()) + ",\"gpus\":[";
    if (gpus.empty() && nics.empty()) {
        notes.push_back("no GPU and no NIC found: nothing to check");
    } else if (nics.empty()) {
        notes.push_back("no NIC found: only intra-node transports are possible");
    }

    // One entry per GPU, or one for this process on a host without GPUs (rank -1 in the output).
    int entries = gpus.empty() ? (nics.empty() ? 0 : 1) : int(gpus.size());
    for (int r = 0; r < entries; ++r) {
        vccl::RailChoice c;
        if (vccl::topo_choose(*topo, r, entries, &c) != vcclSuccess) {
            *error = std::string("rail choice failed: ") + vccl::last_error_message();
            return false;
        }
        int gpu = c.gpu;
        Rail p = rail(*topo, gpu, c.primary_device, c.primary_port);
        Rail b = rail(*topo, gpu, c.backup_device, c.backup_port);
        std::string who = gpu >= 0 ? "GPU" + std::to_string(gpu) + " " + gpus[size_t(gpu)].busid : "process";
        PcieLink gl = gpu >= 0 ? read_pcie_link(o.sysfs, gpus[size_t(gpu)].busid) : PcieLink();
        t += "  " + who + ": primary " + rail_text(p, c.primary_ucx) + ", backup " + rail_text(b, c.backup_ucx);
        if (gpu >= 0) t += ", " + link_text(gl);
        t += "\n";
        bool shared = p.nic >= 0 && b.nic >= 0 && nics[size_t(p.nic)].hca >= 0 &&
                      nics[size_t(p.nic)].hca == nics[size_t(b.nic)].hca;
        if (gpu >= 0 && p.nic >= 0 && p.path.type == vccl::PathType::kSYS)
            out->findings.push_back(who + ": primary NIC " + c.primary_ucx + " is SYS-far (across NUMA nodes)");
        if (shared)
            out->findings.push_back(who + ": backup NIC " + c.backup_ucx + " shares the card of primary " +
                                    c.primary_ucx + " (one card failure takes both paths)");
        if (!c.primary_ucx.empty() && c.backup_ucx.empty()) notes.push_back(who + ": no backup NIC (no failover)");
        if (gpu >= 0) judge_link(who, gl, true, out, &notes);
        j += std::string(r ? "," : "") + "{\"gpu\":" + std::to_string(gpu) + ",\"busid\":" +
             json_str(gpu >= 0 ? gpus[size_t(gpu)].busid : "") + ",\"pcie\":" + link_json(gl) + ",\"primary\":" +
             rail_json(*topo, p, c.primary_ucx) + ",\"backup\":" + rail_json(*topo, b, c.backup_ucx) +
             ",\"shared_card\":" + (shared ? "true" : "false") + "}";
    }

    // Every NIC's link once (ports of one card share it).
    j += "],\"nics\":[";
    std::set<std::string> seen;
    bool first = true;
    for (const vccl::TopoNic& n : nics) {
        if (n.busid.empty() || !seen.insert(n.busid).second) continue;
        PcieLink l = read_pcie_link(o.sysfs, n.busid);
        t += "  NIC " + n.ucx_name() + " " + n.busid + ": " + link_text(l) + "\n";
        judge_link("NIC " + n.ucx_name() + " " + n.busid, l, false, out, &notes);
        j += std::string(first ? "" : ",") + "{\"device\":" + json_str(n.ucx_name()) + ",\"busid\":" +
             json_str(n.busid) + ",\"pcie\":" + link_json(l) + "}";
        first = false;
    }
    j += "],\"notes\":[";
    for (size_t i = 0; i < notes.size(); ++i) {
        t += "  note: " + notes[i] + "\n";
        j += (i ? "," : "") + json_str(notes[i]);
    }
    out->text = t;
    out->json = j + "]}";
    return true;
}

} // namespace vdiag

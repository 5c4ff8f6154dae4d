/* SPDX-License-Identifier: BSD-3-Clause */
/* Text and JSON views of a Topology and rail choices (vccl-info -t). The text matrix follows
 * `nvidia-smi topo -m` so users can compare the two side by side. */
#include <algorithm>
#include <cstdio>
#include <string>

#include "topo/topo.h"

namespace vccl {

std::string path_name(const Path& path) {
    switch (path.type) {
    case PathType::kNV: return "NV" + std::to_string(path.nvlinks);
    case PathType::kPIX: return "PIX";
    case PathType::kPXB: return "PXB";
    case PathType::kPHB: return "PHB";
    case PathType::kNODE: return "NODE";
    case PathType::kSYS: break;
    }
    return "SYS";
}

std::string TopoNic::ucx_name() const { return rdma ? device + ":" + std::to_string(port) : device; }

namespace {

std::string pad(const std::string& text, size_t width) {
    return text.size() >= width ? text + " " : text + std::string(width - text.size(), ' ');
}

/* Columns are padded; lines must not end in blanks. */
std::string trim_lines(const std::string& text) {
    std::string out;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        line.erase(line.find_last_not_of(' ') + 1);
        out += line;
        if (nl == std::string::npos) break;
        out += '\n';
        pos = nl + 1;
    }
    return out;
}

std::string or_dash(const std::string& text) { return text.empty() ? "-" : text; }

std::string json_str(const std::string& text) {
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            snprintf(buf, sizeof(buf), "\\u%04x", c);
            out += buf;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

std::string json_list(const std::vector<std::string>& items, bool quote) {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + (quote ? json_str(items[i]) : items[i]);
    return out + "]";
}

std::string json_matrix(const std::vector<std::vector<Path>>& m, bool self_diagonal) {
    std::vector<std::string> rows;
    for (size_t r = 0; r < m.size(); ++r) {
        std::vector<std::string> cells;
        for (size_t c = 0; c < m[r].size(); ++c) cells.push_back(self_diagonal && r == c ? "X" : path_name(m[r][c]));
        rows.push_back(json_list(cells, true));
    }
    return json_list(rows, false);
}

const char* const kLegend =
    "Legend:\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes\n"
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
    "  PIX  = Connection traversing at most a single PCIe bridge\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n";

std::string numa_text(int numa) { return numa >= 0 ? std::to_string(numa) : "N/A"; }

} // namespace

std::string topo_format_text(const Topology& topo, const std::vector<RailChoice>& choices) {
    const auto& gpus = topo.gpus();
    const auto& nics = topo.nics();
    std::string out = "# topology (" + topo.source() + "): " + std::to_string(gpus.size()) + " GPUs, " +
                      std::to_string(nics.size()) + " NICs, " + std::to_string(topo.numa_nodes().size()) +
                      " NUMA nodes, " + std::to_string(topo.switches().size()) + " PCIe switches\n";
    /* Matrix: rows are GPUs then NICs (or the process anchor "CPU" on hosts without GPUs). */
    std::vector<std::string> cols;
    for (size_t g = 0; g < gpus.size(); ++g) cols.push_back("GPU" + std::to_string(g));
    for (size_t n = 0; n < nics.size(); ++n) cols.push_back("NIC" + std::to_string(n));
    size_t cw = 6;
    for (const std::string& c : cols) cw = std::max(cw, c.size() + 1);
    size_t aff = 14;
    for (const TopoGpu& g : gpus) aff = std::max(aff, g.cpulist.size() + 2);
    aff = std::max(aff, topo.anchor_cpulist().size() + 2);
    out += pad("", 8);
    for (const std::string& c : cols) out += pad(c, cw);
    if (!gpus.empty()) out += pad("CPU Affinity", aff) + "NUMA Affinity";
    out += "\n";
    for (size_t g = 0; g < gpus.size(); ++g) {
        out += pad(cols[g], 8);
        for (size_t h = 0; h < gpus.size(); ++h) out += pad(g == h ? " X" : path_name(topo.gpu_path(g, h)), cw);
        for (size_t n = 0; n < nics.size(); ++n) out += pad(path_name(topo.path(g, n)), cw);
        out += pad(gpus[g].cpulist, aff) + numa_text(gpus[g].numa) + "\n";
    }
    if (gpus.empty() && !nics.empty()) {
        out += pad("CPU", 8);
        for (size_t n = 0; n < nics.size(); ++n) out += pad(path_name(topo.anchor_path(n)), cw);
        out += "  (this process: CPUs " + topo.anchor_cpulist() + ")\n";
    }
    for (size_t n = 0; n < nics.size(); ++n) {
        out += pad(cols[gpus.size() + n], 8);
        for (size_t g = 0; g < gpus.size(); ++g) out += pad(path_name(topo.path(g, n)), cw);
        for (size_t m = 0; m < nics.size(); ++m) out += pad(n == m ? " X" : path_name(topo.nic_path(n, m)), cw);
        out += "\n";
    }
    out += "\n";
    out += kLegend;
    if (!gpus.empty()) {
        out += "\nGPUs:\n";
        for (size_t g = 0; g < gpus.size(); ++g) {
            const TopoGpu& gpu = gpus[g];
            out += "  GPU" + std::to_string(g) + ": " + gpu.busid + "  NUMA " + numa_text(gpu.numa) + "  switch " +
                   (gpu.pci_switch >= 0 ? std::to_string(gpu.pci_switch) : "-") +
                   (gpu.located ? "" : "  (not in the hwloc topology)") + "\n";
        }
    }
    out += "\nNICs:\n";
    if (nics.empty()) out += "  (none)\n";
    for (size_t n = 0; n < nics.size(); ++n) {
        const TopoNic& nic = nics[n];
        out += "  NIC" + std::to_string(n) + ": " + pad(nic.ucx_name(), 10) + (nic.rdma ? "rdma " : "net  ") +
               pad(or_dash(nic.link_layer), 11) + "netdev " + pad(or_dash(nic.netdev), 10) + nic.busid + "  NUMA " +
               numa_text(nic.numa) + "  switch " + (nic.pci_switch >= 0 ? std::to_string(nic.pci_switch) : "-") +
               "  card " + std::to_string(nic.hca) + (nic.active ? "" : "  (port not active)") + "\n";
    }
    out += "\nRail choice per local rank (override: VCCL_NET_DEVICES, VCCL_BACKUP_NET_DEVICES, VCCL_PROXY_CPUS):\n";
    out += "  " + pad("RANK", 6) + pad("GPU", 6) + pad("PRIMARY", 12) + pad("BACKUP", 12) + "PROXY CPUS\n";
    for (const RailChoice& c : choices) {
        out += "  " + pad(std::to_string(c.local_rank), 6) + pad(c.gpu >= 0 ? "GPU" + std::to_string(c.gpu) : "-", 6) +
               pad(or_dash(c.primary_ucx), 12) + pad(or_dash(c.backup_ucx), 12) + c.cpulist + "\n";
        for (const std::string& r : c.reasons) out += "        " + r + "\n";
        for (const std::string& w : c.warnings) out += "        warning: " + w + "\n";
    }
    return trim_lines(out);
}

std::string topo_format_json(const Topology& topo, const std::vector<RailChoice>& choices) {
    std::vector<std::string> items;
    for (const TopoGpu& g : topo.gpus())
        items.push_back("{\"busid\": " + json_str(g.busid) + ", \"numa\": " + std::to_string(g.numa) +
                        ", \"switch\": " + std::to_string(g.pci_switch) + ", \"cpulist\": " + json_str(g.cpulist) +
                        ", \"located\": " + (g.located ? "true" : "false") + "}");
    std::string out = "{\"source\": " + json_str(topo.source()) + ", \"gpus\": " + json_list(items, false);
    items.clear();
    for (const TopoNic& n : topo.nics())
        items.push_back("{\"device\": " + json_str(n.device) + ", \"port\": " + std::to_string(n.port) +
                        ", \"ucx\": " + json_str(n.ucx_name()) + ", \"rdma\": " + (n.rdma ? "true" : "false") +
                        ", \"active\": " + (n.active ? "true" : "false") + ", \"link_layer\": " + json_str(n.link_layer) +
                        ", \"netdev\": " + json_str(n.netdev) + ", \"busid\": " + json_str(n.busid) +
                        ", \"card\": " + std::to_string(n.hca) + ", \"numa\": " + std::to_string(n.numa) +
                        ", \"switch\": " + std::to_string(n.pci_switch) + "}");
    out += ", \"nics\": " + json_list(items, false);
    items.clear();
    for (const TopoNuma& n : topo.numa_nodes())
        items.push_back("{\"os_index\": " + std::to_string(n.os_index) + ", \"cpulist\": " + json_str(n.cpulist) + "}");
    out += ", \"numa_nodes\": " + json_list(items, false);
    items.clear();
    for (const TopoSwitch& s : topo.switches())
        items.push_back("{\"busid\": " + json_str(s.busid) + ", \"numa\": " + std::to_string(s.numa) + "}");
    out += ", \"switches\": " + json_list(items, false);
    std::vector<std::vector<Path>> gpu_nic, gpu_gpu, nic_nic;
    for (size_t g = 0; g < topo.gpus().size(); ++g) {
        gpu_nic.emplace_back();
        gpu_gpu.emplace_back();
        for (size_t n = 0; n < topo.nics().size(); ++n) gpu_nic.back().push_back(topo.path(g, n));
        for (size_t h = 0; h < topo.gpus().size(); ++h) gpu_gpu.back().push_back(topo.gpu_path(g, h));
    }
    std::vector<std::string> anchor;
    for (size_t n = 0; n < topo.nics().size(); ++n) {
        nic_nic.emplace_back();
        for (size_t m = 0; m < topo.nics().size(); ++m) nic_nic.back().push_back(topo.nic_path(n, m));
        anchor.push_back(path_name(topo.anchor_path(n)));
    }
    out += ", \"gpu_nic\": " + json_matrix(gpu_nic, false) + ", \"gpu_gpu\": " + json_matrix(gpu_gpu, true) +
           ", \"nic_nic\": " + json_matrix(nic_nic, true);
    out += ", \"process\": {\"cpulist\": " + json_str(topo.anchor_cpulist()) + ", \"nic\": " + json_list(anchor, true) + "}";
    items.clear();
    for (const RailChoice& c : choices)
        items.push_back("{\"local_rank\": " + std::to_string(c.local_rank) + ", \"gpu\": " + std::to_string(c.gpu) +
                        ", \"primary\": " + json_str(c.primary_ucx) + ", \"backup\": " + json_str(c.backup_ucx) +
                        ", \"proxy_cpus\": " + json_str(c.cpulist) + ", \"reasons\": " + json_list(c.reasons, true) +
                        ", \"warnings\": " + json_list(c.warnings, true) + "}");
    out += ", \"choices\": " + json_list(items, false) + "}";
    return out;
}

} // namespace vccl

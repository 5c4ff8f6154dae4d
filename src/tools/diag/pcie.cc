/* SPDX-License-Identifier: BSD-3-Clause */
/* PCIe link state from sysfs. The kernel exposes what the link trained to (current_*) next to what both
 * ends support (max_*); a link below its max after a reseat or a bad riser is a classic silent slowdown. */
#include <cstdlib>
#include <fstream>

#include "tools/diag/diag.h"

namespace vdiag {

namespace {

bool read_line(const std::string& path, std::string* out) {
    std::ifstream in(path);
    return in && std::getline(in, *out);
}

} // namespace

double parse_link_speed(const std::string& text) {
    const char* s = text.c_str();
    char* end = nullptr;
    double v = strtod(s, &end);
    if (end == s || v <= 0) return 0; // "Unknown", "" (a function that has no link of its own)
    return v;
}

PcieLink read_pcie_link(const std::string& sysfs, const std::string& busid) {
    PcieLink link;
    if (busid.empty()) return link;
    std::string dir = sysfs + "/bus/pci/devices/" + busid + "/";
    std::string cw, mw, cs, ms;
    if (!read_line(dir + "current_link_width", &cw) || !read_line(dir + "max_link_width", &mw)) return link;
    link.present = true;
    link.width = atoi(cw.c_str());
    link.max_width = atoi(mw.c_str());
    if (read_line(dir + "current_link_speed", &cs)) link.speed = parse_link_speed(cs);
    if (read_line(dir + "max_link_speed", &ms)) link.max_speed = parse_link_speed(ms);
    return link;
}

} // namespace vdiag

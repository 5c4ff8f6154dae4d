/* SPDX-License-Identifier: BSD-3-Clause */
/* cpulist text <-> hwloc bitmaps. hwloc's own list parser accepts more than a cpulist (infinite ranges,
 * stray characters), so the text is checked here first: a malformed VCCL_PROXY_CPUS must not pin the
 * proxy thread somewhere unexpected. */
#include "topo/cpulist.h"

#include <cstdlib>
#include <vector>

namespace vccl {

std::string topo_cpulist_text(hwloc_const_bitmap_t set) {
    char* text = nullptr;
    if (set == nullptr || hwloc_bitmap_list_asprintf(&text, set) < 0 || text == nullptr) return "";
    std::string out(text);
    free(text);
    return out;
}

bool topo_cpulist_parse(const std::string& text, hwloc_bitmap_t set) {
    hwloc_bitmap_t parsed = hwloc_bitmap_alloc();
    bool ok = !text.empty();
    size_t pos = 0;
    while (ok && pos <= text.size()) {
        size_t comma = text.find(',', pos);
        std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        size_t dash = item.find('-');
        std::string lo = item.substr(0, dash), hi = dash == std::string::npos ? lo : item.substr(dash + 1);
        ok = !lo.empty() && !hi.empty() && lo.find_first_not_of("0123456789") == std::string::npos &&
             hi.find_first_not_of("0123456789") == std::string::npos && lo.size() < 7 && hi.size() < 7;
        if (ok) {
            long first = strtol(lo.c_str(), nullptr, 10), last = strtol(hi.c_str(), nullptr, 10);
            ok = first <= last;
            if (ok) hwloc_bitmap_set_range(parsed, static_cast<unsigned>(first), static_cast<int>(last));
        }
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    if (ok) hwloc_bitmap_copy(set, parsed);
    hwloc_bitmap_free(parsed);
    return ok;
}

bool topo_cpulist_normalize(const std::string& text, std::string* out) {
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    bool ok = topo_cpulist_parse(text, set);
    if (ok) *out = topo_cpulist_text(set);
    hwloc_bitmap_free(set);
    return ok;
}

} // namespace vccl

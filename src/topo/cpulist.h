/* SPDX-License-Identifier: BSD-3-Clause */
/* cpulists ("0-15,32-47", the syntax of taskset -c and /sys/.../cpulist) to and from hwloc bitmaps. */
#ifndef VCCL_TOPO_CPULIST_H_
#define VCCL_TOPO_CPULIST_H_

#include <hwloc.h>

#include <string>

namespace vccl {

std::string topo_cpulist_text(hwloc_const_bitmap_t set);
/* Strict: digits, '-' and ',' only, ranges ascending, not empty. Leaves `set` untouched on failure. */
bool topo_cpulist_parse(const std::string& text, hwloc_bitmap_t set);
/* Normalized text of a valid cpulist ("3,0-2" -> "0-3"); false when invalid. */
bool topo_cpulist_normalize(const std::string& text, std::string* out);

} // namespace vccl

#endif

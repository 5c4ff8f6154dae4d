/* SPDX-License-Identifier: BSD-3-Clause */
/* Parsing of the per-local-rank overrides VCCL_NET_DEVICES, VCCL_BACKUP_NET_DEVICES, VCCL_PROXY_CPUS. */
#ifndef VCCL_TOPO_OVERRIDES_H_
#define VCCL_TOPO_OVERRIDES_H_

#include <string>
#include <vector>

#include "vccl.h"

namespace vccl {

struct DeviceEntry {
    std::string device; // "mlx5_0", "eth0"; "none" disables (backup list only)
    int port = 0;       // 0: not given
};

/* "mlx5_0:1,mlx5_1:1": entries separated by ',', each NAME or NAME:PORT. `var` names the variable in the
 * error. Errors: vcclInvalidArgument. */
vcclResult_t topo_parse_devices(const std::string& text, const char* var, std::vector<DeviceEntry>* out);

/* "0-15,32-47;16-31,48-63": cpulists separated by ';' (',' is taken by the cpulist itself), each
 * normalized. Errors: vcclInvalidArgument. */
vcclResult_t topo_parse_cpulists(const std::string& text, const char* var, std::vector<std::string>* out);

} // namespace vccl

#endif

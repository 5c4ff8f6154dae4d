/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A testing aid of vccl-perf (--emulated-hosts) and vccl-diag sweep (--netns-prefix): a rank enters a named
 * network namespace itself, because mpirun cannot start ranks in separate ones (tests/hosts and tests/fault
 * build the namespaces; DESIGN.md has the recipes).
 */
#ifndef VCCL_TOOLS_COMMON_NETNS_H_
#define VCCL_TOOLS_COMMON_NETNS_H_

#include <string>

namespace vtools {

/* Enters network namespace /var/run/netns/NAME with a fresh sysfs in a mount namespace of its own, as
 * `ip netns exec` does: UCX and hwloc list network devices from /sys/class/net, which shows the namespace
 * that mounted it. With own_host_name, also a UTS namespace whose host name is NAME (vccl groups ranks into
 * hosts by host name). The namespaces belong to the calling thread and the threads it starts afterwards
 * (vccl's and UCX's), so call it before vccl opens any socket. MPI keeps working over shared memory.
 * False with *error when a step fails. */
bool enter_named_netns(const std::string& name, bool own_host_name, std::string* error);

} // namespace vtools

#endif

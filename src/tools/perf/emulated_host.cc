/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --emulated-hosts PREFIX:H0,H1,...: a testing aid for runs across emulated hosts on one machine
 * (tests/hosts/hosts-common.sh builds them). mpirun cannot start ranks in separate network namespaces, so rank r
 * enters namespace PREFIX<H_r> itself (tools/common/netns.h), with a host name of PREFIX<H_r>: vccl groups ranks
 * into hosts by host name.
 */
#include <string>
#include <vector>

#include "tools/common/netns.h"
#include "tools/perf/perf.h"

namespace vperf {

bool enter_emulated_host(const std::string& spec, int rank, int nranks, std::string* error) {
    size_t colon = spec.find(':');
    std::string prefix = spec.substr(0, colon), list = spec.substr(colon + 1);
    std::vector<std::string> hosts;
    for (size_t pos = 0; pos <= list.size();) {
        size_t comma = list.find(',', pos);
        if (comma == std::string::npos) comma = list.size();
        hosts.push_back(list.substr(pos, comma - pos));
        pos = comma + 1;
    }
    if (int(hosts.size()) != nranks) {
        *error = "the list names " + std::to_string(hosts.size()) + " hosts for " + std::to_string(nranks) + " ranks";
        return false;
    }
    return vtools::enter_named_netns(prefix + hosts[size_t(rank)], true, error);
}

} // namespace vperf

/* SPDX-License-Identifier: BSD-3-Clause */
#include "algo/host_groups.h"

#include <map>

namespace vccl {

HostGroups HostGroups::from_hosts(const std::vector<int>& host_of_rank) {
    HostGroups g;
    const size_t n = host_of_rank.size();
    g.host_.resize(n);
    g.local_.resize(n);
    std::map<int, int> index; // given label -> host index, in the order of each host's lowest rank
    for (size_t r = 0; r < n; ++r) {
        auto it = index.find(host_of_rank[r]);
        if (it == index.end()) {
            it = index.emplace(host_of_rank[r], int(g.members_.size())).first;
            g.members_.emplace_back();
        }
        g.host_[r] = it->second;
        g.local_[r] = int(g.members_[size_t(it->second)].size());
        g.members_[size_t(it->second)].push_back(int(r));
    }
    g.per_host_ = g.members_.empty() ? 0 : int(g.members_[0].size());
    for (const std::vector<int>& m : g.members_) {
        if (int(m.size()) != g.per_host_) g.per_host_ = 0;
    }
    g.rails_.resize(size_t(g.per_host_));
    for (int l = 0; l < g.per_host_; ++l) {
        for (const std::vector<int>& m : g.members_) g.rails_[size_t(l)].push_back(m[size_t(l)]);
    }
    return g;
}

HostGroups HostGroups::from_ids(const std::vector<uint64_t>& host_ids) {
    std::map<uint64_t, int> label;
    std::vector<int> hosts(host_ids.size());
    for (size_t r = 0; r < host_ids.size(); ++r) {
        auto it = label.emplace(host_ids[r], int(label.size())).first;
        hosts[r] = it->second;
    }
    return from_hosts(hosts);
}

} // namespace vccl

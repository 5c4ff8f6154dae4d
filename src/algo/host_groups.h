/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which ranks of a communicator share a host, as the bootstrap's host-name exchange found it (comm_init.cc):
 * the host index and local rank of every rank, and each host's ranks. Two-level algorithms (algo/twolevel/)
 * are built on it: an intra-host phase among a host's ranks, an inter-host phase among the ranks of one local
 * index (one rail) across hosts.
 *
 * Hosts are numbered in the order of their lowest rank; a host's ranks are listed in rank order and local rank
 * g is the g-th of them. Ranks need not be contiguous per host.
 */
#ifndef VCCL_ALGO_HOST_GROUPS_H_
#define VCCL_ALGO_HOST_GROUPS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vccl {

class HostGroups {
public:
    HostGroups() = default;
    /* From one identifier per rank (ranks with equal identifiers share a host). */
    static HostGroups from_ids(const std::vector<uint64_t>& host_ids);
    /* From the host index of every rank (tests describe layouts this way); indices need not be ordered. */
    static HostGroups from_hosts(const std::vector<int>& host_of_rank);

    int nranks() const { return int(host_.size()); }
    int nhosts() const { return int(members_.size()); }
    int host_of(int rank) const { return host_[size_t(rank)]; }
    int local_rank(int rank) const { return local_[size_t(rank)]; }
    int local_size(int rank) const { return int(members_[size_t(host_of(rank))].size()); }
    /* The ranks of host h, in rank order. */
    const std::vector<int>& host_ranks(int h) const { return members_[size_t(h)]; }
    /* Ranks per host when every host has the same number, else 0 (uneven). */
    int ranks_per_host() const { return per_host_; }
    /* The ranks of local index g on every host, by host index (one rail); only where ranks_per_host() > g. */
    const std::vector<int>& rail_ranks(int g) const { return rails_[size_t(g)]; }
    /* Whether two levels can run: more than one host, the same number of ranks on each, more than one there. */
    bool two_level() const { return nhosts() > 1 && per_host_ > 1; }

private:
    std::vector<int> host_, local_;
    std::vector<std::vector<int>> members_, rails_;
    int per_host_ = 0;
};

} // namespace vccl

#endif

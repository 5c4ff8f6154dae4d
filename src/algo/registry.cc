/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The algorithm registry: the list of every algorithm, the VCCL_ALGO override, and the default choice by
 * message size and rank count.
 */
#include <cstdio>
#include <cstring>
#include <string>
#include <strings.h>

#include "algo/algo.h"
#include "algo/device/device_algo.h"
#include "core/dtype.h"
#include "core/env.h"
#include "core/log.h"

namespace vccl {

namespace {

/* algo_list() hands out a contiguous array, so the descriptors (defined in their own files) are copied into
 * one on first use. A function-local static avoids depending on the order of static initialisation across
 * files; the descriptors themselves are constant-initialised. */
const Algorithm* table(size_t* count) {
    static const Algorithm kTable[] = {
        kAllReduceRing,  kAllReduceRecursiveDoubling, kBroadcastBinomial, kBroadcastChain,  kReduceBinomial,
        kReduceChain,    kAllGatherRing,              kReduceScatterRing, kAlltoAllPairwise,
        kAllReduceTwoLevel, kBroadcastTwoLevel, kReduceTwoLevel, kAllGatherTwoLevel, kReduceScatterTwoLevel,
        kAlltoAllTwoLevel,
    };
    *count = sizeof(kTable) / sizeof(kTable[0]);
    return kTable;
}

const Algorithm* find(int coll, const char* name) {
    size_t n;
    const Algorithm* all = table(&n);
    // algo_select passes a descriptor's own name string, which the table's copies share: a pointer match
    // first (strcasecmp on every collective was 3% of an 8-byte allreduce), then by spelling (VCCL_ALGO).
    for (size_t i = 0; i < n; ++i) {
        if (int(all[i].coll) == coll && all[i].name == name) return &all[i];
    }
    for (size_t i = 0; i < n; ++i) {
        if (int(all[i].coll) == coll && strcasecmp(all[i].name, name) == 0) return &all[i];
    }
    return nullptr;
}

const char* const kCollNames[int(CollType::kCount)] = {"allreduce", "broadcast",     "reduce",
                                                       "allgather", "reducescatter", "alltoall"};

int coll_from_name(const std::string& name) {
    for (int c = 0; c < int(CollType::kCount); ++c) {
        if (strcasecmp(name.c_str(), kCollNames[c]) == 0) return c;
    }
    if (strcasecmp(name.c_str(), "bcast") == 0) return int(CollType::Broadcast); // the env doc's example
    return -1;
}

std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

/* "ring, recursive_doubling, ll, ..." for one collective (host algorithms first, then device ones), or every
 * "coll:name" when coll < 0. */
std::string valid_names(int coll) {
    std::string out;
    auto add = [&](CollType c, const char* name) {
        if (coll >= 0 && int(c) != coll) return;
        if (!out.empty()) out += ", ";
        if (coll < 0) out += std::string(coll_name(c)) + ":";
        out += name;
    };
    size_t n;
    const Algorithm* all = table(&n);
    for (size_t i = 0; i < n; ++i) add(all[i].coll, all[i].name);
    const DeviceAlgorithm* const* dev = device_algo_list(&n);
    for (size_t i = 0; i < n; ++i) add(dev[i]->coll, dev[i]->name);
    return out;
}

void append_error(std::string* all, const std::string& msg) {
    if (!all->empty()) *all += "; ";
    *all += msg;
}

} // namespace

const char* coll_name(CollType coll) {
    int c = int(coll);
    return c >= 0 && c < int(CollType::kCount) ? kCollNames[c] : "invalid";
}

const Algorithm* algo_list(size_t* count) {
    return table(count);
}

bool algo_parse_override(const char* spec, const Algorithm* chosen[int(CollType::kCount)], char* error,
                         size_t error_len, const DeviceAlgorithm* device_chosen[int(CollType::kCount)]) {
    for (int c = 0; c < int(CollType::kCount); ++c) chosen[c] = nullptr;
    if (device_chosen != nullptr) {
        for (int c = 0; c < int(CollType::kCount); ++c) device_chosen[c] = nullptr;
    }
    std::string errors;
    std::string text = spec == nullptr ? std::string() : std::string(spec);
    size_t pos = 0;
    while (pos <= text.size()) {
        size_t comma = text.find(',', pos);
        if (comma == std::string::npos) comma = text.size();
        std::string entry = trim(text.substr(pos, comma - pos));
        pos = comma + 1;
        if (entry.empty()) continue;
        size_t colon = entry.find(':');
        if (colon == std::string::npos) {
            append_error(&errors, "'" + entry + "' is not COLLECTIVE:ALGORITHM");
            continue;
        }
        std::string cname = trim(entry.substr(0, colon)), aname = trim(entry.substr(colon + 1));
        int coll = coll_from_name(cname);
        if (coll < 0) {
            append_error(&errors, "unknown collective '" + cname + "' (collectives: allreduce, broadcast, "
                                  "reduce, allgather, reducescatter, alltoall)");
            continue;
        }
        const Algorithm* found = find(coll, aname.c_str());
        const DeviceAlgorithm* device = found == nullptr ? device_algo_find(CollType(coll), aname.c_str()) : nullptr;
        if (device != nullptr) {
            if (device_chosen != nullptr) device_chosen[coll] = device;
            continue;
        }
        if (found == nullptr) {
            append_error(&errors, "unknown " + std::string(kCollNames[coll]) + " algorithm '" + aname +
                                      "' (" + kCollNames[coll] + ": " + valid_names(coll) + ")");
            continue;
        }
        chosen[coll] = found;
    }
    if (errors.empty()) return true;
    if (error != nullptr && error_len > 0) snprintf(error, error_len, "%s", errors.c_str());
    return false;
}

const AlgoChoice& algo_choice_from_env() {
    static const AlgoChoice choice = [] {
        AlgoChoice c;
        std::string spec = env::get_str(env::kAlgo);
        if (spec.empty()) return c;
        char error[1024];
        if (!algo_parse_override(spec.c_str(), c.host, error, sizeof(error), c.device)) {
            VCCL_WARN(kLogColl, "VCCL_ALGO=%s: %s; valid: %s; using the default where unrecognised", spec.c_str(),
                      error, valid_names(-1).c_str());
        }
        for (int k = 0; k < int(CollType::kCount); ++k) {
            if (c.host[k] != nullptr) VCCL_INFO(kLogColl, "VCCL_ALGO forces %s:%s", kCollNames[k], c.host[k]->name);
            if (c.device[k] != nullptr) {
                VCCL_INFO(kLogColl, "VCCL_ALGO forces %s:%s on device buffers of one host", kCollNames[k],
                          c.device[k]->name);
            }
        }
        return c;
    }(); // thread-safe one-time initialisation
    return choice;
}

namespace {

/* Index + 1 of `a` among the algorithms of its collective in a list (0: NULL). */
template <typename A, typename Get> uint64_t local_index(const A* a, size_t n, Get get) {
    if (a == nullptr) return 0;
    uint64_t k = 0;
    for (size_t i = 0; i < n; ++i) {
        const A* x = get(i);
        if (x->coll != a->coll) continue;
        ++k;
        if (x == a || strcasecmp(x->name, a->name) == 0) return k;
    }
    return 0;
}
template <typename A, typename Get> const A* by_local_index(CollType coll, uint64_t k, size_t n, Get get) {
    for (size_t i = 0; i < n && k > 0; ++i) {
        const A* x = get(i);
        if (x->coll == coll && --k == 0) return x;
    }
    return nullptr;
}

} // namespace

uint64_t algo_choice_encode(const AlgoChoice& choice) {
    size_t nh, nd;
    const Algorithm* host = table(&nh);
    const DeviceAlgorithm* const* dev = device_algo_list(&nd);
    uint64_t code = 0;
    for (int c = 0; c < int(CollType::kCount); ++c) {
        uint64_t h = local_index<Algorithm>(choice.host[c], nh, [&](size_t i) { return &host[i]; });
        uint64_t d = local_index<DeviceAlgorithm>(choice.device[c], nd, [&](size_t i) { return dev[i]; });
        code |= (h & 0xf) << (4 * c);
        code |= (d & 0xf) << (24 + 4 * c);
    }
    return code;
}

AlgoChoice algo_choice_decode(uint64_t code) {
    size_t nh, nd;
    const Algorithm* host = table(&nh);
    const DeviceAlgorithm* const* dev = device_algo_list(&nd);
    AlgoChoice choice;
    for (int c = 0; c < int(CollType::kCount); ++c) {
        choice.host[c] = by_local_index<Algorithm>(CollType(c), (code >> (4 * c)) & 0xf, nh,
                                                   [&](size_t i) { return &host[i]; });
        choice.device[c] = by_local_index<DeviceAlgorithm>(CollType(c), (code >> (24 + 4 * c)) & 0xf, nd,
                                                           [&](size_t i) { return dev[i]; });
    }
    return choice;
}

const Algorithm* algo_select(const CollArgs& args, int nranks, const CollSettings& settings,
                             const AlgoChoice& choice, const HostGroups* hosts) {
    const Algorithm* forced = choice.host[int(args.coll)];
    if (forced != nullptr) return forced;
    if (hosts != nullptr && hosts->nranks() == nranks && hosts->two_level()) {
        const Algorithm* two[int(CollType::kCount)] = {&kAllReduceTwoLevel, &kBroadcastTwoLevel,
                                                       &kReduceTwoLevel,    &kAllGatherTwoLevel,
                                                       &kReduceScatterTwoLevel, &kAlltoAllTwoLevel};
        if (args.coll != CollType::kCount) return find(int(args.coll), two[int(args.coll)]->name);
    }

    size_t bytes = args.count * dtype_size(args.dtype);
    bool small = bytes <= settings.small_bytes;
    const char* name = nullptr;
    switch (args.coll) {
    case CollType::AllReduce:
        // Below one element per rank the ring has idle ranks; the log-latency algorithm wins outright.
        name = small || args.count < size_t(nranks) ? kAllReduceRecursiveDoubling.name : kAllReduceRing.name;
        break;
    case CollType::Broadcast: name = small ? kBroadcastBinomial.name : kBroadcastChain.name; break;
    case CollType::Reduce: name = small ? kReduceBinomial.name : kReduceChain.name; break;
    case CollType::AllGather: name = kAllGatherRing.name; break;
    case CollType::ReduceScatter: name = kReduceScatterRing.name; break;
    case CollType::AlltoAll: name = kAlltoAllPairwise.name; break;
    case CollType::kCount: return nullptr;
    }
    return find(int(args.coll), name);
}

} // namespace vccl

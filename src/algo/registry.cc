/*
 * The algorithm registry: the list of every algorithm, the VCCL_ALGO override, and the default choice by
 * message size and rank count.
 */
#include <cstdio>
#include <cstring>
#include <string>
#include <strings.h>

#include "algo/algo.h"
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

/* "ring, recursive_doubling" for one collective, or every "coll:name" when coll < 0. */
std::string valid_names(int coll) {
    std::string out;
    size_t n;
    const Algorithm* all = table(&n);
    for (size_t i = 0; i < n; ++i) {
        if (coll >= 0 && int(all[i].coll) != coll) continue;
        if (!out.empty()) out += ", ";
        if (coll < 0) out += std::string(coll_name(all[i].coll)) + ":";
        out += all[i].name;
    }
    return out;
}

void append_error(std::string* all, const std::string& msg) {
    if (!all->empty()) *all += "; ";
    *all += msg;
}

/* VCCL_ALGO, parsed on first use. Unknown names are reported once and fall back to the default. */
struct Override {
    const Algorithm* chosen[int(CollType::kCount)] = {};
    Override() {
        std::string spec = env::get_str(env::kAlgo);
        if (spec.empty()) return;
        char error[1024];
        if (!algo_parse_override(spec.c_str(), chosen, error, sizeof(error))) {
            VCCL_WARN(kLogColl, "VCCL_ALGO=%s: %s; valid: %s; using the default where unrecognised",
                      spec.c_str(), error, valid_names(-1).c_str());
        }
        for (int c = 0; c < int(CollType::kCount); ++c) {
            if (chosen[c] != nullptr) {
                VCCL_INFO(kLogColl, "VCCL_ALGO forces %s:%s", kCollNames[c], chosen[c]->name);
            }
        }
    }
};

const Override& override_once() {
    static const Override o; // thread-safe one-time initialisation
    return o;
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
                         size_t error_len) {
    for (int c = 0; c < int(CollType::kCount); ++c) chosen[c] = nullptr;
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

const Algorithm* algo_select(const CollArgs& args, int nranks, const CollSettings& settings) {
    const Algorithm* forced = override_once().chosen[int(args.coll)];
    if (forced != nullptr) return forced;

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

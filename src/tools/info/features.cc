/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-info -v (version, build features) and -a (algorithms). */
#include <hwloc.h>
#include <ucp/api/ucp.h>

#include <cstring>
#include <string>

#include "algo/algo.h"
#include "algo/device/device_algo.h"
#include "config.h"
#include "tools/info/info.h"
#include "vccl.h"

namespace vinfo {

namespace {

struct Feature {
    const char* name;
    bool enabled;
    const char* what;
};

const Feature kFeatures[] = {
    {"cuda", VCCL_HAVE_CUDA != 0, "device buffers and copy engines (VCCL_HAVE_CUDA)"},
    {"verbs", VCCL_HAVE_VERBS != 0, "ibverbs port events and counters (VCCL_HAVE_VERBS)"},
    {"mpi", VCCL_HAVE_MPI != 0, "MPI bootstrap, libvccl_mpi, vccl-perf (VCCL_HAVE_MPI)"},
};

std::string hwloc_version_text(unsigned v) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%u.%u.%u", (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff);
    return buf;
}

} // namespace

void print_version(FILE* out) {
    fprintf(out, "vccl %s (version code %d)\n", PACKAGE_VERSION, VCCL_VERSION_CODE);
    fprintf(out, "build features:\n");
    for (const Feature& f : kFeatures) fprintf(out, "  %-6s %-3s  %s\n", f.name, f.enabled ? "yes" : "no", f.what);
    fprintf(out, "  %-6s %s (API %d.%d at build time)\n", "ucx", ucp_get_version_string(), UCP_API_MAJOR,
            UCP_API_MINOR);
    fprintf(out, "  %-6s %s (API %s at build time)\n", "hwloc", hwloc_version_text(hwloc_get_api_version()).c_str(),
            hwloc_version_text(HWLOC_API_VERSION).c_str());
}

void print_version_json(FILE* out) {
    fprintf(out, "{\"version\": %s, \"version_code\": %d", json_quote(PACKAGE_VERSION).c_str(), VCCL_VERSION_CODE);
    for (const Feature& f : kFeatures) fprintf(out, ", \"%s\": %s", f.name, f.enabled ? "true" : "false");
    fprintf(out, ", \"ucx\": %s, \"hwloc\": %s}", json_quote(ucp_get_version_string()).c_str(),
            json_quote(hwloc_version_text(hwloc_get_api_version()).c_str()).c_str());
}

/* Host algorithms (host memory, and device memory staged through it) first, then device algorithms (device
 * memory among the GPUs of one host). */
void print_algorithms(FILE* out) {
    size_t nh = 0, nd = 0;
    const vccl::Algorithm* host = vccl::algo_list(&nh);
    const vccl::DeviceAlgorithm* const* dev = vccl::device_algo_list(&nd);
    fprintf(out, "# vccl algorithms (%zu host, %zu device). Force one with VCCL_ALGO=COLLECTIVE:NAME[,...]\n", nh, nd);
    fprintf(out, "# %-14s %-7s %-19s %s\n", "COLLECTIVE", "PATH", "NAME", "DESCRIPTION / DEFAULT WHERE");
    for (size_t i = 0; i < nh; ++i) {
        fprintf(out, "  %-14s %-7s %-19s %s\n  %-14s %-7s %-19s   default: %s\n", vccl::coll_name(host[i].coll), "host",
                host[i].name, host[i].description, "", "", "", host[i].window);
    }
    for (size_t i = 0; i < nd; ++i) {
        fprintf(out, "  %-14s %-7s %-19s %s\n  %-14s %-7s %-19s   default: %s\n", vccl::coll_name(dev[i]->coll), "device",
                dev[i]->name, dev[i]->description, "", "", "", dev[i]->window);
    }
}

void print_algorithms_json(FILE* out) {
    size_t nh = 0, nd = 0;
    const vccl::Algorithm* host = vccl::algo_list(&nh);
    const vccl::DeviceAlgorithm* const* dev = vccl::device_algo_list(&nd);
    fprintf(out, "[");
    auto one = [&](bool first, vccl::CollType coll, const char* path, const char* name, const char* description,
                   const char* window) {
        fprintf(out, "%s\n    {\"collective\": %s, \"path\": \"%s\", \"name\": %s, \"description\": %s, "
                "\"default\": %s}", first ? "" : ",", json_quote(vccl::coll_name(coll)).c_str(), path,
                json_quote(name).c_str(), json_quote(description).c_str(), json_quote(window).c_str());
    };
    for (size_t i = 0; i < nh; ++i) one(i == 0, host[i].coll, "host", host[i].name, host[i].description, host[i].window);
    for (size_t i = 0; i < nd; ++i) {
        one(nh == 0 && i == 0, dev[i]->coll, "device", dev[i]->name, dev[i]->description, dev[i]->window);
    }
    fprintf(out, "\n  ]");
}

} // namespace vinfo

/* vccl-info -v (version, build features) and -a (algorithms). */
#include <hwloc.h>
#include <ucp/api/ucp.h>

#include <cstring>
#include <string>

#include "algo/algo.h"
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

void print_algorithms(FILE* out) {
    size_t count = 0;
    const vccl::Algorithm* algos = vccl::algo_list(&count);
    fprintf(out, "# vccl algorithms (%zu). Force one with VCCL_ALGO=COLLECTIVE:NAME[,...]\n", count);
    fprintf(out, "# %-14s %-16s %s\n", "COLLECTIVE", "NAME", "DESCRIPTION");
    for (size_t i = 0; i < count; ++i)
        fprintf(out, "  %-14s %-16s %s\n", vccl::coll_name(algos[i].coll), algos[i].name, algos[i].description);
}

void print_algorithms_json(FILE* out) {
    size_t count = 0;
    const vccl::Algorithm* algos = vccl::algo_list(&count);
    fprintf(out, "[");
    for (size_t i = 0; i < count; ++i) {
        fprintf(out, "%s\n    {\"collective\": %s, \"name\": %s, \"description\": %s}", i ? "," : "",
                json_quote(vccl::coll_name(algos[i].coll)).c_str(), json_quote(algos[i].name).c_str(),
                json_quote(algos[i].description).c_str());
    }
    fprintf(out, "\n  ]");
}

} // namespace vinfo

/* SPDX-License-Identifier: BSD-3-Clause */
// libFuzzer target: topology loading from an hwloc XML file (vccl::topo_load with TopoOptions::xml_file, as
// VCCL_TOPO_FILE does). The input is written to a file first; hwloc itself is not instrumented, vccl's walk over
// what hwloc built (GPUs, NICs, NUMA nodes, switches, path classes) is. Then the rail choice runs on the result.
//
// hwloc 2.9.0 (Debian 12) itself crashes on some malformed files (found by this target: a PU without
// complete_cpuset dereferences NULL in hwloc_bitmap_compare_first during hwloc_topology_load). That is not
// vccl's to fix, so each input is first loaded by hwloc alone in a child process; inputs that crash hwloc
// are skipped, everything else goes through vccl in this process.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hwloc.h>

#include "topo/topo.h"

namespace {
std::string path() {
    static std::string p = [] {
        const char* dir = getenv("TMPDIR");
        return std::string(dir && *dir ? dir : "/tmp") + "/vccl-fuzz-topo-" + std::to_string(getpid()) + ".xml";
    }();
    return p;
}
/* True when hwloc alone loads the file without crashing (in a child: a crash there is hwloc's). */
bool hwloc_survives(const char* file) {
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 2); // hwloc's crash report is not ours
        hwloc_topology_t t;
        if (hwloc_topology_init(&t) == 0) {
            hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
            if (hwloc_topology_set_xml(t, file) == 0) (void)hwloc_topology_load(t);
            hwloc_topology_destroy(t);
        }
        _exit(0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
} // namespace

// hwloc's own XML parser (in libhwloc.so) instead of the libxml2 plugin: the plugin is dlclosed after each load,
// so leaks inside it cannot be told from ours (no module name), while libhwloc.so's are suppressed by
// contrib/ci/lsan.supp, which run.sh passes to LeakSanitizer.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
    setenv("HWLOC_LIBXML_IMPORT", "0", 1);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FILE* f = fopen(path().c_str(), "wb");
    if (f == nullptr) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    if (!hwloc_survives(path().c_str())) {
        unlink(path().c_str());
        return 0;
    }
    vccl::TopoOptions options;
    options.xml_file = path();
    options.cpu_binding = "0";
    std::unique_ptr<vccl::Topology> topo;
    if (vccl::topo_load(options, &topo) == vcclSuccess && topo) {
        for (int local_rank = 0; local_rank < 2; ++local_rank) {
            vccl::RailChoice choice;
            (void)vccl::topo_choose(*topo, local_rank, 2, &choice);
        }
    }
    unlink(path().c_str());
    return 0;
}

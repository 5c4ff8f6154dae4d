/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-info: version and build features, environment variables, algorithms. See info.h for the parts. */
#include <getopt.h>

#include <cstdio>

#include "tools/info/info.h"

namespace {

void usage(FILE* out) {
    fprintf(out,
            "Usage: vccl-info [-v] [-c] [-a] [-t] [--json]\n"
            "\n"
            "Shows how this vccl is built and configured. With no option, -v.\n"
            "\n"
            "Options:\n"
            "  -v, --version     version and build features (CUDA, verbs, MPI, UCX and hwloc versions)\n"
            "  -c, --config      every VCCL_* environment variable: name, type, default, value if set, doc\n"
            "  -a, --algorithms  registered algorithms per collective (names for VCCL_ALGO)\n"
            "  -t, --topology    GPU/NIC path matrix (like nvidia-smi topo -m) and each local GPU's primary and\n"
            "                    backup NIC and proxy CPUs (VCCL_TOPO_FILE loads an hwloc XML instead)\n"
            "  -j, --json        print the requested sections as one JSON object instead of tables\n"
            "  -h, --help        print this help and exit\n"
            "\n"
            "Exit status: 0 success, 1 topology error (-t), 2 usage error.\n");
}

} // namespace

int main(int argc, char** argv) {
    static const struct option kLong[] = {
        {"version", no_argument, nullptr, 'v'},    {"config", no_argument, nullptr, 'c'},
        {"algorithms", no_argument, nullptr, 'a'}, {"topology", no_argument, nullptr, 't'},
        {"json", no_argument, nullptr, 'j'},       {"help", no_argument, nullptr, 'h'},
        {nullptr, 0, nullptr, 0},
    };
    bool version = false, config = false, algos = false, topo = false, json = false;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "vcatjh", kLong, nullptr)) != -1) {
        switch (c) {
        case 'v': version = true; break;
        case 'c': config = true; break;
        case 'a': algos = true; break;
        case 't': topo = true; break;
        case 'j': json = true; break;
        case 'h': usage(stdout); return 0;
        default:
            fprintf(stderr, "vccl-info: unknown option '%s'\nTry 'vccl-info --help' for more information.\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "vccl-info: unexpected argument '%s'\nTry 'vccl-info --help' for more information.\n",
                argv[optind]);
        return 2;
    }
    if (!version && !config && !algos && !topo) version = true;

    if (json) {
        /* One object with a member per requested section. */
        const char* sep = "";
        bool ok = true;
        printf("{");
        if (version) { printf("%s\n  \"build\": ", sep); vinfo::print_version_json(stdout); sep = ","; }
        if (config) { printf("%s\n  \"environment\": ", sep); vinfo::print_config_json(stdout); sep = ","; }
        if (algos) { printf("%s\n  \"algorithms\": ", sep); vinfo::print_algorithms_json(stdout); sep = ","; }
        if (topo) {
            printf("%s\n  \"topology\": ", sep);
            fflush(stdout);
            if (!vinfo::print_topology_json(stdout)) {
                printf("null");
                ok = false;
            }
        }
        printf("\n}\n");
        return ok ? 0 : 1;
    }
    bool first = true;
    auto section = [&first]() {
        if (!first) printf("\n");
        first = false;
    };
    if (version) { section(); vinfo::print_version(stdout); }
    if (config) { section(); vinfo::print_config_table(stdout); }
    if (algos) { section(); vinfo::print_algorithms(stdout); }
    if (topo) {
        section();
        if (!vinfo::print_topology(stdout)) return 1;
    }
    return 0;
}

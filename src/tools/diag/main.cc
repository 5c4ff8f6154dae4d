/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-diag: command line, dispatch, output and exit status (see diag.h for the checks). */
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/env.h"
#include "tools/diag/diag.h"

namespace vdiag {

namespace {

void usage(FILE* out) {
    fprintf(out,
            "usage: vccl-diag [--json] [topo and paths options] [sweep options]\n"
            "       vccl-diag topo [--json] [--sysfs DIR]\n"
            "       vccl-diag paths [--json] [--dir DIR]\n"
            "       mpirun ... vccl-diag sweep [--json] [-b SIZE] [-n ITERS] [-w WARMUP] [--fraction F] [--device]\n"
            "\n"
            "topo   rail choice per GPU, GPU-NIC path classes, PCIe link width and speed\n"
            "paths  state, switch events, bandwidth and queue of every path of the live telemetry rings\n"
            "sweep  pairwise send/recv bandwidth matrix of an MPI job; names the slowest link and rank\n"
            "With no command: topo and paths, plus sweep when started by mpirun with more than one rank.\n"
            "Exit status: 0 no findings, 1 findings, 2 usage error, 3 a check could not run. See vccl-diag(1).\n");
}

struct Command {
    bool topo = false, paths = false, sweep = false;
    bool json = false;
    TopoOptions topo_opts;
    std::string dir = "/dev/shm";
    SweepOptions sweep_opts;
};

/* Parses argv into *c; returns -1 to go on, else an exit status (help: 0, usage error: 2). */
int parse(int argc, char** argv, Command* c) {
    std::vector<std::string> args(argv + 1, argv + argc);
    size_t i = 0;
    std::string cmd;
    if (!args.empty() && args[0][0] != '-') cmd = args[i++];
    if (cmd.empty()) {
        c->topo = c->paths = true;
        c->sweep = vccl::env::launcher_world_size() > 1; // under mpirun/srun with several ranks
    } else if (cmd == "topo") {
        c->topo = true;
    } else if (cmd == "paths") {
        c->paths = true;
    } else if (cmd == "sweep") {
        c->sweep = true;
    } else if (cmd == "help") {
        usage(stdout);
        return kExitOk;
    } else {
        fprintf(stderr, "vccl-diag: unknown command '%s' (expected topo, paths or sweep)\n", cmd.c_str());
        usage(stderr);
        return kExitUsage;
    }
    bool any = cmd.empty();
    for (; i < args.size(); ++i) {
        const std::string& a = args[i];
        std::string error;
        if (a == "-h" || a == "--help") {
            usage(stdout);
            return kExitOk;
        } else if (a == "--json") {
            c->json = true;
        } else if ((any || c->topo) && a == "--sysfs") {
            if (i + 1 >= args.size()) error = "option --sysfs needs a value";
            else c->topo_opts.sysfs = args[++i];
        } else if ((any || c->paths) && a == "--dir") {
            if (i + 1 >= args.size()) error = "option --dir needs a value";
            else c->dir = args[++i];
        } else if ((any || c->sweep) && parse_sweep_option(args, &i, &c->sweep_opts, &error)) {
            continue;
        } else if (error.empty()) {
            error = "unknown option '" + a + "'" + (cmd.empty() ? "" : " for " + cmd);
        }
        if (!error.empty()) {
            fprintf(stderr, "vccl-diag: %s\n", error.c_str());
            return kExitUsage;
        }
    }
    if (c->sweep && !sweep_available()) {
        if (!cmd.empty()) {
            fprintf(stderr, "vccl-diag: this vccl-diag was built without MPI: sweep is not available\n");
            return kExitError;
        }
        c->sweep = false;
    }
    return -1;
}

void print(const std::vector<Section>& sections, bool json) {
    size_t total = 0;
    for (const Section& s : sections) total += s.findings.size();
    if (json) {
        printf("{");
        for (const Section& s : sections) {
            std::string obj = s.json;
            obj.pop_back(); // the closing brace: the section's findings go inside its object
            obj += std::string(obj.size() > 1 ? "," : "") + "\"findings\":[";
            for (size_t i = 0; i < s.findings.size(); ++i) obj += (i ? "," : "") + vtel::json_str(s.findings[i]);
            printf("\"%s\":%s]},", s.name.c_str(), obj.c_str());
        }
        printf("\"findings\":%zu}\n", total);
    } else {
        for (const Section& s : sections) {
            fputs(s.text.c_str(), stdout);
            for (const std::string& f : s.findings) printf("  FINDING: %s\n", f.c_str());
        }
        if (total == 0) printf("vccl-diag: no findings\n");
        else printf("vccl-diag: %zu finding(s)\n", total);
    }
    fflush(stdout);
}

} // namespace

int run(int argc, char** argv) {
    Command c;
    int rc = parse(argc, argv, &c);
    if (rc >= 0) return rc;

    std::string error;
    if (c.sweep && !mpi_init(&argc, &argv, &error)) {
        fprintf(stderr, "vccl-diag: %s\n", error.c_str());
        return kExitError;
    }
    // Node checks once per job: on rank 0 (of the job, or the only process).
    bool leader = mpi_rank() == 0;
    std::vector<Section> sections;
    int status = kExitOk;
    if (leader && c.topo) {
        Section s;
        if (check_topo(c.topo_opts, &s, &error)) {
            sections.push_back(s);
        } else {
            fprintf(stderr, "vccl-diag topo: %s\n", error.c_str());
            status = kExitError;
        }
    }
    if (leader && c.paths) {
        Section s;
        check_paths(c.dir, &s);
        sections.push_back(s);
    }
    if (c.sweep) {
        Section s;
        if (run_sweep(c.sweep_opts, &s)) {
            if (mpi_size() < 2) s.text += "note: one rank, no link to measure (start it with mpirun -np N)\n";
            sections.push_back(s);
        }
    }
    if (leader) {
        print(sections, c.json);
        if (status == kExitOk)
            for (const Section& s : sections)
                if (!s.findings.empty()) status = kExitFindings;
    }
    if (c.sweep) {
        status = mpi_agree_status(status);
        mpi_finalize();
    }
    return status;
}

} // namespace vdiag

int main(int argc, char** argv) { return vdiag::run(argc, argv); }

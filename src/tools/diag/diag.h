/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vccl-diag: a one-command check of a node (topology, PCIe links, live telemetry paths) or of a job
 * (pairwise bandwidth sweep under MPI). Every check returns a Section: text for people, a JSON object for
 * scripts, and its findings (things an operator should look at); findings decide the exit status.
 *
 *   main.cc    command line, dispatch, output and exit status
 *   topo.cc    `topo`: rail choice per GPU from src/topo, path classes, PCIe links (pcie.cc)
 *   pcie.cc    PCIe link width and speed from sysfs
 *   paths.cc   `paths`: the live telemetry rings (shared reader in tools/telemetry/rings.h)
 *   matrix.cc  the finding logic of a bandwidth matrix (median, slowest link and rank, slow links)
 *   sweep.cc   `sweep`: the MPI program that measures the matrix
 */
#ifndef VCCL_TOOLS_DIAG_DIAG_H_
#define VCCL_TOOLS_DIAG_DIAG_H_

#include <string>
#include <vector>

#include "tools/telemetry/rings.h"

namespace vdiag {

/* Exit statuses (vccl-diag(1)). */
constexpr int kExitOk = 0;       // no findings
constexpr int kExitFindings = 1; // at least one finding
constexpr int kExitUsage = 2;    // bad command line
constexpr int kExitError = 3;    // a check could not run (topology not loadable, MPI failure)

struct Section {
    std::string name;                  // "topo", "paths", "sweep"
    std::string text;                  // human-readable report, newline terminated
    std::string json;                  // one JSON object with the details (without the findings)
    std::vector<std::string> findings; // one line each
};

/* ---- topo ---- */
struct TopoOptions {
    std::string sysfs = "/sys"; // root of the PCI sysfs tree (tests point it at a fake tree)
};
/* False with *error when the topology cannot be loaded or a VCCL_* override is malformed. */
bool check_topo(const TopoOptions& o, Section* out, std::string* error);

/* PCIe link of one PCI function as sysfs reports it. */
struct PcieLink {
    bool present = false;            // the attributes exist
    int width = 0, max_width = 0;    // lanes
    double speed = 0, max_speed = 0; // GT/s
    bool width_degraded() const { return present && width > 0 && max_width > 0 && width < max_width; }
    bool speed_degraded() const { return present && speed > 0 && max_speed > 0 && speed < max_speed; }
};
/* Reads <sysfs>/bus/pci/devices/<busid>/{current,max}_link_{width,speed}. */
PcieLink read_pcie_link(const std::string& sysfs, const std::string& busid);
/* "16.0 GT/s PCIe" or "8 GT/s" -> GT/s; 0 when unknown ("Unknown", empty). */
double parse_link_speed(const std::string& text);

/* ---- paths ---- */
/* Findings of one ring: a path that is down, a peer whose paths changed state (events > 0). Only live
 * rings are judged; closed and dead ones are history. */
std::vector<std::string> path_findings(const vtel::RingView& ring);
void check_paths(const std::string& dir, Section* out);

/* ---- matrix ---- */
/* bw[src][dst] in bytes/s; the diagonal and negative entries are ignored (not measured). */
struct Link {
    int src = -1, dst = -1;
    double bw = 0;
};
struct MatrixVerdict {
    int nranks = 0;
    double median = 0;          // of the measured links
    double fraction = 0.5;      // threshold: a link below fraction * median is slow
    Link slowest;               // src -1 when nothing was measured
    int slowest_rank = -1;      // lowest harmonic mean bandwidth over the links it sends and receives on
    double slowest_rank_bw = 0;
    std::vector<Link> slow;     // links below the threshold, slowest first
    int suspect_rank = -1;      // the only rank that every slow link touches (>= 2 slow links), else -1
};
MatrixVerdict analyze_matrix(const std::vector<std::vector<double>>& bw, double fraction);
/* Text table, JSON object and findings of a verdict. */
void matrix_section(const std::vector<std::vector<double>>& bw, const MatrixVerdict& v, size_t bytes, int iters,
                    bool device, Section* out);

/* ---- sweep ---- */
struct SweepOptions {
    size_t bytes = size_t(8) << 20;
    int iters = 5;
    int warmup = 1;
    double fraction = 0.5;
    bool device = false;
    std::string netns_prefix; // testing: rank r enters network namespace <prefix><r> before the communicator
};
/* Parses sweep options from args (used by `sweep` and by the default run); false with *error. */
bool parse_sweep_option(const std::vector<std::string>& args, size_t* i, SweepOptions* o, std::string* error);
/* Runs the sweep on MPI_COMM_WORLD (MPI must be initialized). On rank 0 fills *out and returns true;
 * other ranks return false with an empty *out. Aborts the job on a vccl or MPI failure. */
bool run_sweep(const SweepOptions& o, Section* out);
/* Whether this binary was built with MPI (sweep available). */
bool sweep_available();
bool mpi_init(int* argc, char*** argv, std::string* error);
void mpi_finalize();
int mpi_rank();
int mpi_size();
/* Rank 0's exit status reaches every rank, so that mpirun reports one verdict. */
int mpi_agree_status(int status);

} // namespace vdiag

#endif

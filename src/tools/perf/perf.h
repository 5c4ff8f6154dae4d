/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vccl-perf: an nccl-tests compatible benchmark for vccl collectives. Shared declarations of the parts:
 *   options.cc   command line, names of collectives/types/ops, usage text
 *   buffers.cc   buffer placement, element encoding, rank/index dependent fill and result checks
 *   colls.cc     per-collective geometry (counts, bandwidth factors) and the vccl calls
 *   baseline.cc  the same collective through MPI (--baseline mpi)
 *   device.cc    the CUDA runtime calls behind -m cuda (device choice, buffers, stream)
 *   report.cc    timing aggregation across ranks, the table, footer and JSON output
 *   main.cc      MPI start-up, communicator creation, the size loop
 *   soak.cc      --soak: random mixed collectives for a duration, communicator churn, leak check
 *   gemm.cc      --concurrent-gemm: a cuBLAS GEMM beside the transfer, its throughput against running alone
 *   gemm_window.cc  the GEMM work and idle time inside a transfer's window, from event times (no CUDA)
 */
#ifndef VCCL_TOOLS_PERF_PERF_H_
#define VCCL_TOOLS_PERF_PERF_H_

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vccl.h"
#include "tools/perf/cpu_use.h"

namespace vperf {

/* Exit codes of the tool. */
constexpr int kExitOk = 0;
constexpr int kExitWrong = 1;   // a result check found wrong elements
constexpr int kExitUsage = 2;   // bad command line or an unsupported mode
constexpr int kExitRuntime = 3; // a vccl, MPI or system call failed
constexpr int kExitLeak = 4;    // --soak: memory or descriptor growth above the limit

enum class Coll { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, SendRecv };
enum class Memory { Host, Cuda };
/* How -m cuda buffers are allocated (--alloc): cudaMalloc, vcclMemAlloc, or CUDA VMM made here the way
 * PyTorch's expandable segments make it (20 MiB allocations side by side, file-descriptor handles). */
enum class DeviceAlloc { Cuda, Vccl, Vmm };
enum class Bootstrap { Mpi, Tcp };
/* Self: the baseline is the measured operation itself, unchanged, timed in the same alternating rounds as the
 * telemetry baselines: an A/A control that shows the paired timing's own bias and noise. */
enum class Baseline { None, Mpi, Nccl, TelemetryOff, TelemetryPaused, Self };

struct Options {
    Coll coll = Coll::AllReduce;
    size_t min_bytes = 32 * 1024 * 1024;
    size_t max_bytes = 32 * 1024 * 1024;
    size_t step_factor = 2;  // -f; used when step_bytes is 0
    size_t step_bytes = 0;   // -i; a fixed increment instead of a factor
    int iters = 20;
    int warmup = 5;
    int check = 1;
    vcclRedOp_t op = vcclSum;
    bool premul = false;     // -o premulsum: a PreMulSum op of scalar 1 (o.op stays vcclSum, whose results it gives)
    vcclDataType_t dtype = vcclFloat32;
    int root = 0;
    std::string json_path;
    int average = 3; // 0 rank 0, 1 mean, 2 min, 3 max across ranks
    int blocking = 0; // -z 1: wait for the stream after every operation, as a blocking call (MPI) must
    Memory memory = Memory::Host;
    Bootstrap bootstrap = Bootstrap::Mpi;
    Baseline baseline = Baseline::None;
    std::string nccl_lib; // --nccl-lib: the NCCL library the nccl baseline loads (default libnccl.so.2)
    /* --soak mode (soak.cc) */
    double soak_seconds = 0;          // --soak SECONDS; 0: the normal size sweep
    bool soak_all = true;             // no COLLECTIVE (or "all"): every collective
    unsigned long long seed = 0;      // --seed; 0: rank 0 picks one and prints it
    int split_every = 64;             // --split-every: steps between communicator splits (0: never)
    long max_rss_growth_kb = 16384;   // --max-rss-growth KB per rank after warm-up
    long max_fd_growth = 0;           // --max-fd-growth N per rank after warm-up
    int soak_progress = 60;           // --progress SECONDS between progress lines (0: none)
    int gemm_n = 0;                   // --concurrent-gemm[=N]: N x N x N bf16 GEMM beside the transfer; 0: off
    DeviceAlloc device_alloc = DeviceAlloc::Cuda; // --alloc
    bool high_priority = false;       // --stream-priority high: the benchmark's stream at CUDA's greatest priority
    std::string emulated_hosts;       // --emulated-hosts PREFIX:H0,H1,...: rank r enters emulated host PREFIX<H_r>
    bool cpu = false;                 // --cpu: print processor use columns (the JSON has them always)
};

/* Parses argv. Returns -1 when the run should go on, else an exit code (help printed: 0; error: 2).
 * Messages are printed only when `verbose` (rank 0). */
int parse_options(int argc, char** argv, bool verbose, Options* opts);
void print_usage(FILE* out);

const char* coll_name(Coll coll);
const char* type_name(vcclDataType_t type);
const char* op_name(vcclRedOp_t op);
/* The operation as -o named it ("premulsum" for a PreMulSum op). */
const char* op_label(const Options& o);
/* One element of `type` of value 1, in the low bytes (-o premulsum's scalar). */
uint64_t one_element_bits(vcclDataType_t type);
const char* baseline_name(Baseline b); // as --baseline takes it ("none" for None)
size_t type_size(vcclDataType_t type);
bool coll_has_op(Coll coll);
bool coll_has_root(Coll coll);

/* ---- colls.cc ---- */

/* The geometry of one measurement: `count` is the per-call count argument as the API defines it,
 * send_elems/recv_elems the per-rank buffer sizes. */
struct Shape {
    size_t count = 0;
    size_t send_elems = 0;
    size_t recv_elems = 0;
    size_t bytes = 0;       // the size column: S as nccl-tests reports it
    size_t total_count = 0; // the count column: bytes / typesize
};

/* Rounds a requested byte size down to what the collective can move (whole elements, and a multiple of
 * nranks elements for allgather, reducescatter and alltoall). */
Shape make_shape(Coll coll, size_t bytes, vcclDataType_t type, int nranks);
/* busbw / algbw, as nccl-tests defines it. */
double bus_factor(Coll coll, int nranks);

/* ---- device.cc ---- (all return false / nullptr with a message in *error on failure) */

bool device_select(int local_rank, int* device, std::string* error);
void* device_alloc(size_t bytes, DeviceAlloc how, std::string* error);
void device_free(void* p); // whichever way device_alloc made it
const char* device_alloc_name(DeviceAlloc how);
bool device_copy(void* dst, const void* src, size_t bytes, std::string* error);
/* A non-blocking stream on the current GPU; `high`: at the greatest priority the GPU offers. */
bool stream_create(void** stream, bool high, std::string* error);
bool stream_sync(void* stream, std::string* error);
void stream_destroy(void* stream);

/* ---- buffers.cc ---- */

class Buffers {
public:
    Buffers(Memory memory, DeviceAlloc how, vcclDataType_t type);
    ~Buffers();
    Buffers(const Buffers&) = delete;
    Buffers& operator=(const Buffers&) = delete;

    /* Allocates room for the largest shape; false with a message on failure. */
    bool allocate(size_t send_elems, size_t recv_elems, std::string* error);
    void* send() const { return send_; }
    vcclDataType_t type() const { return type_; }
    void* recv() const { return recv_; }

    /* Writes the inputs that rank `rank` contributes for one check run. In-place runs put the input where
     * the API expects it (inside recv for allgather, in send/recv shared storage otherwise). Device
     * buffers are written on the host and copied over. False with a message on a CUDA failure. */
    bool fill(const Options& opts, const Shape& shape, int rank, int nranks, bool in_place, std::string* error);
    /* Counts output elements that differ from the independently computed expectation. */
    bool check(const Options& opts, const Shape& shape, int rank, int nranks, bool in_place, uint64_t* wrong,
               std::string* error);

private:
    Memory memory_;
    DeviceAlloc how_;
    vcclDataType_t type_;
    void* send_ = nullptr; // what the calls use: host memory, or device memory with -m cuda
    void* recv_ = nullptr;
    void* host_send_ = nullptr; // where fill and check work: send_/recv_ themselves, or host shadows
    void* host_recv_ = nullptr;
    size_t capacity_ = 0; // elements in each buffer
};

/* The pointers a call uses for the in-place or out-of-place variant. */
struct CallBuffers {
    const void* send;
    void* recv;
};
CallBuffers call_buffers(Coll coll, const Buffers& buf, const Shape& shape, int rank, bool in_place);

/* Issues one vccl operation on `stream` (NULL for host buffers). */
vcclResult_t run_vccl(const Options& opts, const Shape& shape, const CallBuffers& cb, vcclComm_t comm,
                      int rank, int nranks, void* stream);

/* ---- baseline.cc ---- */

/* Why the MPI baseline cannot run this configuration, or nullptr when it can. */
const char* mpi_baseline_unsupported(const Options& opts);
/* One MPI operation on the out-of-place buffers; returns an MPI error code. */
int run_mpi(const Options& opts, const Shape& shape, const CallBuffers& cb, MPI_Comm comm, int rank,
            int nranks);

/* ---- nccl_baseline.cc ---- */

/* Loads NCCL and creates its communicator over MPI_COMM_WORLD (collective); false with a message. */
enum class NcclLoad { Ok, Failed, IsVccl };
/* Loads the NCCL library (lib_path, or libnccl.so.2 through the search path) and resolves its functions;
 * IsVccl when the library found is vccl's NCCL shim. Needs no GPU. */
NcclLoad nccl_baseline_load(const std::string& lib_path, std::string* error);
/* Creates the NCCL communicator over MPI_COMM_WORLD (after nccl_baseline_load and the device choice). */
bool nccl_baseline_init(int rank, int nranks, std::string* error);
int nccl_baseline_version();
const std::string& nccl_baseline_path(); // the file loaded (empty if unknown)
void nccl_baseline_finalize();
const char* nccl_baseline_unsupported(const Options& opts);
/* One NCCL operation on `stream`; returns NCCL's result code (0: success). */
int run_nccl(const Options& opts, const Shape& shape, const CallBuffers& cb, int rank, int nranks, void* stream,
             std::string* error);

/* ---- gemm.cc ---- (all return false with a message in *error on failure) */

/* Loads cuBLAS, allocates three N x N bf16 matrices and a stream of its own on the current device. */
bool gemm_init(int n, std::string* error);
/* GEMMs back to back, alone: TFLOP/s. */
bool gemm_solo(double* tflops, std::string* error);
struct GemmDuring {
    double tflops = 0;      // the GEMM's throughput inside the transfer's window
    double transfer_ms = 0; // the window's length
    double idle_pct = 0;    // share of the window the GEMM stream sat empty (the feeder fell behind)
    double tail_ms = 0;     // how long the GEMM ran on after the transfer (about 500 ms)
    double tflops_with_tail = 0; // the throughput over the window and the tail together
};
/* GEMMs back to back on their stream, fed by a thread of their own, while `enqueue_transfer` queues work on
 * `transfer_stream` from the calling thread. */
bool gemm_during(void* transfer_stream, const std::function<void()>& enqueue_transfer, GemmDuring* out,
                 std::string* error);
void gemm_finalize();

/* ---- soak.cc ---- */

/* The --soak run (collective over MPI_COMM_WORLD); returns the exit code, the same on every rank. */
int run_soak(const Options& opts, int rank, int nranks);

/* ---- cpu_use.h (CpuUse, CpuMeter), and here: ---- */

/* Mean over the ranks of comm (collective over comm; main.cc). */
CpuUse mean_over_ranks(const CpuUse& local, MPI_Comm comm);

/* ---- report.cc ---- */

struct Measure {
    double time_us = 0;   // aggregated over ranks per -a
    double algbw = 0;     // GB/s
    double busbw = 0;     // GB/s
    long long wrong = -1; // summed over ranks; -1 when not checked
    double call_us = -1;  // time the calling thread spent inside the vccl calls per operation, largest rank
                          // (-1: not measured); with device buffers well below time_us
    CpuUse cpu;           // over the timed operations, mean over ranks
};

/* The GEMM beside one library's transfers (--concurrent-gemm). */
struct GemmFigures {
    double tflops = -1;      // averaged over ranks; negative: not measured
    double min_pct = -1;     // the lowest rank's share of its solo throughput (solo runs either side)
    double transfer_ms = -1; // the slowest rank's window per operation
    double idle_pct = -1;    // the largest share of a window any rank's GEMM stream sat empty
    double min_pct_with_tail = -1; // the same share as min_pct over the window and the ~500 ms after it
};

struct Row {
    Shape shape;
    Measure out_of_place;
    Measure in_place;
    bool has_mpi = false;        // baseline requested
    bool mpi_supported = false;  // and possible for this type/op
    Measure mpi;
    /* --concurrent-gemm: TFLOP/s of the solo runs before, between and after the passes, averaged over ranks;
     * empty: not measured */
    std::vector<double> gemm_solos;
    GemmFigures gemm_vccl, gemm_base;
};

/* Reduces one rank's time across ranks per opts.average (collective over comm). */
double aggregate_time(double local_us, int average, MPI_Comm comm);
Measure make_measure(Coll coll, const Shape& shape, double time_us, long long wrong, int nranks);

void print_header(FILE* out, const Options& opts, int nranks, const std::vector<std::string>& rank_lines);
void print_row(FILE* out, const Options& opts, const Row& row);
void print_footer(FILE* out, const Options& opts, const std::vector<Row>& rows);
bool write_json(const std::string& path, const Options& opts, int nranks, const std::vector<Row>& rows,
                std::string* error);
double average_busbw(const std::vector<Row>& rows);
long long total_wrong(const std::vector<Row>& rows);

/* --emulated-hosts (emulated_host.cc): enters this rank's emulated host; false with *error when it cannot. */
bool enter_emulated_host(const std::string& spec, int rank, int nranks, std::string* error);

} // namespace vperf

#endif

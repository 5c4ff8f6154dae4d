/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-perf: command-line parsing and the names of collectives (those of datatypes and reduction operations
 * are the library's, core/names.h). */
#include <getopt.h>
#include <strings.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/names.h"
#include "core/parse_size.h"
#include "tools/perf/perf.h"

namespace vperf {

namespace {

struct CollName {
    const char* name;
    Coll coll;
};
const CollName kColls[] = {
    {"allreduce", Coll::AllReduce},         {"broadcast", Coll::Broadcast}, {"bcast", Coll::Broadcast},
    {"reduce", Coll::Reduce},               {"allgather", Coll::AllGather}, {"reducescatter", Coll::ReduceScatter},
    {"reduce_scatter", Coll::ReduceScatter}, {"alltoall", Coll::AlltoAll},  {"sendrecv", Coll::SendRecv},
};

/* "64", "4K", "1M", "2G" (powers of 1024, as nccl-tests): the library's parser (core/parse_size.h). */
bool parse_bytes(const char* text, size_t* out) {
    uint64_t v = 0;
    if (!vccl::parse_size(text, &v) || v > uint64_t(SIZE_MAX)) return false;
    *out = size_t(v);
    return true;
}

bool parse_int(const char* text, long min, long max, long* out) {
    if (text == nullptr || *text == '\0') return false;
    errno = 0;
    char* end = nullptr;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < min || v > max) return false;
    *out = v;
    return true;
}

/* Soak mode: COLLECTIVE is optional, the defaults differ, and only host memory with the MPI bootstrap is
 * supported (the soak was written and run on machines without a GPU). */
int finish_soak_options(int argc, char** argv, bool verbose, bool max_given, Options* o, Options* out) {
    auto usage = [&](const char* msg) {
        if (verbose) fprintf(stderr, "vccl-perf: --soak: %s\n", msg);
        return kExitUsage;
    };
    if (optind + 1 < argc) return usage("at most one COLLECTIVE");
    if (optind < argc && strcasecmp(argv[optind], "all") != 0) {
        bool found = false;
        for (const CollName& n : kColls) {
            if (strcasecmp(argv[optind], n.name) == 0) { o->coll = n.coll; found = true; break; }
        }
        if (!found) return usage("unknown COLLECTIVE");
        o->soak_all = false;
    }
    if (o->memory != Memory::Host) return usage("runs on host memory only (-m host)");
    if (o->baseline != Baseline::None) return usage("has no baseline");
    if (o->gemm_n > 0) return usage("has no --concurrent-gemm");
    if (o->cpu) return usage("has no --cpu");
    if (o->high_priority) return usage("runs on host memory only: --stream-priority does not apply");
    if (o->premul) return usage("draws its own operations: -o premulsum is not one of them");
    if (o->bootstrap != Bootstrap::Mpi) return usage("creates its communicators with vcclCommInitMPI only");
    if (!max_given) o->max_bytes = size_t(1) << 20;
    if (o->max_bytes < 8) return usage("the largest size (-e) must be at least 8 bytes");
    *out = *o;
    return -1;
}

} // namespace

const char* coll_name(Coll coll) {
    for (const CollName& c : kColls) {
        if (c.coll == coll) return c.name;
    }
    return "?";
}

/* The names of the library's table (core/names.h); "?" for what is not a type or built-in operation. */
const char* type_name(vcclDataType_t type) { return vccl::dtype_valid(type) ? vccl::dtype_name(type) : "?"; }

const char* op_name(vcclRedOp_t op) { return vccl::op_valid(op) ? vccl::op_name(op) : "?"; }

const char* op_label(const Options& o) { return o.premul ? "premulsum" : op_name(o.op); }

const char* baseline_name(Baseline b) {
    switch (b) {
    case Baseline::Mpi: return "mpi";
    case Baseline::Nccl: return "nccl";
    case Baseline::TelemetryOff: return "telemetry-off";
    case Baseline::TelemetryPaused: return "telemetry-paused";
    case Baseline::Self: return "self";
    case Baseline::None: break;
    }
    return "none";
}

size_t type_size(vcclDataType_t type) { return vccl::dtype_size(type); }

bool coll_has_op(Coll coll) {
    return coll == Coll::AllReduce || coll == Coll::Reduce || coll == Coll::ReduceScatter;
}

bool coll_has_root(Coll coll) { return coll == Coll::Broadcast || coll == Coll::Reduce; }

void print_usage(FILE* out) {
    fprintf(out,
            "Usage: mpirun -np N vccl-perf [options] COLLECTIVE\n"
            "\n"
            "Measures one vccl collective over a range of sizes and prints nccl-tests style tables.\n"
            "COLLECTIVE: allreduce | broadcast | reduce | allgather | reducescatter | alltoall | sendrecv\n"
            "            (sendrecv: every rank sends to rank+1 and receives from rank-1 in one group)\n"
            "\n"
            "Options:\n"
            "  -b, --minbytes SIZE      smallest size in bytes, K/M/G suffixes allowed (default 32M)\n"
            "  -e, --maxbytes SIZE      largest size in bytes (default 32M)\n"
            "  -f, --stepfactor N       multiply the size by N between steps (default 2)\n"
            "  -i, --stepbytes SIZE     add SIZE between steps instead of multiplying\n"
            "  -n, --iters N            timed iterations per size (default 20)\n"
            "  -w, --warmup_iters N     untimed warm-up iterations per size (default 5)\n"
            "  -c, --check 0|1          verify results, count wrong elements (default 1)\n"
            "  -o, --op OP              sum | prod | max | min | avg | premulsum (a PreMulSum op of scalar 1: the\n"
            "                           cost of the op itself; results checked as sum) (default sum)\n"
            "  -d, --datatype TYPE      int8 uint8 int32 uint32 int64 uint64 half float double bfloat16\n"
            "                           f8e4m3 f8e5m2 (FP8 E4M3, E5M2) (default float)\n"
            "  -r, --root N             root rank of broadcast and reduce (default 0)\n"
            "  -a, --average 0|1|2|3    time reported across ranks: 0 rank 0, 1 mean, 2 min, 3 max (default 3)\n"
            "  -z, --blocking 0|1       1: wait for the stream after every operation (-m cuda), as a blocking\n"
            "                           call such as MPI_Allreduce must; 0: operations back to back, one wait\n"
            "                           at the end (default 0)\n"
            "  -m, --memory host|cuda   where buffers live (default host)\n"
            "      --alloc cuda|vccl|vmm\n"
            "                           (-m cuda) how buffers are allocated: cudaMalloc (default), vcclMemAlloc,\n"
            "                           or CUDA VMM in 20 MiB allocations side by side with file-descriptor\n"
            "                           handles, as PyTorch's expandable segments make it\n"
            "  -J, --output_file FILE   also write the results as JSON to FILE (rank 0)\n"
            "      --bootstrap mpi|tcp  create the communicator with vcclCommInitMPI (default) or with a\n"
            "                           unique id from rank 0 (vcclGetUniqueId, MPI_Bcast, vcclCommInitRank)\n"
            "      --baseline mpi|nccl|telemetry-off|telemetry-paused|self\n"
            "                           also run the collective through MPI (host buffers), the system's NCCL\n"
            "                           (device buffers, same stream), a second vccl communicator with\n"
            "                           telemetry off (the first one then has it on), the same communicator\n"
            "                           with its telemetry recording paused, or the same one unchanged (an A/A\n"
            "                           control), on the same buffers, and print its time, bus bandwidth and\n"
            "                           the ratio vccl/baseline\n"
            "      --nccl-lib PATH      NCCL library for --baseline nccl (default libnccl.so.2)\n"
            "      --concurrent-gemm[=N]\n"
            "                           (-m cuda) after each size, run an N x N x N bf16 GEMM (cuBLAS, default\n"
            "                           N 8192) on a stream of its own, alone and then while -n operations of\n"
            "                           the collective run (and the NCCL baseline's, with --baseline nccl), and\n"
            "                           print the GEMM's TFLOP/s during the transfer against alone\n"
            "      --emulated-hosts PREFIX:H0,H1,...\n"
            "                           testing: rank r enters network namespace PREFIX<H_r> and takes the host\n"
            "                           name PREFIX<H_r>, so ranks form emulated hosts (tests/hosts)\n"
            "      --stream-priority high|default\n"
            "                           (-m cuda) create the benchmark's stream, which vccl and the NCCL\n"
            "                           baseline both use, at CUDA's greatest priority (or the default)\n"
            "      --cpu                the processor use of the timed operations, percent of one core, mean\n"
            "                           over ranks: the whole process and its threads other than the calling\n"
            "                           one (the library's and runtime's own threads); also for the baseline\n"
            "\n"
            "Soak mode (COLLECTIVE optional: all of them by default, or 'all', or one name):\n"
            "      --soak SECONDS       run random collectives, datatypes, ops, roots and sizes (0, 1, odd, up to\n"
            "                           -e, default 1M) on host memory for SECONDS, check every result, split and\n"
            "                           destroy communicators, and report RSS and open-descriptor growth per rank\n"
            "      --seed N             plan seed (default: chosen by rank 0 and printed)\n"
            "      --split-every N      steps between communicator splits (default 64, 0 never)\n"
            "      --max-rss-growth KB  allowed VmRSS growth per rank after warm-up (default 16384)\n"
            "      --max-fd-growth N    allowed growth of open descriptors per rank (default 0)\n"
            "      --progress SECONDS   seconds between progress lines (default 60, 0 none)\n"
            "  -h, --help               print this help and exit\n"
            "\n"
            "Exit status: 0 success, 1 wrong results, 2 usage error, 3 runtime failure,\n"
            "4 (--soak) growth above a limit.\n");
}

namespace {

enum LongOption { kOptBootstrap = 256, kOptBaseline, kOptNcclLib, kOptSoak, kOptSeed, kOptSplitEvery, kOptMaxRss,
       kOptMaxFd, kOptProgress, kOptGemm, kOptAlloc, kOptCpu, kOptPriority,
       kOptEmulatedHosts };

/* A parse in progress: the options so far, and what the checks at the end need. */
struct ParseState {
    Options o;
    bool op_given = false, max_given = false;
    bool verbose = false;
};

constexpr int kOptionTaken = -2;   // the option was valid and recorded
constexpr int kOptionNotMine = -3; // the option is another function's

int invalid(const ParseState& s, const char* what, const char* value) {
    if (s.verbose) {
        fprintf(stderr, "vccl-perf: invalid %s '%s'\n", what, value ? value : "");
        fprintf(stderr, "Try 'vccl-perf --help' for more information.\n");
    }
    return kExitUsage;
}

/* The options of the sweep itself, nccl-tests' letters (-b -e -f -i -n -w -c -o -d -r -a -m -J). */
int take_sweep_option(ParseState& s, int c, const char* arg) {
    long v = 0;
    switch (c) {
    case 'b':
        if (!parse_bytes(arg, &s.o.min_bytes)) return invalid(s, "minimum size (-b)", arg);
        break;
    case 'e':
        if (!parse_bytes(arg, &s.o.max_bytes)) return invalid(s, "maximum size (-e)", arg);
        s.max_given = true;
        break;
    case 'f':
        if (!parse_int(arg, 2, 1L << 20, &v)) return invalid(s, "step factor (-f, an integer >= 2)", arg);
        s.o.step_factor = size_t(v);
        break;
    case 'i':
        if (!parse_bytes(arg, &s.o.step_bytes) || s.o.step_bytes == 0)
            return invalid(s, "step size (-i, bytes > 0)", arg);
        break;
    case 'n':
        if (!parse_int(arg, 1, 1L << 30, &v)) return invalid(s, "iteration count (-n, >= 1)", arg);
        s.o.iters = int(v);
        break;
    case 'w':
        if (!parse_int(arg, 0, 1L << 30, &v)) return invalid(s, "warm-up count (-w, >= 0)", arg);
        s.o.warmup = int(v);
        break;
    case 'c':
        if (!parse_int(arg, 0, 1, &v)) return invalid(s, "check flag (-c, 0 or 1)", arg);
        s.o.check = int(v);
        break;
    case 'o': {
        s.o.premul = false;
        int op = vccl::op_from_name(arg);
        bool found = op >= 0;
        if (found) s.o.op = vcclRedOp_t(op);
        if (strcasecmp(arg, "premulsum") == 0) { // vcclRedOpCreatePreMulSum with a scalar of 1
            s.o.op = vcclSum;
            s.o.premul = true;
            found = true;
        }
        if (!found) return invalid(s, "reduction operation (-o: sum, prod, max, min, avg, premulsum)", arg);
        s.op_given = true;
        break;
    }
    case 'd': {
        int type = vccl::dtype_from_name(arg);
        if (type >= 0) {
            s.o.dtype = vcclDataType_t(type);
        } else {
            if (strcasecmp(arg, "host") == 0 || strcasecmp(arg, "cuda") == 0)
                return invalid(s, "datatype (-d names a datatype; buffer placement is -m host|cuda)", arg);
            return invalid(s, "datatype (-d)", arg);
        }
        break;
    }
    case 'r':
        if (!parse_int(arg, 0, 1L << 30, &v)) return invalid(s, "root rank (-r)", arg);
        s.o.root = int(v);
        break;
    case 'a':
        if (!parse_int(arg, 0, 3, &v)) return invalid(s, "averaging mode (-a, 0..3)", arg);
        s.o.average = int(v);
        break;
    case 'z':
        if (!parse_int(arg, 0, 1, &v)) return invalid(s, "blocking mode (-z 0|1)", arg);
        s.o.blocking = int(v);
        break;
    case 'm':
        if (strcasecmp(arg, "host") == 0) s.o.memory = Memory::Host;
        else if (strcasecmp(arg, "cuda") == 0) s.o.memory = Memory::Cuda;
        else return invalid(s, "memory placement (-m host|cuda)", arg);
        break;
    case 'J':
        if (*arg == '\0') return invalid(s, "JSON output file (-J)", arg);
        s.o.json_path = arg;
        break;
    default:
        return kOptionNotMine;
    }
    return kOptionTaken;
}

/* The long options: bootstrap, baselines, soak, GEMM, processor use, stream priority. */
int take_run_option(ParseState& s, int c, const char* arg) {
    long v = 0;
    switch (c) {
    case kOptBootstrap:
        if (strcasecmp(arg, "mpi") == 0) s.o.bootstrap = Bootstrap::Mpi;
        else if (strcasecmp(arg, "tcp") == 0) s.o.bootstrap = Bootstrap::Tcp;
        else return invalid(s, "bootstrap (--bootstrap mpi|tcp)", arg);
        break;
    case kOptNcclLib:
        s.o.nccl_lib = arg;
        break;
    case kOptAlloc:
        if (strcasecmp(arg, "cuda") == 0) s.o.device_alloc = DeviceAlloc::Cuda;
        else if (strcasecmp(arg, "vccl") == 0) s.o.device_alloc = DeviceAlloc::Vccl;
        else if (strcasecmp(arg, "vmm") == 0) s.o.device_alloc = DeviceAlloc::Vmm;
        else return invalid(s, "device allocator (--alloc cuda|vccl|vmm)", arg);
        break;
    case kOptBaseline:
        if (strcasecmp(arg, "mpi") == 0) s.o.baseline = Baseline::Mpi;
        else if (strcasecmp(arg, "nccl") == 0) s.o.baseline = Baseline::Nccl;
        else if (strcasecmp(arg, "telemetry-off") == 0) s.o.baseline = Baseline::TelemetryOff;
        else if (strcasecmp(arg, "telemetry-paused") == 0) s.o.baseline = Baseline::TelemetryPaused;
        else if (strcasecmp(arg, "self") == 0) s.o.baseline = Baseline::Self;
        else return invalid(s, "baseline (--baseline mpi|nccl|telemetry-off|telemetry-paused|self)", arg);
        break;
    case kOptSoak: {
        char* end = nullptr;
        s.o.soak_seconds = strtod(arg, &end);
        if (end == arg || *end != '\0' || !(s.o.soak_seconds > 0) || s.o.soak_seconds > 1e7)
            return invalid(s, "soak duration (--soak SECONDS, > 0)", arg);
        break;
    }
    case kOptSeed: {
        char* end = nullptr;
        errno = 0;
        s.o.seed = strtoull(arg, &end, 0);
        if (errno != 0 || end == arg || *end != '\0' || *arg == '-') return invalid(s, "seed (--seed)", arg);
        break;
    }
    case kOptSplitEvery:
        if (!parse_int(arg, 0, 1L << 30, &v)) return invalid(s, "split interval (--split-every, >= 0)", arg);
        s.o.split_every = int(v);
        break;
    case kOptMaxRss:
        if (!parse_int(arg, 0, 1L << 40, &v)) return invalid(s, "RSS growth limit (--max-rss-growth KB)", arg);
        s.o.max_rss_growth_kb = v;
        break;
    case kOptMaxFd:
        if (!parse_int(arg, 0, 1L << 20, &v)) return invalid(s, "descriptor growth limit (--max-fd-growth)", arg);
        s.o.max_fd_growth = v;
        break;
    case kOptProgress:
        if (!parse_int(arg, 0, 1L << 30, &v)) return invalid(s, "progress interval (--progress SECONDS)", arg);
        s.o.soak_progress = int(v);
        break;
    case kOptGemm:
        /* 64 <= N keeps cuBLAS on tensor-core kernels; N <= 32768 keeps the three matrices under 6 GiB */
        if (arg == nullptr) s.o.gemm_n = 8192;
        else if (!parse_int(arg, 64, 32768, &v)) return invalid(s, "GEMM size (--concurrent-gemm=N, 64..32768)", arg);
        else s.o.gemm_n = int(v);
        break;
    case kOptCpu:
        s.o.cpu = true;
        break;
    case kOptPriority:
        if (strcasecmp(arg, "high") == 0) s.o.high_priority = true;
        else if (strcasecmp(arg, "default") == 0) s.o.high_priority = false;
        else return invalid(s, "stream priority (--stream-priority high|default)", arg);
        break;
    case kOptEmulatedHosts:
        if (strchr(arg, ':') == nullptr || arg[0] == ':') return invalid(s, "emulated hosts (--emulated-hosts PREFIX:H0,H1,...)", arg);
        s.o.emulated_hosts = arg;
        break;
    default:
        return kOptionNotMine;
    }
    return kOptionTaken;
}

} // namespace

int parse_options(int argc, char** argv, bool verbose, Options* opts) {
    static const struct option kLong[] = {
        {"minbytes", required_argument, nullptr, 'b'},
        {"maxbytes", required_argument, nullptr, 'e'},
        {"stepfactor", required_argument, nullptr, 'f'},
        {"stepbytes", required_argument, nullptr, 'i'},
        {"iters", required_argument, nullptr, 'n'},
        {"warmup_iters", required_argument, nullptr, 'w'},
        {"check", required_argument, nullptr, 'c'},
        {"op", required_argument, nullptr, 'o'},
        {"datatype", required_argument, nullptr, 'd'},
        {"root", required_argument, nullptr, 'r'},
        {"average", required_argument, nullptr, 'a'},
        {"blocking", required_argument, nullptr, 'z'},
        {"memory", required_argument, nullptr, 'm'},
        {"alloc", required_argument, nullptr, kOptAlloc},
        {"output_file", required_argument, nullptr, 'J'},
        {"bootstrap", required_argument, nullptr, kOptBootstrap},
        {"baseline", required_argument, nullptr, kOptBaseline},
        {"nccl-lib", required_argument, nullptr, kOptNcclLib},
        {"soak", required_argument, nullptr, kOptSoak},
        {"seed", required_argument, nullptr, kOptSeed},
        {"split-every", required_argument, nullptr, kOptSplitEvery},
        {"max-rss-growth", required_argument, nullptr, kOptMaxRss},
        {"max-fd-growth", required_argument, nullptr, kOptMaxFd},
        {"progress", required_argument, nullptr, kOptProgress},
        {"concurrent-gemm", optional_argument, nullptr, kOptGemm},
        {"cpu", no_argument, nullptr, kOptCpu},
        {"stream-priority", required_argument, nullptr, kOptPriority},
        {"emulated-hosts", required_argument, nullptr, kOptEmulatedHosts},
        {"help", no_argument, nullptr, 'h'},
        {nullptr, 0, nullptr, 0},
    };
    ParseState s;
    s.verbose = verbose;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":b:e:f:i:n:w:c:o:d:r:a:z:m:J:h", kLong, nullptr)) != -1) {
        int r = take_sweep_option(s, c, optarg);
        if (r == kOptionNotMine) r = take_run_option(s, c, optarg);
        if (r == kOptionTaken) continue;
        if (r != kOptionNotMine) return r;
        switch (c) {
        case 'h':
            if (verbose) print_usage(stdout);
            return kExitOk;
        case ':':
            if (verbose) {
                fprintf(stderr, "vccl-perf: option '%s' needs a value\n", argv[optind - 1]);
                fprintf(stderr, "Try 'vccl-perf --help' for more information.\n");
            }
            return kExitUsage;
        default:
            if (verbose) {
                fprintf(stderr, "vccl-perf: unknown option '%s'\n", argv[optind - 1]);
                fprintf(stderr, "Try 'vccl-perf --help' for more information.\n");
            }
            return kExitUsage;
        }
    }
    Options& o = s.o;
    if (o.soak_seconds > 0) return finish_soak_options(argc, argv, verbose, s.max_given, &o, opts);
    if (optind >= argc) {
        if (verbose) {
            fprintf(stderr, "vccl-perf: missing COLLECTIVE (allreduce, broadcast, reduce, allgather, "
                            "reducescatter, alltoall or sendrecv)\n");
            fprintf(stderr, "Try 'vccl-perf --help' for more information.\n");
        }
        return kExitUsage;
    }
    if (optind + 1 < argc) return invalid(s, "extra argument", argv[optind + 1]);
    bool found = false;
    for (const CollName& n : kColls) {
        if (strcasecmp(argv[optind], n.name) == 0) { o.coll = n.coll; found = true; break; }
    }
    if (!found) return invalid(s, "collective", argv[optind]);
    if (o.min_bytes > o.max_bytes) {
        if (verbose)
            fprintf(stderr, "vccl-perf: minimum size %zu (-b) is larger than maximum size %zu (-e)\n",
                    o.min_bytes, o.max_bytes);
        return kExitUsage;
    }
    if (s.op_given && !coll_has_op(o.coll) && verbose)
        fprintf(stderr, "vccl-perf: note: %s does not reduce; -o is ignored\n", coll_name(o.coll));
    *opts = o;
    return -1;
}

} // namespace vperf

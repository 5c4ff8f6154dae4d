/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_mpi_device: MPI_Allreduce on cudaMalloc buffers through vccl (the coll/vccl component, or the PMPI
 * interposer libvccl-pmpi.so preloaded), against what a program does on an MPI that is not CUDA-aware:
 * cudaMemcpy device->host, MPI_Allreduce on host buffers, cudaMemcpy host->device (figures in
 * docs/PERFORMANCE.md). float sum, sizes -b..-e, nccl-tests style columns for both routes and the speedup
 * (manual time / vccl time).
 *
 * The manual route uses pinned host buffers (cudaMallocHost), the fastest way to do it by hand; with
 * malloc'd buffers it would be slower still. Both routes check their result every size (small integers,
 * exact in float). Times are the slowest rank's mean over -n iterations after -w warm-up ones.
 *
 * Run it with the component loaded (contrib/bench-coll-vccl.sh) or the interposer preloaded
 * (contrib/bench-pmpi.sh); without either the device pointers would reach the MPI library's own code, which
 * crashes on them, so the program refuses to start. Exit status: 0 done, 1 wrong results, 2 usage error or
 * neither route loaded, 3 CUDA/MPI failure, 77 no GPU (skipped).
 */
#define _GNU_SOURCE /* dladdr, RTLD_DEFAULT */
#include <mpi.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kExitWrong = 1, kExitUsage = 2, kExitRuntime = 3, kExitSkip = 77 };

struct opts {
    size_t min_bytes, max_bytes;
    int factor, iters, warmup;
};

static int g_rank;

static void die_cuda(cudaError_t e, const char* what) {
    fprintf(stderr, "bench_mpi_device: rank %d: %s: %s\n", g_rank, what, cudaGetErrorString(e));
    MPI_Abort(MPI_COMM_WORLD, kExitRuntime);
}
#define CUDA_OR_DIE(call)                            \
    do {                                             \
        cudaError_t e_ = (call);                     \
        if (e_ != cudaSuccess) die_cuda(e_, #call);  \
    } while (0)

static int parse_size(const char* s, size_t* out) {
    char* end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return 0;
    if (*end == 'K' || *end == 'k') v <<= 10, end++;
    else if (*end == 'M' || *end == 'm') v <<= 20, end++;
    else if (*end == 'G' || *end == 'g') v <<= 30, end++;
    if (*end != '\0') return 0;
    *out = (size_t)v;
    return 1;
}

static int parse_opts(int argc, char** argv, struct opts* o) {
    o->min_bytes = 8;
    o->max_bytes = 256u << 20;
    o->factor = 2;
    o->iters = 20;
    o->warmup = 5;
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = v != NULL;
        if (strcmp(a, "-b") == 0 && ok) ok = parse_size(v, &o->min_bytes);
        else if (strcmp(a, "-e") == 0 && ok) ok = parse_size(v, &o->max_bytes);
        else if (strcmp(a, "-f") == 0 && ok) ok = (o->factor = atoi(v)) >= 2;
        else if (strcmp(a, "-n") == 0 && ok) ok = (o->iters = atoi(v)) >= 1;
        else if (strcmp(a, "-w") == 0 && ok) ok = (o->warmup = atoi(v)) >= 0;
        else ok = 0;
        if (!ok) {
            if (g_rank == 0)
                fprintf(stderr, "usage: bench_mpi_device [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS] [-w WARMUP]\n"
                                "       (defaults 8, 256M, 2, 20, 5; K/M/G suffixes)\n");
            return 0;
        }
        ++i;
    }
    if (o->min_bytes < 4) o->min_bytes = 4; /* one float */
    return o->min_bytes <= o->max_bytes;
}

/* 1 when coll/vccl is loaded and enabled: its MCA parameters exist only when the component was opened. */
static int vccl_component_enabled(void) {
    int provided, index = -1, enabled = 0, count = 0;
    MPI_T_cvar_handle handle;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return 0;
    if (MPI_T_cvar_get_index("coll_vccl_enable", &index) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(index, NULL, &handle, &count) == MPI_SUCCESS) {
        if (MPI_T_cvar_read(handle, &enabled) != MPI_SUCCESS) enabled = 0;
        MPI_T_cvar_handle_free(&handle);
    }
    MPI_T_finalize();
    return enabled != 0;
}

/* 1 when MPI_Allreduce resolves to the PMPI interposer: a preloaded library's definition comes first in the
 * global lookup order, so the first MPI_Allreduce found lies in libvccl-pmpi.so. */
static int vccl_interposer_loaded(void) {
    Dl_info info;
    void* first = dlsym(RTLD_DEFAULT, "MPI_Allreduce");
    return first != NULL && dladdr(first, &info) != 0 && info.dli_fname != NULL &&
           strstr(info.dli_fname, "libvccl-pmpi") != NULL;
}

/* Rank r contributes (r + i) % 8 at element i: sums stay small integers, exact in float. */
static void fill(float* host, size_t n, int rank) {
    for (size_t i = 0; i < n; ++i) host[i] = (float)((rank + i) % 8);
}

static long long count_wrong(const float* got, size_t n, int nranks) {
    long long wrong = 0;
    for (size_t i = 0; i < n; ++i) {
        float want = 0;
        for (int r = 0; r < nranks; ++r) want += (float)((r + i) % 8);
        wrong += got[i] != want;
    }
    return wrong;
}

struct bufs {
    float *dsend, *drecv, *hsend, *hrecv, *hcheck;
};

/* One allreduce of n floats on device buffers, by `manual` staging or directly (through vccl). */
static void allreduce(const struct bufs* b, size_t n, int manual) {
    if (!manual) {
        MPI_Allreduce(b->dsend, b->drecv, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        return;
    }
    CUDA_OR_DIE(cudaMemcpy(b->hsend, b->dsend, n * sizeof(float), cudaMemcpyDeviceToHost));
    MPI_Allreduce(b->hsend, b->hrecv, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    CUDA_OR_DIE(cudaMemcpy(b->drecv, b->hrecv, n * sizeof(float), cudaMemcpyHostToDevice));
}

/* Microseconds per operation, the slowest rank's. */
static double time_route(const struct bufs* b, size_t n, int manual, const struct opts* o) {
    for (int i = 0; i < o->warmup; ++i) allreduce(b, n, manual);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < o->iters; ++i) allreduce(b, n, manual);
    double us = (MPI_Wtime() - t0) * 1e6 / o->iters, max_us = 0;
    MPI_Allreduce(&us, &max_us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max_us;
}

/* Runs one checked operation with fresh inputs; wrong elements summed over ranks. */
static long long check_route(const struct bufs* b, size_t n, int manual, int rank, int nranks) {
    fill(b->hcheck, n, rank);
    CUDA_OR_DIE(cudaMemcpy(b->dsend, b->hcheck, n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OR_DIE(cudaMemset(b->drecv, 0xff, n * sizeof(float)));
    allreduce(b, n, manual);
    CUDA_OR_DIE(cudaMemcpy(b->hcheck, b->drecv, n * sizeof(float), cudaMemcpyDeviceToHost));
    long long wrong = count_wrong(b->hcheck, n, nranks), total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return total;
}

static int local_rank(void) {
    MPI_Comm node;
    int r = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &r);
    MPI_Comm_free(&node);
    return r;
}

static int run(int argc, char** argv, int rank, int nranks) {
    struct opts o;
    if (!parse_opts(argc, argv, &o)) return kExitUsage;
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    int lacking = !(e == cudaSuccess && ndev > 0), all_lacking = 0;
    MPI_Allreduce(&lacking, &all_lacking, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (all_lacking > 0) {
        if (rank == 0)
            printf("bench_mpi_device: skipped: %d of %d ranks see no CUDA device (rank 0: %s)\n", all_lacking,
                   nranks, !lacking ? "has one" : e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return kExitSkip;
    }
    int interposer = vccl_interposer_loaded();
    int enabled = interposer || vccl_component_enabled(), all_enabled = 0;
    MPI_Allreduce(&enabled, &all_enabled, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD); /* all ranks stop, or none */
    if (!all_enabled) {
        if (rank == 0)
            fprintf(stderr, "bench_mpi_device: neither coll/vccl (or coll_vccl_enable is 0) nor libvccl-pmpi.so is "
                            "loaded: the MPI library's own code would receive device pointers. Name the component's "
                            "directory in OMPI_MCA_mca_base_component_path (contrib/bench-coll-vccl.sh, "
                            "coll_vccl(7)) or preload the interposer (contrib/bench-pmpi.sh, vccl-pmpi(7)).\n");
        return kExitUsage;
    }
    CUDA_OR_DIE(cudaSetDevice(local_rank() % ndev));
    struct bufs b;
    size_t max_n = o.max_bytes / sizeof(float);
    CUDA_OR_DIE(cudaMalloc((void**)&b.dsend, max_n * sizeof(float)));
    CUDA_OR_DIE(cudaMalloc((void**)&b.drecv, max_n * sizeof(float)));
    CUDA_OR_DIE(cudaMallocHost((void**)&b.hsend, max_n * sizeof(float)));
    CUDA_OR_DIE(cudaMallocHost((void**)&b.hrecv, max_n * sizeof(float)));
    b.hcheck = malloc(max_n * sizeof(float));
    if (b.hcheck == NULL) return kExitRuntime;

    double bus = 2.0 * (nranks - 1) / nranks;
    if (rank == 0) {
        printf("# bench_mpi_device: MPI_Allreduce, float sum, device buffers, %d ranks, %d iterations (+%d warm-up)\n"
               "# vccl:      MPI_Allreduce on the device pointers (%s)\n"
               "# manual:    cudaMemcpy D2H (pinned) + MPI_Allreduce on host + cudaMemcpy H2D\n"
               "# speedup:   manual time / vccl time\n#\n"
               "# %10s %11s %6s %5s | %10s %8s %8s %6s | %10s %8s %8s %6s | %7s\n"
               "# %10s %11s %6s %5s | %10s %8s %8s %6s | %10s %8s %8s %6s | %7s\n",
               nranks, o.iters, o.warmup, interposer ? "PMPI interposer libvccl-pmpi.so" : "coll/vccl component",
               "", "", "", "", "vccl", "", "", "", "manual", "", "", "", "",
               "size(B)", "count", "type", "redop", "time(us)", "algbw", "busbw", "#wrong", "time(us)", "algbw",
               "busbw", "#wrong", "speedup");
    }
    long long wrong_total = 0;
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= (size_t)o.factor) {
        size_t n = bytes / sizeof(float);
        double t[2];
        long long wrong[2];
        for (int manual = 0; manual < 2; ++manual) {
            fill(b.hcheck, n, rank);
            CUDA_OR_DIE(cudaMemcpy(b.dsend, b.hcheck, n * sizeof(float), cudaMemcpyHostToDevice));
            t[manual] = time_route(&b, n, manual, &o);
            wrong[manual] = check_route(&b, n, manual, rank, nranks);
            wrong_total += wrong[manual];
        }
        if (rank == 0) {
            double s = (double)(n * sizeof(float));
            printf("  %10zu %11zu %6s %5s | %10.1f %8.2f %8.2f %6lld | %10.1f %8.2f %8.2f %6lld | %7.2f\n",
                   n * sizeof(float), n, "float", "sum", t[0], s / t[0] / 1e3, s / t[0] / 1e3 * bus, wrong[0],
                   t[1], s / t[1] / 1e3, s / t[1] / 1e3 * bus, wrong[1], t[1] / t[0]);
            fflush(stdout);
        }
        if (bytes > o.max_bytes / (size_t)o.factor) break; /* the next step would overflow or pass -e */
    }
    cudaFree(b.dsend);
    cudaFree(b.drecv);
    cudaFreeHost(b.hsend);
    cudaFreeHost(b.hrecv);
    free(b.hcheck);
    if (rank == 0) printf("# Out of bounds values : %lld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
    return wrong_total ? kExitWrong : 0;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int nranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int rc = run(argc, argv, g_rank, nranks);
    MPI_Finalize();
    return rc;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A short host-memory job for the tests that watch telemetry from outside (np2_prometheus.sh): ITERS
 * allreduces of COUNT floats, results checked, then "traffic done" on rank 0's stdout, and the communicator
 * kept (its rings stay in /dev/shm) until HOLD_FILE exists or 120 s have passed.
 * usage: telemetry_load COUNT ITERS HOLD_FILE
 */
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "vccl.h"
#include "vccl_mpi.h"

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (argc != 4) {
        if (rank == 0) fprintf(stderr, "usage: telemetry_load COUNT ITERS HOLD_FILE\n");
        MPI_Finalize();
        return 2;
    }
    const size_t count = size_t(strtoull(argv[1], nullptr, 10));
    const int iters = atoi(argv[2]);
    vcclComm_t comm = nullptr;
    if (vcclCommInitMPI(&comm, MPI_COMM_WORLD, nullptr) != vcclSuccess) {
        fprintf(stderr, "rank %d: vcclCommInitMPI: %s\n", rank, vcclGetLastError(nullptr));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::vector<float> in(count, float(rank + 1)), out(count, 0.0f);
    const float want = float(n * (n + 1) / 2);
    int wrong = 0;
    for (int i = 0; i < iters; ++i) {
        if (vcclAllReduce(in.data(), out.data(), count, vcclFloat, vcclSum, comm, nullptr) != vcclSuccess) {
            fprintf(stderr, "rank %d: vcclAllReduce: %s\n", rank, vcclGetLastError(nullptr));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (size_t k = 0; k < count; ++k) wrong += out[k] != want;
    }
    int all_wrong = 0;
    MPI_Allreduce(&wrong, &all_wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("traffic done: %d allreduces of %zu floats, %d wrong\n", iters, count, all_wrong);
        fflush(stdout);
    }
    for (int waited = 0; waited < 2400 && access(argv[3], F_OK) != 0; ++waited) usleep(50000);
    MPI_Barrier(MPI_COMM_WORLD);
    vcclCommDestroy(comm);
    MPI_Finalize();
    return all_wrong == 0 ? 0 : 1;
}

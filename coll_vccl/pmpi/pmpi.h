/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pmpi.h - libvccl-pmpi.so: MPI collectives on device memory through vccl for any MPI, by the MPI
 * profiling interface. The library defines MPI_Allreduce & co.; loaded before the MPI library (LD_PRELOAD or
 * linked first) it receives the application's calls and either runs them on vccl or calls the MPI library's
 * PMPI_ entry points. It is compiled once per MPI flavour (mpi.h differs in ABI) and uses only vccl's public
 * C API, so it follows whatever libvccl.so exports.
 *
 * Files, one responsibility each:
 *   settings.c     environment switches, logging, call counters
 *   device.c       memory kind of a pointer (CUDA driver, loaded only when the process loaded it), copies,
 *                  stream synchronisation
 *   types.c        MPI datatypes and ops to vccl's, data spans for host staging
 *   comm.c         the vccl communicator cached on an MPI communicator; errors to the MPI error handler
 *   stage.c        host copies of device buffers for calls that go to the MPI library
 *   colls.c        the blocking collectives
 *   nonblocking.c  nonblocking collectives on device memory (host staging) and the completion calls
 *
 * Routing of one call on one process: VCCL_PMPI=0, or only host buffers with VCCL_PMPI_HOST=0 -> PMPI
 * unchanged. Otherwise, a predefined datatype and op vccl supports, valid arguments and a usable vccl
 * communicator -> vccl; anything else with a device buffer -> PMPI on host copies (never a device pointer
 * to an MPI library that cannot read it); anything else with host buffers -> PMPI unchanged. Every input of
 * the decision except the memory kind is one that MPI requires to match on all processes.
 */
#ifndef VCCL_PMPI_H_
#define VCCL_PMPI_H_

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "vccl.h"

/* The MPI 4 large-count entry points (MPI_Allreduce_c, ...): MPICH 4 has them and mpi4py calls them there. */
#if defined(MPI_VERSION) && MPI_VERSION >= 4
#define PM_HAVE_LARGE_COUNT 1
#else
#define PM_HAVE_LARGE_COUNT 0
#endif

#define PM_EXPORT __attribute__((visibility("default")))

/* ---- settings.c ---- */
/* VCCL_PMPI_HOST values */
enum { PM_HOST_PMPI = 0, PM_HOST_VCCL = 1, PM_HOST_AS_DEVICE = 2 };

typedef struct {
    int enabled; /* VCCL_PMPI */
    int host;    /* VCCL_PMPI_HOST */
    int verbose; /* VCCL_PMPI_VERBOSE */
} pm_settings_t;

const pm_settings_t* pm_settings(void);
/* "vccl-pmpi[rank R]: ..." on stderr when VCCL_PMPI_VERBOSE >= level (level 0: always). */
void pm_log(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* A call's route, told to the tests through the test library's test point (src/core/test_point.h, PmpiRoute);
 * nothing in other processes. */
enum pm_route { PM_ROUTE_VCCL = 0, PM_ROUTE_PMPI = 1, PM_ROUTE_STAGED = 2, PM_NUM_ROUTES = 3 };
void pm_count(enum pm_route r);

/* ---- device.c ---- */
/* Memory kind of a buffer: host, CUDA device or managed memory, or host memory that VCCL_PMPI_HOST=2
 * treats as device memory. NULL and MPI_IN_PLACE are host. */
enum pm_kind { PM_HOST = 0, PM_DEVICE = 1, PM_HOST_AS_DEV = 2 };
enum pm_kind pm_kind(const void* ptr);
static inline int pm_is_dev(enum pm_kind k) { return k != PM_HOST; }
/* Copies bytes between any two buffers (host or device); 0 on success. Waits for the copy. */
int pm_copy(void* dst, const void* src, size_t bytes);
/* Makes a context current for a device buffer when the calling thread has none (vccl and the copies need
 * one), then waits for the device work of the NULL stream; 0 on success. */
int pm_device_prepare(const void* ptr);
int pm_device_sync(void);

/* ---- types.c ---- */
/* A predefined datatype that MPI reduces with SUM/PROD/MAX/MIN and vccl has: 0 and *out; -1 otherwise. */
int pm_reduce_type(MPI_Datatype dt, vcclDataType_t* out);
int pm_reduce_op(MPI_Op op, vcclRedOp_t* out);
/* Data movement: count elements of dt as one gap-free block starting at the buffer, in type-map order, as a
 * vccl type and element count (bytes unless dt maps directly). -1 when not so. */
int pm_move_type(MPI_Datatype dt, size_t count, vcclDataType_t* out, size_t* out_count);
size_t pm_vtype_size(vcclDataType_t t);
/* Bytes that count elements of dt span from the buffer pointer plus *lb (the true lower bound). */
int pm_span(MPI_Datatype dt, size_t count, size_t* span, ptrdiff_t* lb);

/* ---- comm.c ---- */
typedef struct pm_comm pm_comm_t;
struct pm_comm {
    vcclComm_t vcomm; /* NULL until created, and after teardown */
    int state;        /* PM_COMM_* */
    int rank, size;
    unsigned id;      /* rank 0's serial number, for messages */
    unsigned long long n[PM_NUM_ROUTES];
    pm_comm_t* prev; /* live list (comm.c), for the teardown in MPI_Finalize */
    pm_comm_t* next;
    int linked;
};
enum { PM_COMM_NEW = 0, PM_COMM_READY = 1, PM_COMM_UNUSABLE = 2 };

/* Rank and size of comm; -1 for MPI_COMM_NULL or an error (the caller then leaves the call to PMPI). */
int pm_comm_rank_size(MPI_Comm comm, int* rank, int* size);
/* The vccl communicator cached on comm, created collectively over comm on its first use; NULL when vccl
 * cannot serve comm (an inter-communicator, creation failed on some process). Every process of comm must
 * make the same call. */
pm_comm_t* pm_comm_get(MPI_Comm comm, const char* call);
/* Counts a call on comm's record too (when it has one). */
void pm_comm_count(pm_comm_t* pc, enum pm_route r);

/* vccl's result of an MPI call: MPI_SUCCESS, or the MPI error raised on comm's error handler, with vccl's
 * own message logged (the first time per MPI function) with the MPI call's name. */
int pm_vccl_result(MPI_Comm comm, const char* call, vcclResult_t rc, pm_comm_t* pc);
/* An error of the interposer itself (allocation, copy) raised on comm's error handler. */
int pm_raise(MPI_Comm comm, const char* call, int mpi_class, const char* what);

/* ---- stage.c ---- */
typedef struct {
    void* user;    /* the caller's (device) buffer; NULL when nothing is staged */
    char* tmp;     /* host copy of the span */
    size_t span;
    ptrdiff_t lb;
} pm_stage_t;
/* A host pointer to hand the MPI library in place of user when user is device memory (user itself otherwise:
 * host memory, NULL, MPI_IN_PLACE); with copy_in the contents are copied in. count 0 gives a one-byte host
 * buffer, so the library's argument checks see a valid, distinct pointer. Returns NULL on failure. */
void* pm_stage_in(pm_stage_t* s, void* user, MPI_Datatype dt, size_t count, int copy_in);
/* Copies the host copy back when copy_back, then frees it; 0 on success. */
int pm_stage_out(pm_stage_t* s, int copy_back);
/* Frees without copying (for the nonblocking path's send buffers). */
void pm_stage_free(pm_stage_t* s);

/* ---- nonblocking.c ---- */
/* Staged nonblocking calls still in flight: completion calls look only when there are some. */
extern volatile int pm_pending_requests;

#endif /* VCCL_PMPI_H_ */

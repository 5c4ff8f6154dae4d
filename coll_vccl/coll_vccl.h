/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * coll_vccl.h - an out-of-tree Open MPI 4.1 coll component that routes collectives on GPU buffers to vccl.
 *
 * Responsibilities, one file each:
 *   component.c  registration with Open MPI and the MCA parameters
 *   module.c     comm_query / enable / destructor; the previous modules kept (OBJ_RETAIN) for fall-back
 *   ops.c        MPI datatype and op to vccl datatype and op
 *   colls.c      the intercepted collectives and their routing (vccl, previous module, host staging)
 *   device.c     device-pointer detection and copies through the CUDA driver API, loaded with dlopen
 *   lazy.c       the vccl communicator created on first use per MPI communicator, and its teardown
 */
#ifndef COLL_VCCL_H_
#define COLL_VCCL_H_

#include "ompi_config.h"

#include <stdbool.h>
#include <stddef.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/coll/coll.h"

#include "vccl.h"

BEGIN_C_DECLS

/* ---- component (component.c) ---- */
typedef struct mca_coll_vccl_component_t {
    mca_coll_base_component_2_0_0_t super;
    int priority;     /* coll_vccl_priority */
    int enable;       /* coll_vccl_enable */
    int verbose;      /* coll_vccl_verbose */
    int min_bytes;    /* coll_vccl_min_bytes: device messages below this are staged to the previous module */
    int host;         /* coll_vccl_host: host buffers go through vccl too */
} mca_coll_vccl_component_t;

OMPI_MODULE_DECLSPEC extern mca_coll_vccl_component_t mca_coll_vccl_component;

/* Messages on stderr prefixed "coll:vccl:" when coll_vccl_verbose >= level. */
void mca_coll_vccl_log(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- module (module.c) ---- */
typedef struct mca_coll_vccl_module_t {
    mca_coll_base_module_t super;
    struct ompi_communicator_t* comm;
    unsigned cid;              /* context id, for messages */
    vcclComm_t vcomm;          /* NULL until the first collective that needs it (lazy.c) */
    int vcomm_failed;          /* creation failed once: everything goes to the previous module */
    struct mca_coll_vccl_module_t* live_prev; /* lazy.c's list of modules owning a vccl communicator */
    struct mca_coll_vccl_module_t* live_next;
    int live_linked;
    unsigned long n_vccl, n_prev, n_staged;

    /* previous modules, retained in enable */
    mca_coll_base_module_allreduce_fn_t prev_allreduce;
    mca_coll_base_module_t* prev_allreduce_module;
    mca_coll_base_module_bcast_fn_t prev_bcast;
    mca_coll_base_module_t* prev_bcast_module;
    mca_coll_base_module_reduce_fn_t prev_reduce;
    mca_coll_base_module_t* prev_reduce_module;
    mca_coll_base_module_allgather_fn_t prev_allgather;
    mca_coll_base_module_t* prev_allgather_module;
    mca_coll_base_module_reduce_scatter_block_fn_t prev_reduce_scatter_block;
    mca_coll_base_module_t* prev_reduce_scatter_block_module;
    mca_coll_base_module_reduce_scatter_fn_t prev_reduce_scatter;
    mca_coll_base_module_t* prev_reduce_scatter_module;
    mca_coll_base_module_alltoall_fn_t prev_alltoall;
    mca_coll_base_module_t* prev_alltoall_module;
    mca_coll_base_module_barrier_fn_t prev_barrier;
    mca_coll_base_module_t* prev_barrier_module;
} mca_coll_vccl_module_t;

OBJ_CLASS_DECLARATION(mca_coll_vccl_module_t);

int mca_coll_vccl_init_query(bool enable_progress_threads, bool enable_mpi_threads);
mca_coll_base_module_t* mca_coll_vccl_comm_query(struct ompi_communicator_t* comm, int* priority);

/* ---- datatype / op mapping (ops.c) ---- */
/* Returns 0 and sets *out for a predefined datatype vccl reduces; -1 otherwise. */
int mca_coll_vccl_map_dtype(struct ompi_datatype_t* dt, vcclDataType_t* out);
/* Returns 0 and sets *out for MPI_SUM/PROD/MAX/MIN; -1 otherwise. */
int mca_coll_vccl_map_op(struct ompi_op_t* op, vcclRedOp_t* out);
/* Data movement without reduction: a vccl type and element count covering count elements of dt, for a
 * datatype whose count elements are one contiguous block starting at the buffer (any datatype vccl knows,
 * else bytes). Returns -1 when the layout is not contiguous. */
int mca_coll_vccl_map_move(struct ompi_datatype_t* dt, size_t count, vcclDataType_t* out, size_t* out_count);
/* Bytes spanned in memory by count elements of dt (from the buffer pointer, true lower bound >= 0 assumed;
 * *lb_off receives the true lower bound to add when copying). */
size_t mca_coll_vccl_span(struct ompi_datatype_t* dt, size_t count, ptrdiff_t* lb_off);

/* ---- device memory (device.c) ---- */
/* 1 when ptr is CUDA device (or managed) memory; 0 for host memory, NULL, MPI_IN_PLACE or without CUDA. */
int mca_coll_vccl_is_device(const void* ptr);
/* Copies between any two buffers (host or device); 0 on success. */
int mca_coll_vccl_memcpy(void* dst, const void* src, size_t bytes);
/* Waits for device work vccl ordered on the NULL stream (MPI collectives return with the result in place). */
int mca_coll_vccl_sync_device(void);
void mca_coll_vccl_device_fini(void);

/* ---- lazy vccl communicator (lazy.c) ---- */
/* The module's vccl communicator, created collectively over its MPI communicator on first use; NULL when
 * creation failed (then every rank falls back, as creation fails or succeeds everywhere together). */
vcclComm_t mca_coll_vccl_get_comm(mca_coll_vccl_module_t* m, const char* why);
/* Destroys the module's vccl communicator (module destructor). */
void mca_coll_vccl_release_comm(mca_coll_vccl_module_t* m);
/* Nonzero while this thread is inside vccl (its MPI bootstrap calls MPI collectives): route to previous. */
int mca_coll_vccl_in_vccl(void);
void mca_coll_vccl_enter_vccl(void);
void mca_coll_vccl_leave_vccl(void);

/* ---- intercepted collectives (colls.c) ---- */
int mca_coll_vccl_allreduce(const void* sbuf, void* rbuf, int count, struct ompi_datatype_t* dtype,
                            struct ompi_op_t* op, struct ompi_communicator_t* comm,
                            mca_coll_base_module_t* module);
int mca_coll_vccl_bcast(void* buf, int count, struct ompi_datatype_t* dtype, int root,
                        struct ompi_communicator_t* comm, mca_coll_base_module_t* module);
int mca_coll_vccl_reduce(const void* sbuf, void* rbuf, int count, struct ompi_datatype_t* dtype,
                         struct ompi_op_t* op, int root, struct ompi_communicator_t* comm,
                         mca_coll_base_module_t* module);
int mca_coll_vccl_allgather(const void* sbuf, int scount, struct ompi_datatype_t* sdtype, void* rbuf,
                            int rcount, struct ompi_datatype_t* rdtype, struct ompi_communicator_t* comm,
                            mca_coll_base_module_t* module);
int mca_coll_vccl_reduce_scatter_block(const void* sbuf, void* rbuf, int rcount, struct ompi_datatype_t* dtype,
                                       struct ompi_op_t* op, struct ompi_communicator_t* comm,
                                       mca_coll_base_module_t* module);
int mca_coll_vccl_reduce_scatter(const void* sbuf, void* rbuf, const int* rcounts,
                                 struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                 struct ompi_communicator_t* comm, mca_coll_base_module_t* module);
int mca_coll_vccl_alltoall(const void* sbuf, int scount, struct ompi_datatype_t* sdtype, void* rbuf,
                           int rcount, struct ompi_datatype_t* rdtype, struct ompi_communicator_t* comm,
                           mca_coll_base_module_t* module);
int mca_coll_vccl_barrier(struct ompi_communicator_t* comm, mca_coll_base_module_t* module);

END_C_DECLS

#endif /* COLL_VCCL_H_ */

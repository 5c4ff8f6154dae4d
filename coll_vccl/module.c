/* SPDX-License-Identifier: BSD-3-Clause */
/* module.c - comm_query, enable and destructor of the coll/vccl module. */
#include "coll_vccl.h"

static void module_construct(mca_coll_vccl_module_t* m) {
    m->comm = NULL;
    m->cid = 0;
    m->vcomm = NULL;
    m->vcomm_failed = 0;
    m->live_prev = m->live_next = NULL;
    m->live_linked = 0;
    m->n_vccl = m->n_prev = m->n_staged = 0;
    m->prev_allreduce = NULL; m->prev_allreduce_module = NULL;
    m->prev_bcast = NULL; m->prev_bcast_module = NULL;
    m->prev_reduce = NULL; m->prev_reduce_module = NULL;
    m->prev_allgather = NULL; m->prev_allgather_module = NULL;
    m->prev_reduce_scatter_block = NULL; m->prev_reduce_scatter_block_module = NULL;
    m->prev_reduce_scatter = NULL; m->prev_reduce_scatter_module = NULL;
    m->prev_alltoall = NULL; m->prev_alltoall_module = NULL;
    m->prev_barrier = NULL; m->prev_barrier_module = NULL;
}

#define RELEASE_PREV(m, name)                                                                       \
    do {                                                                                            \
        if ((m)->prev_##name##_module != NULL) OBJ_RELEASE((m)->prev_##name##_module);              \
        (m)->prev_##name##_module = NULL;                                                           \
        (m)->prev_##name = NULL;                                                                    \
    } while (0)

static void module_destruct(mca_coll_vccl_module_t* m) {
    mca_coll_vccl_release_comm(m);
    RELEASE_PREV(m, allreduce);
    RELEASE_PREV(m, bcast);
    RELEASE_PREV(m, reduce);
    RELEASE_PREV(m, allgather);
    RELEASE_PREV(m, reduce_scatter_block);
    RELEASE_PREV(m, reduce_scatter);
    RELEASE_PREV(m, alltoall);
    RELEASE_PREV(m, barrier);
}

OBJ_CLASS_INSTANCE(mca_coll_vccl_module_t, mca_coll_base_module_t, module_construct, module_destruct);

int mca_coll_vccl_init_query(bool enable_progress_threads, bool enable_mpi_threads) {
    (void)enable_progress_threads;
    (void)enable_mpi_threads;
    return OMPI_SUCCESS;
}

/* Keeps the function and module that served a collective before this one (lower priority), retained. */
#define SAVE_PREV(m, comm, name)                                                                    \
    do {                                                                                            \
        if ((comm)->c_coll->coll_##name == NULL || (comm)->c_coll->coll_##name##_module == NULL) {  \
            ok = 0;                                                                                 \
        } else {                                                                                    \
            (m)->prev_##name = (comm)->c_coll->coll_##name;                                         \
            (m)->prev_##name##_module = (comm)->c_coll->coll_##name##_module;                       \
            OBJ_RETAIN((m)->prev_##name##_module);                                                  \
        }                                                                                           \
    } while (0)

static int module_enable(mca_coll_base_module_t* module, struct ompi_communicator_t* comm) {
    mca_coll_vccl_module_t* m = (mca_coll_vccl_module_t*)module;
    int ok = 1;
    SAVE_PREV(m, comm, allreduce);
    SAVE_PREV(m, comm, bcast);
    SAVE_PREV(m, comm, reduce);
    SAVE_PREV(m, comm, allgather);
    SAVE_PREV(m, comm, reduce_scatter_block);
    SAVE_PREV(m, comm, reduce_scatter);
    SAVE_PREV(m, comm, alltoall);
    SAVE_PREV(m, comm, barrier);
    if (!ok) {
        mca_coll_vccl_log(0, "cid %u: no previous module for every collective (is coll basic excluded?): "
                          "not enabling", m->cid);
        return OMPI_ERROR; /* the destructor releases what was retained */
    }
    mca_coll_vccl_log(2, "enabled on cid %u (size %d)", m->cid, ompi_comm_size(comm));
    return OMPI_SUCCESS;
}

mca_coll_base_module_t* mca_coll_vccl_comm_query(struct ompi_communicator_t* comm, int* priority) {
    if (!mca_coll_vccl_component.enable || OMPI_COMM_IS_INTER(comm)) return NULL;
    /* A priority of 0 or less keeps the component off (coll_vccl(7)), also on the single-process communicators
     * whose priority is raised to 76 below. */
    if (mca_coll_vccl_component.priority <= 0) return NULL;
    mca_coll_vccl_module_t* m = OBJ_NEW(mca_coll_vccl_module_t);
    if (m == NULL) return NULL;
    m->comm = comm;
    m->cid = ompi_comm_get_cid(comm);
    *priority = mca_coll_vccl_component.priority;
    /* Single-process communicators are served by coll/self (priority 75), which copies buffers with memcpy
     * and crashes on device memory; rank above it so device buffers on them reach vccl too. */
    if (ompi_comm_size(comm) == 1 && *priority <= 75) *priority = 76;
    m->super.coll_module_enable = module_enable;
    m->super.coll_allreduce = mca_coll_vccl_allreduce;
    m->super.coll_bcast = mca_coll_vccl_bcast;
    m->super.coll_reduce = mca_coll_vccl_reduce;
    m->super.coll_allgather = mca_coll_vccl_allgather;
    m->super.coll_reduce_scatter_block = mca_coll_vccl_reduce_scatter_block;
    m->super.coll_reduce_scatter = mca_coll_vccl_reduce_scatter;
    m->super.coll_alltoall = mca_coll_vccl_alltoall;
    m->super.coll_barrier = mca_coll_vccl_barrier;
    return &m->super;
}

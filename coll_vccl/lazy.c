/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lazy.c - one vccl communicator per MPI communicator, created with vcclCommInitMPI on the first
 * collective that needs it (during module enable the communicator is only usable for point-to-point), and
 * destroyed when the MPI communicator is freed (module destructor) or, at the latest, when MPI_Finalize
 * deletes the attributes of MPI_COMM_SELF - MPI is still fully usable then, as vcclCommDestroy needs.
 */
#include "coll_vccl.h"

#include <pthread.h>
#include <stdio.h>

#include "vccl_mpi.h"

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static mca_coll_vccl_module_t* live_head = NULL;
static int finalize_keyval = MPI_KEYVAL_INVALID;
static int finalizing = 0;
static __thread int in_vccl_depth = 0;

int mca_coll_vccl_in_vccl(void) { return in_vccl_depth > 0; }
void mca_coll_vccl_enter_vccl(void) { ++in_vccl_depth; }
void mca_coll_vccl_leave_vccl(void) { --in_vccl_depth; }

static void unlink_locked(mca_coll_vccl_module_t* m) {
    if (!m->live_linked) return;
    if (m->live_prev != NULL) m->live_prev->live_next = m->live_next; else live_head = m->live_next;
    if (m->live_next != NULL) m->live_next->live_prev = m->live_prev;
    m->live_prev = m->live_next = NULL;
    m->live_linked = 0;
}

static void destroy_comm(mca_coll_vccl_module_t* m, const char* when) {
    vcclComm_t vc = m->vcomm;
    if (vc == NULL) return;
    m->vcomm = NULL;
    mca_coll_vccl_log(1, "destroying vccl communicator of cid %u (%s): %lu calls through vccl, %lu to the previous "
                      "module, %lu staged through host memory",
                      m->cid, when, m->n_vccl, m->n_prev, m->n_staged);
    mca_coll_vccl_enter_vccl();
    vcclResult_t rc = vcclCommDestroy(vc);
    mca_coll_vccl_leave_vccl();
    if (rc != vcclSuccess) mca_coll_vccl_log(0, "vcclCommDestroy failed: %s", vcclGetErrorString(rc));
}

/* MPI_Finalize: delete callback of the attribute on MPI_COMM_SELF destroys every vccl communicator left. */
static int finalize_cb(MPI_Comm comm, int keyval, void* value, void* extra) {
    (void)comm; (void)keyval; (void)value; (void)extra;
    /* vcclCommDestroy frees vccl's duplicate of the MPI communicator, which runs a module destructor of
     * ours: the lock is never held across it. */
    for (;;) {
        pthread_mutex_lock(&live_lock);
        finalizing = 1;
        mca_coll_vccl_module_t* m = live_head;
        if (m != NULL) {
            unlink_locked(m);
            m->vcomm_failed = 1; /* nothing recreates it */
        }
        pthread_mutex_unlock(&live_lock);
        if (m == NULL) break;
        destroy_comm(m, "MPI_Finalize");
    }
    return MPI_SUCCESS;
}

static int register_finalize_hook(void) {
    if (finalize_keyval != MPI_KEYVAL_INVALID) return 0;
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, finalize_cb, &finalize_keyval, NULL) != MPI_SUCCESS)
        return -1;
    if (PMPI_Comm_set_attr(MPI_COMM_SELF, finalize_keyval, NULL) != MPI_SUCCESS) return -1;
    return 0;
}

vcclComm_t mca_coll_vccl_get_comm(mca_coll_vccl_module_t* m, const char* why) {
    if (m->vcomm != NULL || m->vcomm_failed) return m->vcomm;
    pthread_mutex_lock(&live_lock);
    int rc_hook = finalizing ? -1 : register_finalize_hook();
    pthread_mutex_unlock(&live_lock);
    if (rc_hook != 0) {
        m->vcomm_failed = 1;
        return NULL;
    }
    vcclConfig_t cfg = VCCL_CONFIG_INITIALIZER;
    char name[64];
    snprintf(name, sizeof(name), "ompi-cid%u", m->cid);
    cfg.commName = name;
    vcclComm_t vc = NULL;
    mca_coll_vccl_enter_vccl();
    vcclResult_t rc = vcclCommInitMPI(&vc, m->comm, &cfg);
    mca_coll_vccl_leave_vccl();
    if (rc != vcclSuccess) {
        m->vcomm_failed = 1;
        mca_coll_vccl_log(0, "vcclCommInitMPI on cid %u failed (%s: %s): using the previous module",
                          m->cid, vcclGetErrorString(rc), vcclGetLastError(NULL));
        return NULL;
    }
    pthread_mutex_lock(&live_lock);
    m->vcomm = vc;
    m->live_prev = NULL;
    m->live_next = live_head;
    if (live_head != NULL) live_head->live_prev = m;
    live_head = m;
    m->live_linked = 1;
    pthread_mutex_unlock(&live_lock);
    mca_coll_vccl_log(1, "created vccl communicator for cid %u (rank %d of %d) on first use by %s",
                      m->cid, ompi_comm_rank(m->comm), ompi_comm_size(m->comm), why);
    return vc;
}

void mca_coll_vccl_release_comm(mca_coll_vccl_module_t* m) {
    pthread_mutex_lock(&live_lock);
    unlink_locked(m);
    pthread_mutex_unlock(&live_lock);
    destroy_comm(m, "communicator freed");
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * comm.c - one vccl communicator per MPI communicator, cached as an attribute and created on the first call
 * that needs it, collectively over that communicator and with nothing but vccl's public API: rank 0 makes a
 * unique id, PMPI_Bcast hands it to the others, every process calls vcclCommInitRankConfig. vccl then never
 * calls MPI, so nothing re-enters the interposer. Creation succeeds or fails on all processes together (an
 * all-reduce of the outcome), so that every process takes the same route afterwards.
 *
 * Teardown: the attribute's delete callback (MPI_Comm_free, MPI_Comm_disconnect) destroys the vccl
 * communicator; MPI_Finalize deletes the attributes of MPI_COMM_SELF first, while MPI is still usable, and
 * that callback destroys every vccl communicator still alive (those of communicators never freed included).
 *
 * Errors: a failed vccl call raises an MPI error on the communicator's error handler; its class is MPI's
 * nearest, its code carries vccl's message (MPI_Error_string), and vccl's own detail is logged the first
 * time each MPI function fails.
 */
#include "pmpi.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t keyval_once = PTHREAD_ONCE_INIT;
static int comm_keyval = MPI_KEYVAL_INVALID;
static int self_keyval = MPI_KEYVAL_INVALID;
static int self_hook_set = 0;

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static pm_comm_t* live_head = NULL;
static unsigned next_serial = 0;
static int finalizing = 0;

static void unlink_locked(pm_comm_t* pc) {
    if (!pc->linked) return;
    if (pc->prev != NULL) pc->prev->next = pc->next;
    else live_head = pc->next;
    if (pc->next != NULL) pc->next->prev = pc->prev;
    pc->prev = pc->next = NULL;
    pc->linked = 0;
}

static void destroy_vccl(pm_comm_t* pc, const char* when) {
    vcclComm_t vc = pc->vcomm;
    pc->state = PM_COMM_UNUSABLE; /* nothing recreates it */
    if (vc == NULL) return;
    pc->vcomm = NULL;
    pm_log(1, "destroying vccl communicator %u (%s): %llu calls through vccl, %llu to MPI, %llu staged through "
           "host memory", pc->id, when, pc->n[PM_ROUTE_VCCL], pc->n[PM_ROUTE_PMPI], pc->n[PM_ROUTE_STAGED]);
    vcclResult_t rc = vcclCommDestroy(vc);
    if (rc != vcclSuccess) pm_log(0, "vcclCommDestroy failed: %s", vcclGetErrorString(rc));
}

static int comm_delete_cb(MPI_Comm comm, int keyval, void* attr, void* extra) {
    (void)comm;
    (void)keyval;
    (void)extra;
    pm_comm_t* pc = attr;
    pthread_mutex_lock(&live_lock);
    unlink_locked(pc);
    pthread_mutex_unlock(&live_lock);
    destroy_vccl(pc, "communicator freed");
    free(pc);
    return MPI_SUCCESS;
}

/* MPI_Finalize: every vccl communicator left. Their records stay allocated, as their MPI communicators may
 * still delete the attribute later (MPI_COMM_WORLD's) and free them then. */
static int self_delete_cb(MPI_Comm comm, int keyval, void* attr, void* extra) {
    (void)comm;
    (void)keyval;
    (void)attr;
    (void)extra;
    for (;;) {
        pthread_mutex_lock(&live_lock);
        finalizing = 1;
        pm_comm_t* pc = live_head;
        if (pc != NULL) unlink_locked(pc);
        pthread_mutex_unlock(&live_lock);
        if (pc == NULL) break;
        destroy_vccl(pc, "MPI_Finalize");
    }
    return MPI_SUCCESS;
}

static void create_keyvals(void) {
    /* MPI_COMM_NULL_COPY_FN: a duplicate gets its own vccl communicator on its own first use */
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete_cb, &comm_keyval, NULL) != MPI_SUCCESS)
        comm_keyval = MPI_KEYVAL_INVALID;
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete_cb, &self_keyval, NULL) != MPI_SUCCESS)
        self_keyval = MPI_KEYVAL_INVALID;
}

int pm_comm_rank_size(MPI_Comm comm, int* rank, int* size) {
    if (comm == MPI_COMM_NULL) return -1;
    if (PMPI_Comm_rank(comm, rank) != MPI_SUCCESS || PMPI_Comm_size(comm, size) != MPI_SUCCESS) return -1;
    return 0;
}

static int create_vccl(pm_comm_t* pc, MPI_Comm comm, const char* call) {
    struct {
        int ok;
        unsigned serial;
        vcclUniqueId id;
    } msg;
    memset(&msg, 0, sizeof msg);
    if (pc->rank == 0) {
        pthread_mutex_lock(&live_lock);
        msg.serial = next_serial++;
        pthread_mutex_unlock(&live_lock);
        vcclResult_t rc = vcclGetUniqueId(&msg.id);
        msg.ok = rc == vcclSuccess;
        if (!msg.ok) pm_log(0, "%s: vcclGetUniqueId failed (%s: %s)", call, vcclGetErrorString(rc), vcclGetLastError(NULL));
    }
    /* The finalize hook, once per process, before its first vccl communicator exists: without it a vccl
     * communicator could outlive MPI_Finalize, so none is made. */
    pthread_mutex_lock(&live_lock);
    if (!self_hook_set && self_keyval != MPI_KEYVAL_INVALID && !finalizing)
        self_hook_set = PMPI_Comm_set_attr(MPI_COMM_SELF, self_keyval, NULL) == MPI_SUCCESS;
    int hook_ok = self_hook_set;
    pthread_mutex_unlock(&live_lock);

    if (PMPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, comm) != MPI_SUCCESS) return -1;
    pc->id = msg.serial;
    vcclComm_t vc = NULL;
    int ok = msg.ok && hook_ok;
    if (ok) {
        vcclConfig_t cfg = VCCL_CONFIG_INITIALIZER;
        char name[48];
        snprintf(name, sizeof name, "mpi-comm-%u", msg.serial);
        cfg.commName = name;
        vcclResult_t rc = vcclCommInitRankConfig(&vc, pc->size, msg.id, pc->rank, &cfg);
        ok = rc == vcclSuccess;
        if (!ok) {
            vc = NULL;
            pm_log(0, "%s: vcclCommInitRankConfig failed on communicator %u (%s: %s)", call, msg.serial,
                   vcclGetErrorString(rc), vcclGetLastError(NULL));
        }
    }
    int all = 0;
    if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) all = 0;
    if (!all) {
        if (vc != NULL) vcclCommDestroy(vc);
        if (pc->rank == 0)
            pm_log(0, "%s: no vccl communicator for communicator %u (creation failed on some process): its calls "
                   "go to MPI, device buffers through host copies", call, msg.serial);
        return -1;
    }
    pthread_mutex_lock(&live_lock);
    pc->vcomm = vc;
    pc->prev = NULL;
    pc->next = live_head;
    if (live_head != NULL) live_head->prev = pc;
    live_head = pc;
    pc->linked = 1;
    pthread_mutex_unlock(&live_lock);
    pm_log(1, "created vccl communicator %u (rank %d of %d) on first use by %s", pc->id, pc->rank, pc->size, call);
    return 0;
}

pm_comm_t* pm_comm_get(MPI_Comm comm, const char* call) {
    if (comm == MPI_COMM_NULL) return NULL;
    pthread_once(&keyval_once, create_keyvals);
    if (comm_keyval == MPI_KEYVAL_INVALID) return NULL;
    void* v = NULL;
    int flag = 0;
    if (PMPI_Comm_get_attr(comm, comm_keyval, &v, &flag) != MPI_SUCCESS) return NULL;
    pm_comm_t* pc = flag ? (pm_comm_t*)v : NULL;
    if (pc == NULL) {
        pc = calloc(1, sizeof *pc);
        if (pc == NULL) return NULL;
        int inter = 0;
        if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter ||
            pm_comm_rank_size(comm, &pc->rank, &pc->size) != 0)
            pc->state = PM_COMM_UNUSABLE; /* vccl has no inter-communicators */
        if (PMPI_Comm_set_attr(comm, comm_keyval, pc) != MPI_SUCCESS) {
            free(pc);
            return NULL;
        }
    }
    if (pc->state == PM_COMM_NEW) {
        pthread_mutex_lock(&live_lock);
        int fin = finalizing;
        pthread_mutex_unlock(&live_lock);
        pc->state = !fin && create_vccl(pc, comm, call) == 0 ? PM_COMM_READY : PM_COMM_UNUSABLE;
    }
    return pc->state == PM_COMM_READY ? pc : NULL;
}

void pm_comm_count(pm_comm_t* pc, enum pm_route r) {
    pm_count(r);
    if (pc != NULL) pc->n[r]++;
}

/* ---- errors ---- */

static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;
static const char* logged_calls[64];
static int n_logged = 0;
static int vccl_codes[vcclNumResults];
static int vccl_codes_made[vcclNumResults];

/* 1 the first time call reports an error (call names are string literals: compared by address). */
static int first_error_of(const char* call) {
    int first = 1;
    pthread_mutex_lock(&err_lock);
    for (int i = 0; i < n_logged && first; ++i) first = logged_calls[i] != call;
    if (first && n_logged < (int)(sizeof logged_calls / sizeof logged_calls[0])) logged_calls[n_logged++] = call;
    pthread_mutex_unlock(&err_lock);
    return first;
}

static int mpi_class_of(vcclResult_t rc) {
    switch (rc) {
    case vcclInvalidArgument: return MPI_ERR_ARG;
    case vcclUnhandledCudaError:
    case vcclSystemError:
    case vcclInternalError: return MPI_ERR_INTERN;
    default: return MPI_ERR_OTHER; /* invalid usage, remote error, timeout */
    }
}

/* An MPI error code of the right class whose string is vccl's (MPI_Error_string shows it). */
static int mpi_code_of(vcclResult_t rc) {
    int cls = mpi_class_of(rc);
    if ((unsigned)rc >= vcclNumResults) return cls;
    pthread_mutex_lock(&err_lock);
    if (!vccl_codes_made[rc]) {
        int code = cls;
        char text[128];
        snprintf(text, sizeof text, "vccl: %s", vcclGetErrorString(rc));
        if (PMPI_Add_error_code(cls, &code) != MPI_SUCCESS || PMPI_Add_error_string(code, text) != MPI_SUCCESS)
            code = cls;
        /* MPICH 4.0 hands out codes of predefined classes that its own MPI_Error_string reads as another
         * message: such a code would show a wrong text, the bare class at least a right one */
        char back[MPI_MAX_ERROR_STRING];
        int len = 0;
        if (code != cls && (PMPI_Error_string(code, back, &len) != MPI_SUCCESS || strcmp(back, text) != 0)) code = cls;
        vccl_codes[rc] = code;
        vccl_codes_made[rc] = 1;
    }
    int code = vccl_codes[rc];
    pthread_mutex_unlock(&err_lock);
    return code;
}

static int raise_code(MPI_Comm comm, int code) {
    /* MPI_ERRORS_ARE_FATAL aborts here, as the library's own errors do; MPI_ERRORS_RETURN comes back */
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

int pm_vccl_result(MPI_Comm comm, const char* call, vcclResult_t rc, pm_comm_t* pc) {
    if (rc == vcclSuccess) return MPI_SUCCESS;
    if (first_error_of(call)) {
        const char* detail = vcclGetLastError(pc != NULL ? pc->vcomm : NULL);
        pm_log(0, "%s on communicator %u: vccl failed: %s%s%s%s", call, pc != NULL ? pc->id : 0u,
               vcclGetErrorString(rc), *detail ? " (" : "", detail, *detail ? ")" : "");
    }
    return raise_code(comm, mpi_code_of(rc));
}

int pm_raise(MPI_Comm comm, const char* call, int mpi_class, const char* what) {
    if (first_error_of(call)) pm_log(0, "%s: %s", call, what);
    return raise_code(comm, mpi_class);
}

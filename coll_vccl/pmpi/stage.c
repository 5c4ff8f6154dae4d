/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stage.c - host copies of device buffers, for the calls vccl does not take: the MPI library gets a host
 * pointer whose bytes are those of the device buffer over the whole span the datatype touches (holes
 * included, so a derived datatype's untouched bytes come back unchanged).
 */
#include "pmpi.h"

#include <stdlib.h>

void* pm_stage_in(pm_stage_t* s, void* user, MPI_Datatype dt, size_t count, int copy_in) {
    s->user = NULL;
    s->tmp = NULL;
    s->span = 0;
    s->lb = 0;
    if (!pm_is_dev(pm_kind(user))) return user;
    size_t span = 0;
    ptrdiff_t lb = 0;
    /* A datatype the library will reject (MPI_DATATYPE_NULL, freed) has no span: a one-byte host buffer
     * lets the library report its own error. */
    if (pm_span(dt, count, &span, &lb) != 0) span = 0, lb = 0;
    char* tmp = malloc(span > 0 ? span : 1);
    if (tmp == NULL) return NULL;
    if (copy_in && span > 0 && pm_copy(tmp, (char*)user + lb, span) != 0) {
        free(tmp);
        return NULL;
    }
    s->user = user;
    s->tmp = tmp;
    s->span = span;
    s->lb = lb;
    return tmp - lb;
}

int pm_stage_out(pm_stage_t* s, int copy_back) {
    if (s->tmp == NULL) return 0;
    int rc = 0;
    if (copy_back && s->span > 0) rc = pm_copy((char*)s->user + s->lb, s->tmp, s->span);
    free(s->tmp);
    s->tmp = NULL;
    s->user = NULL;
    return rc;
}

void pm_stage_free(pm_stage_t* s) { (void)pm_stage_out(s, 0); }

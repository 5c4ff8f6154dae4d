/* SPDX-License-Identifier: BSD-3-Clause */
/* component.c - the coll/vccl component: registration with Open MPI and its MCA parameters. */
#include "coll_vccl.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "opal/mca/base/mca_base_var.h"

static int vccl_register(void);
static int vccl_close(void);

mca_coll_vccl_component_t mca_coll_vccl_component = {
    .super = {
        .collm_version = {
            MCA_COLL_BASE_VERSION_2_0_0,
            .mca_component_name = "vccl",
            MCA_BASE_MAKE_VERSION(component, VCCL_MAJOR, VCCL_MINOR, VCCL_PATCH),
            .mca_close_component = vccl_close,
            .mca_register_component_params = vccl_register,
        },
        .collm_data = {
            /* the component is not checkpoint ready */
            MCA_BASE_METADATA_PARAM_NONE
        },
        .collm_init_query = mca_coll_vccl_init_query,
        .collm_comm_query = mca_coll_vccl_comm_query,
    },
    .priority = 40,
    .enable = 1,
    .verbose = 0,
    .min_bytes = 0,
    .host = 0,
};

static void reg_int(const char* name, const char* help, int* storage) {
    (void)mca_base_component_var_register(&mca_coll_vccl_component.super.collm_version, name, help,
                                          MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_9,
                                          MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static int vccl_register(void) {
    reg_int("priority",
            "Priority of the vccl coll component (above tuned's 30 so that it sees collectives first)",
            &mca_coll_vccl_component.priority);
    reg_int("enable", "Use the vccl coll component (1) or not (0)", &mca_coll_vccl_component.enable);
    reg_int("verbose",
            "Verbosity on stderr: 1 shows vccl communicator creation and a per-communicator summary, 2 every "
            "routing decision",
            &mca_coll_vccl_component.verbose);
    reg_int("min_bytes",
            "Messages smaller than this many bytes bypass vccl: host buffers go to the previous module, device "
            "buffers are staged through host memory around it",
            &mca_coll_vccl_component.min_bytes);
    reg_int("host",
            "Route collectives on host buffers through vccl too (1), not only those on device buffers (0)",
            &mca_coll_vccl_component.host);
    return OMPI_SUCCESS;
}

static int vccl_close(void) {
    mca_coll_vccl_device_fini();
    return OMPI_SUCCESS;
}

void mca_coll_vccl_log(int level, const char* fmt, ...) {
    if (mca_coll_vccl_component.verbose < level) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "coll:vccl: [pid %d] %s\n", (int)getpid(), line);
    fflush(stderr);
}

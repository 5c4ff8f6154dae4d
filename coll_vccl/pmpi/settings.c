/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * settings.c - the interposer's environment variables (declared in vccl's registry, src/core/env_defs.h, so
 * that vccl-info -c and vccl(7) list them; read here with getenv because the registry's reader is internal to
 * libvccl), its log lines and its call counters.
 */
#include "pmpi.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pm_settings_t settings;
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

static int parse_bool(const char* name, int dflt) {
    const char* v = getenv(name);
    if (v == NULL || *v == '\0') return dflt;
    if (!strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcasecmp(v, "on")) return 1;
    if (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcasecmp(v, "off")) return 0;
    fprintf(stderr, "vccl-pmpi: %s=%s is not a boolean; using %d\n", name, v, dflt);
    return dflt;
}

static int parse_int(const char* name, int dflt, int lo, int hi) {
    const char* v = getenv(name);
    if (v == NULL || *v == '\0') return dflt;
    char* end = NULL;
    long x = strtol(v, &end, 10);
    if (end == v || *end != '\0' || x < lo || x > hi) {
        fprintf(stderr, "vccl-pmpi: %s=%s is not an integer in %d..%d; using %d\n", name, v, lo, hi, dflt);
        return dflt;
    }
    return (int)x;
}

static void load_settings(void) {
    settings.enabled = parse_bool("VCCL_PMPI", 1);
    settings.host = parse_int("VCCL_PMPI_HOST", PM_HOST_PMPI, PM_HOST_PMPI, PM_HOST_AS_DEVICE);
    settings.verbose = parse_int("VCCL_PMPI_VERBOSE", 0, 0, 2);
}

const pm_settings_t* pm_settings(void) {
    pthread_once(&settings_once, load_settings);
    return &settings;
}

void pm_log(int level, const char* fmt, ...) {
    if (pm_settings()->verbose < level) return;
    int init = 0, fin = 0, rank = -1;
    /* The world rank names the process; MPI may not be usable (a message from a callback at finalize). */
    if (PMPI_Initialized(&init) == MPI_SUCCESS && init && PMPI_Finalized(&fin) == MPI_SUCCESS && !fin)
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char line[1024];
    int n = rank >= 0 ? snprintf(line, sizeof line, "vccl-pmpi[rank %d]: ", rank)
                      : snprintf(line, sizeof line, "vccl-pmpi: ");
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    /* one write per line, so that lines of several ranks sharing a terminal do not interleave */
    fprintf(stderr, "%s\n", line);
}

/* The test library's test points (src/core/test_point.h): defined only in test programs, NULL elsewhere. */
extern long long vccl_test_point(const void* key, int point, long long arg) __attribute__((weak));
#define PM_TEST_POINT_ROUTE 40 /* TestPoint::PmpiRoute */

void pm_count(enum pm_route r) {
    if (vccl_test_point != NULL) vccl_test_point(NULL, PM_TEST_POINT_ROUTE, (long long)r);
}


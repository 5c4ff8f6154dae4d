/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-telemetry clean: removes the rings that processes left behind when they died without destroying their
 * communicators (SIGKILL, a crash, an abort before vcclCommDestroy). A ring is removed only when its writer
 * process is gone and it was written on this host: a process in another container sharing /dev/shm has a pid
 * of another namespace, which says nothing here. */
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/telemetry/tool.h"

namespace vtel {

int cmd_clean(int argc, char** argv) {
    std::string dir = "/dev/shm";
    bool dry_run = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--dir" && i + 1 < argc) {
            dir = argv[++i];
        } else if (a == "-n" || a == "--dry-run") {
            dry_run = true;
        } else if (a == "-h" || a == "--help") {
            printf("usage: vccl-telemetry clean [--dry-run] [--dir DIR]\n");
            return 0;
        } else {
            fprintf(stderr, "vccl-telemetry clean: unknown option '%s'\n", a.c_str());
            return 2;
        }
    }
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    int removed = 0, kept_live = 0, kept_elsewhere = 0, errors = 0;
    for (const RingView& v : scan_rings(dir)) {
        if (v.alive) {
            kept_live++;
            continue;
        }
        if (v.host != host) {
            kept_elsewhere++;
            continue;
        }
        std::string path = dir + "/" + v.file;
        if (!dry_run && unlink(path.c_str()) != 0) {
            fprintf(stderr, "vccl-telemetry clean: cannot remove %s: %s\n", path.c_str(), strerror(errno));
            errors++;
            continue;
        }
        printf("%s %s (job %s, %s, rank %d of %d, pid %d gone)\n", dry_run ? "would remove" : "removed",
               path.c_str(), v.job.c_str(), v.comm_name.c_str(), v.rank, v.nranks, v.pid);
        removed++;
    }
    printf("%d ring(s) %s; kept %d of live processes", removed, dry_run ? "to remove" : "removed", kept_live);
    if (kept_elsewhere > 0) printf(", %d written on another host (their pids mean nothing here)", kept_elsewhere);
    printf("\n");
    return errors > 0 ? 1 : 0;
}

} // namespace vtel

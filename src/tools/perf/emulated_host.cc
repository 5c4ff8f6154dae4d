/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --emulated-hosts PREFIX:H0,H1,...: a testing aid for runs across emulated hosts on one machine
 * (tests/hosts/hosts-common.sh builds them). mpirun cannot start ranks in separate network namespaces, so rank r
 * enters namespace PREFIX<H_r> itself, before vccl opens any socket, with a fresh sysfs in a mount namespace of its
 * own (UCX and hwloc list network devices from /sys/class/net, which shows the namespace that mounted it), and a
 * UTS namespace whose host name is PREFIX<H_r>: vccl groups ranks into hosts by host name. MPI keeps working over
 * shared memory. The namespaces belong to this thread and the threads it starts later (vccl's and UCX's).
 */
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/perf/perf.h"

namespace vperf {

bool enter_emulated_host(const std::string& spec, int rank, int nranks, std::string* error) {
    size_t colon = spec.find(':');
    std::string prefix = spec.substr(0, colon), list = spec.substr(colon + 1);
    std::vector<std::string> hosts;
    for (size_t pos = 0; pos <= list.size();) {
        size_t comma = list.find(',', pos);
        if (comma == std::string::npos) comma = list.size();
        hosts.push_back(list.substr(pos, comma - pos));
        pos = comma + 1;
    }
    if (int(hosts.size()) != nranks) {
        *error = "the list names " + std::to_string(hosts.size()) + " hosts for " + std::to_string(nranks) + " ranks";
        return false;
    }
    const std::string name = prefix + hosts[size_t(rank)];
    const std::string path = "/var/run/netns/" + name;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *error = "cannot open " + path + ": " + strerror(errno);
        return false;
    }
    int rc = setns(fd, CLONE_NEWNET);
    int saved = errno;
    close(fd);
    if (rc != 0) {
        *error = "setns(" + path + "): " + strerror(saved);
        return false;
    }
    // Slave first, so that replacing /sys here never propagates back to the machine's mount namespace.
    if (unshare(CLONE_NEWNS | CLONE_NEWUTS) != 0 || mount(nullptr, "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0) {
        *error = std::string("private mount and UTS namespaces: ") + strerror(errno);
        return false;
    }
    umount2("/sys", MNT_DETACH); // may not be a mount point of its own; mounting over it works then too
    if (mount(name.c_str(), "/sys", "sysfs", 0, nullptr) != 0 || sethostname(name.c_str(), name.size()) != 0) {
        *error = std::string("sysfs and host name of ") + name + ": " + strerror(errno);
        return false;
    }
    return true;
}

} // namespace vperf

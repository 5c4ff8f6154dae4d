/* SPDX-License-Identifier: BSD-3-Clause */
#include "tools/common/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace vtools {

bool enter_named_netns(const std::string& name, bool own_host_name, std::string* error) {
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
    const int flags = CLONE_NEWNS | (own_host_name ? CLONE_NEWUTS : 0);
    if (unshare(flags) != 0 || mount(nullptr, "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0) {
        *error = std::string(own_host_name ? "private mount and UTS namespaces: " : "private mount namespace: ") +
                 strerror(errno);
        return false;
    }
    umount2("/sys", MNT_DETACH); // may not be a mount point of its own; mounting over it works then too
    if (mount(name.c_str(), "/sys", "sysfs", 0, nullptr) != 0) {
        *error = "sysfs of " + name + ": " + strerror(errno);
        return false;
    }
    if (own_host_name && sethostname(name.c_str(), name.size()) != 0) {
        *error = "host name " + name + ": " + strerror(errno);
        return false;
    }
    return true;
}

} // namespace vtools

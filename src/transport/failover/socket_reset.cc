/* SPDX-License-Identifier: BSD-3-Clause */
#include "transport/failover/socket_reset.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

namespace vccl {
namespace failover {

int shutdown_tcp_receiving(uint32_t local_ip, uint32_t peer_ip, uint16_t spare_peer_port) {
    if (local_ip == 0 || peer_ip == 0) return 0;
    DIR* dir = opendir("/proc/self/fd");
    if (dir == nullptr) return 0;
    int count = 0;
    int own = dirfd(dir);
    for (struct dirent* e = readdir(dir); e != nullptr; e = readdir(dir)) {
        char* end = nullptr;
        long fd = strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == own) continue;
        int type = 0;
        socklen_t len = sizeof(type);
        if (getsockopt(int(fd), SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
        struct sockaddr_in mine, theirs;
        socklen_t mine_len = sizeof(mine), theirs_len = sizeof(theirs);
        memset(&mine, 0, sizeof(mine));
        memset(&theirs, 0, sizeof(theirs));
        if (getsockname(int(fd), reinterpret_cast<struct sockaddr*>(&mine), &mine_len) != 0 ||
            mine.sin_family != AF_INET || mine.sin_addr.s_addr != local_ip) {
            continue;
        }
        if (getpeername(int(fd), reinterpret_cast<struct sockaddr*>(&theirs), &theirs_len) != 0 ||
            theirs.sin_family != AF_INET || theirs.sin_addr.s_addr != peer_ip) {
            continue; // listening or unconnected
        }
        if (spare_peer_port != 0 && theirs.sin_port == spare_peer_port) continue;
        if (shutdown(int(fd), SHUT_RD) == 0) ++count;
    }
    closedir(dir);
    return count;
}

} // namespace failover
} // namespace vccl

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The root service behind vcclGetUniqueId: a background thread that collects every rank's listen address
 * and sends each rank the complete table. It serves one bootstrap, then exits; it gives up when no new
 * rank registers for VCCL_BOOTSTRAP_TIMEOUT seconds (telling the ranks that registered), and it is stopped
 * and joined by an atexit handler so a process that exits while it runs does not crash.
 */
#ifndef VCCL_BOOTSTRAP_TCP_TCP_ROOT_H_
#define VCCL_BOOTSTRAP_TCP_TCP_ROOT_H_

#include <cstdint>

#include "bootstrap/tcp/socket_util.h"
#include "bootstrap/tcp/wire.h"
#include "vccl.h"

namespace vccl {

/* Listens on `addr` (port 0: any free port) and starts the service thread; *listening receives the address
 * ranks must connect to. */
vcclResult_t tcp_root_start(const sock::SockAddr& addr, const uint8_t (&secret)[wire::kSecretBytes],
                            sock::SockAddr* listening);

/* Number of root service threads that have not finished (tests, diagnostics). */
int tcp_root_running();

} // namespace vccl

#endif

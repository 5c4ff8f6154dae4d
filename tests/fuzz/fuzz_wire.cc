/* SPDX-License-Identifier: BSD-3-Clause */
// libFuzzer target: the TCP bootstrap's wire format (src/bootstrap/tcp/wire.h, protocol.h). The root and the
// ranks read fixed-size records from the network with wire::Reader: a hello (52 bytes), a reply (16), a peer
// preamble (32), a message header (16) and the address table (20 bytes per rank). This target reads the input
// as each of them the way tcp_root.cc and tcp_bootstrap.cc do, and checks that every address Reader::addr
// accepts encodes back to the same 20 bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bootstrap/tcp/protocol.h"
#include "bootstrap/tcp/wire.h"

using namespace vccl;

namespace {
void addr_roundtrip(const uint8_t* p) {
    wire::Reader r(p);
    sock::SockAddr a;
    if (!r.addr(&a)) return;
    if (r.offset() != wire::kAddrBytes) abort();
    (void)a.to_string();
    (void)a.port();
    uint8_t back[wire::kAddrBytes];
    wire::Writer w(back);
    w.addr(a);
    if (w.size() != wire::kAddrBytes || memcmp(back, p, wire::kAddrBytes) != 0) abort();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // Fixed-size records: the callers always read into buffers of exactly this size.
    uint8_t rec[tcpproto::kHelloBytes] = {0};
    memcpy(rec, data, size < sizeof(rec) ? size : sizeof(rec));
    {
        wire::Reader r(rec); // hello, as RootService::handle_hello
        (void)r.u32();
        (void)r.u32();
        uint8_t secret[wire::kSecretBytes];
        r.bytes(secret, sizeof(secret));
        (void)wire::secrets_equal(secret, rec);
        (void)r.u32();
        (void)r.u32();
        sock::SockAddr a;
        (void)r.addr(&a);
        if (r.offset() != tcpproto::kHelloBytes) abort();
        addr_roundtrip(rec + 32);
    }
    {
        wire::Reader r(rec); // reply head, as register_with_root
        (void)r.u32();
        (void)tcpproto::root_status_text(r.u32());
        (void)r.u32();
        (void)r.u32();
        if (r.offset() != tcpproto::kReplyBytes) abort();
    }
    {
        wire::Reader r(rec); // preamble, as TcpBootstrap::check_preamble
        (void)r.u32();
        (void)r.u32();
        uint8_t secret[wire::kSecretBytes];
        r.bytes(secret, sizeof(secret));
        (void)r.u32();
        (void)r.u32();
        if (r.offset() != tcpproto::kPreambleBytes) abort();
    }
    {
        wire::Reader r(rec); // message header, as TcpBootstrap::advance
        (void)r.u64();
        (void)r.u64();
        if (r.offset() != tcpproto::kMsgHeaderBytes) abort();
    }
    // Address table: as many whole addresses as the input holds.
    size_t n = size / wire::kAddrBytes;
    if (n > 0) {
        std::vector<uint8_t> table(data, data + n * wire::kAddrBytes);
        for (size_t i = 0; i < n; ++i) addr_roundtrip(table.data() + i * wire::kAddrBytes);
    }
    return 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Byte-exact encoding of the TCP bootstrap's messages and of the unique id: little-endian integers and a
 * fixed 20-byte address, so ranks built by different compilers (or on hosts of different endianness)
 * read each other's bytes the same way.
 */
#ifndef VCCL_BOOTSTRAP_TCP_WIRE_H_
#define VCCL_BOOTSTRAP_TCP_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "bootstrap/tcp/socket_util.h"

namespace vccl {
namespace wire {

/* Address: family (4 or 6), a zero byte, port (big-endian, as on the network), 16 address bytes. */
constexpr size_t kAddrBytes = 20;
constexpr size_t kSecretBytes = 16;

class Writer {
public:
    explicit Writer(uint8_t* p) : p_(p) {}
    void u8(uint8_t v) { p_[off_++] = v; }
    void u32(uint32_t v) { le(v, 4); }
    void u64(uint64_t v) { le(v, 8); }
    void bytes(const void* src, size_t n) {
        memcpy(p_ + off_, src, n);
        off_ += n;
    }
    void addr(const sock::SockAddr& a);
    size_t size() const { return off_; }

private:
    void le(uint64_t v, int n) {
        for (int i = 0; i < n; ++i) p_[off_++] = uint8_t(v >> (8 * i));
    }
    uint8_t* p_;
    size_t off_ = 0;
};

class Reader {
public:
    explicit Reader(const uint8_t* p) : p_(p) {}
    uint8_t u8() { return p_[off_++]; }
    uint32_t u32() { return uint32_t(le(4)); }
    uint64_t u64() { return le(8); }
    void bytes(void* dst, size_t n) {
        memcpy(dst, p_ + off_, n);
        off_ += n;
    }
    /* False when the bytes do not describe an IPv4/IPv6 address with a nonzero port. */
    bool addr(sock::SockAddr* out);
    size_t offset() const { return off_; }

private:
    uint64_t le(int n) {
        uint64_t v = 0;
        for (int i = 0; i < n; ++i) v |= uint64_t(p_[off_++]) << (8 * i);
        return v;
    }
    const uint8_t* p_;
    size_t off_ = 0;
};

inline void Writer::addr(const sock::SockAddr& a) {
    uint8_t raw[16] = {0};
    uint16_t port_be = 0;
    if (a.family() == AF_INET) {
        const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a.storage);
        memcpy(raw, &v4->sin_addr, 4);
        port_be = v4->sin_port;
    } else if (a.family() == AF_INET6) {
        const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
        memcpy(raw, &v6->sin6_addr, 16);
        port_be = v6->sin6_port;
    }
    u8(a.family() == AF_INET ? 4 : a.family() == AF_INET6 ? 6 : 0);
    u8(0);
    bytes(&port_be, 2);
    bytes(raw, 16);
}

inline bool Reader::addr(sock::SockAddr* out) {
    const uint8_t family = u8();
    const uint8_t zero = u8();
    uint16_t port_be = 0;
    uint8_t raw[16];
    bytes(&port_be, 2);
    bytes(raw, 16);
    if (zero != 0 || port_be == 0) return false;
    sock::SockAddr a;
    if (family == 4) {
        for (int i = 4; i < 16; ++i) {
            if (raw[i] != 0) return false;
        }
        auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
        v4->sin_family = AF_INET;
        v4->sin_port = port_be;
        memcpy(&v4->sin_addr, raw, 4);
        a.len = sizeof(sockaddr_in);
    } else if (family == 6) {
        auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
        v6->sin6_family = AF_INET6;
        v6->sin6_port = port_be;
        memcpy(&v6->sin6_addr, raw, 16);
        a.len = sizeof(sockaddr_in6);
    } else {
        return false;
    }
    *out = a;
    return true;
}

/* Compares secrets in time independent of where they differ, so a client cannot guess one byte by byte. */
inline bool secrets_equal(const uint8_t* a, const uint8_t* b) {
    uint8_t diff = 0;
    for (size_t i = 0; i < kSecretBytes; ++i) diff |= uint8_t(a[i] ^ b[i]);
    return diff == 0;
}

} // namespace wire
} // namespace vccl

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
#include "bootstrap/tcp/unique_id.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/status.h"

namespace vccl {
namespace uid {

namespace {

uint64_t fnv1a64(const uint8_t* p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

} // namespace

void encode(const Info& info, vcclUniqueId* out) {
    uint8_t buf[VCCL_UNIQUE_ID_BYTES] = {0};
    wire::Writer w(buf);
    w.u32(kMagic);
    w.u8(uint8_t(kVersion));
    w.u8(uint8_t(kVersion >> 8));
    w.u8(0);
    w.u8(0);
    w.addr(info.root);
    w.bytes(info.secret, wire::kSecretBytes);
    w.u64(fnv1a64(buf, kChecksumOffset));
    static_assert(sizeof(out->internal) == VCCL_UNIQUE_ID_BYTES, "vcclUniqueId size");
    memcpy(out->internal, buf, sizeof(buf));
}

vcclResult_t decode(const vcclUniqueId& id, Info* out) {
    const uint8_t* buf = reinterpret_cast<const uint8_t*>(id.internal);
    wire::Reader r(buf);
    const uint32_t magic = r.u32();
    if (magic != kMagic) {
        return set_last_error(vcclInvalidArgument,
                              "not a vccl unique id (magic 0x%08x, expected 0x%08x): pass the id that vcclGetUniqueId "
                              "produced, unmodified",
                              magic, kMagic);
    }
    const uint8_t version_lo = r.u8(); // two statements: the operands of | are unsequenced
    const uint8_t version_hi = r.u8();
    const uint16_t version = uint16_t(version_lo | (version_hi << 8));
    if (version != kVersion) {
        return set_last_error(vcclInvalidArgument,
                              "not a vccl unique id of this format (version %u, this library reads version %u): were "
                              "all ranks built against the same vccl?",
                              version, kVersion);
    }
    const uint64_t stored = wire::Reader(buf + kChecksumOffset).u64();
    if (stored != fnv1a64(buf, kChecksumOffset)) {
        return set_last_error(vcclInvalidArgument, "not a vccl unique id (checksum mismatch): the id was corrupted in transit");
    }
    for (size_t i = kHeaderBytes; i < VCCL_UNIQUE_ID_BYTES; ++i) {
        if (buf[i] != 0) {
            return set_last_error(vcclInvalidArgument, "not a vccl unique id (reserved byte %zu is 0x%02x, must be 0)", i,
                                  buf[i]);
        }
    }
    if (buf[6] != 0 || buf[7] != 0) {
        return set_last_error(vcclInvalidArgument, "not a vccl unique id (reserved header bytes are not 0)");
    }
    Info info;
    wire::Reader ar(buf + 8);
    if (!ar.addr(&info.root)) {
        return set_last_error(vcclInvalidArgument, "not a vccl unique id (root address is not a valid IPv4/IPv6 address and port)");
    }
    memcpy(info.secret, buf + 28, wire::kSecretBytes);
    *out = info;
    return vcclSuccess;
}

vcclResult_t random_bytes(void* buf, size_t bytes) {
    uint8_t* p = static_cast<uint8_t*>(buf);
    size_t got = 0;
    while (got < bytes) {
        ssize_t n = getrandom(p + got, bytes - got, 0);
        if (n > 0) {
            got += size_t(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        break; // ENOSYS on old kernels: fall back to the device
    }
    if (got == bytes) return vcclSuccess;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        return set_last_error(vcclSystemError, "bootstrap: cannot read random bytes (getrandom and /dev/urandom failed: %s)",
                              strerror(err));
    }
    while (got < bytes) {
        ssize_t n = read(fd, p + got, bytes - got);
        if (n > 0) {
            got += size_t(n);
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            int err = n < 0 ? errno : EIO;
            close(fd);
            return set_last_error(vcclSystemError, "bootstrap: reading /dev/urandom failed: %s", strerror(err));
        }
    }
    close(fd);
    return vcclSuccess;
}

} // namespace uid
} // namespace vccl

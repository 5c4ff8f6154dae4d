/* SPDX-License-Identifier: BSD-3-Clause */
/* Logging: VCCL_DEBUG selects the level, VCCL_DEBUG_SUBSYS the subsystems, VCCL_DEBUG_FILE the file. */
#ifndef VCCL_CORE_LOG_H_
#define VCCL_CORE_LOG_H_

#include <cstdint>


namespace vccl {

enum class LogLevel : int { None = 0, Warn = 1, Info = 2, Trace = 3 };

/* Subsystems are bits so VCCL_DEBUG_SUBSYS can name several ("INIT,NET", "^COLL" to exclude). */
enum LogSubsys : uint32_t {
    kLogInit = 1u << 0,
    kLogBootstrap = 1u << 1,
    kLogNet = 1u << 2,
    kLogColl = 1u << 3,
    kLogP2p = 1u << 4,
    kLogTopo = 1u << 5,
    kLogProxy = 1u << 6,
    kLogEnv = 1u << 7,
    kLogDevice = 1u << 8,
    kLogAll = 0xffffffffu,
};

bool log_enabled(LogLevel level, uint32_t subsys);
void log_message(LogLevel level, uint32_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Re-reads VCCL_DEBUG* (tests). */
void log_reinit();
/* Parses a subsystem list such as "INIT,NET" or "^COLL" into a mask; exposed for tests. */
uint32_t log_parse_subsys(const char* spec);
/* Expands %h (host name) and %p (pid) in a VCCL_DEBUG_FILE pattern; exposed for tests. */
void log_expand_path(const char* pattern, char* out, unsigned out_len);

} // namespace vccl

#define VCCL_LOG(level, subsys, ...)                                                   \
    do {                                                                               \
        if (::vccl::log_enabled(level, subsys))                                        \
            ::vccl::log_message(level, subsys, __FILE__, __LINE__, __VA_ARGS__);       \
    } while (0)
#define VCCL_WARN(subsys, ...) VCCL_LOG(::vccl::LogLevel::Warn, subsys, __VA_ARGS__)
#define VCCL_INFO(subsys, ...) VCCL_LOG(::vccl::LogLevel::Info, subsys, __VA_ARGS__)
#define VCCL_TRACE(subsys, ...) VCCL_LOG(::vccl::LogLevel::Trace, subsys, __VA_ARGS__)

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
#include "log.h"

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <fcntl.h>
#include <sys/stat.h>
#include <strings.h>
#include <unistd.h>

#include "clock.h"
#include "env.h"

namespace vccl {

namespace {

struct LogState {
    std::mutex mutex;
    std::atomic<bool> initialized{false};
    LogLevel level = LogLevel::Warn;
    uint32_t subsys = kLogAll;
    bool timestamps = false; // VCCL_DEBUG_TIMESTAMPS
    FILE* out = nullptr;
    char host[64] = "?";
};

LogState& state() {
    static LogState* s = new LogState(); // never destroyed: logging may happen during exit
    return *s;
}

struct SubsysName {
    const char* name;
    uint32_t bit;
};
const SubsysName kSubsysNames[] = {
    {"INIT", kLogInit}, {"BOOTSTRAP", kLogBootstrap}, {"NET", kLogNet},     {"COLL", kLogColl},
    {"P2P", kLogP2p},   {"TOPO", kLogTopo},           {"PROXY", kLogProxy}, {"ENV", kLogEnv},
    {"DEVICE", kLogDevice}, {"ALL", kLogAll},
};

const char* subsys_label(uint32_t subsys) {
    for (const SubsysName& s : kSubsysNames) {
        if (s.bit == subsys) return s.name;
    }
    return "ALL";
}

LogLevel parse_level(const std::string& text) {
    if (strcasecmp(text.c_str(), "NONE") == 0) return LogLevel::None;
    if (strcasecmp(text.c_str(), "INFO") == 0) return LogLevel::Info;
    if (strcasecmp(text.c_str(), "TRACE") == 0) return LogLevel::Trace;
    return LogLevel::Warn;
}

void warn_log_file(const char* host, const char* path, const char* why) {
    fprintf(stderr, "%s:%d vccl WARN cannot use VCCL_DEBUG_FILE %s: %s; logging to stderr\n", host, getpid(),
            path, why);
}

/* Opens VCCL_DEBUG_FILE for appending, or returns nullptr after a warning on stderr. Logs may name peers and
 * addresses, so a new file is mode 0600. The path is often predictable (/tmp/vccl.%h.%p.log) in a directory
 * other users can write, hence:
 *  - O_NOFOLLOW: a symlink planted there would make us append to (or create) a file of the planter's choice
 *    with our privileges;
 *  - a regular file owned by someone else is refused: its owner could read what we write;
 *  - O_NONBLOCK only for the open itself: a FIFO planted there would block the first log call forever. */
FILE* open_log_file(const char* path, const char* host) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (fd < 0) {
        int err = errno;
        warn_log_file(host, path, err == ELOOP ? "it is a symbolic link, which vccl does not follow" : strerror(err));
        return nullptr;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (S_ISREG(st.st_mode) && st.st_uid != geteuid())) {
        close(fd);
        warn_log_file(host, path, "the file belongs to another user");
        return nullptr;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE* f = fdopen(fd, "a");
    if (f == nullptr) {
        int err = errno;
        close(fd);
        warn_log_file(host, path, strerror(err));
        return nullptr;
    }
    setvbuf(f, nullptr, _IOLBF, 0);
    return f;
}

void init_locked(LogState& s) {
    gethostname(s.host, sizeof(s.host) - 1);
    char* dot = strchr(s.host, '.');
    if (dot) *dot = '\0';
    s.level = parse_level(env::get_str(env::kDebug));
    s.subsys = log_parse_subsys(env::get_str(env::kDebugSubsys).c_str());
    s.timestamps = env::get_bool(env::kDebugTimestamps);
    if (s.out != nullptr && s.out != stderr) fclose(s.out);
    s.out = stderr;
    std::string file = env::get_str(env::kDebugFile);
    if (!file.empty()) {
        char path[4096];
        log_expand_path(file.c_str(), path, sizeof(path));
        FILE* f = open_log_file(path, s.host);
        if (f != nullptr) s.out = f;
    }
    s.initialized.store(true, std::memory_order_release);
}

void ensure_init() {
    LogState& s = state();
    if (s.initialized.load(std::memory_order_acquire)) return;
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.initialized.load(std::memory_order_relaxed)) init_locked(s);
}

} // namespace

uint32_t log_parse_subsys(const char* spec) {
    if (spec == nullptr || *spec == '\0') return kLogAll;
    bool invert = false;
    if (*spec == '^') {
        invert = true;
        spec++;
    }
    uint32_t mask = 0;
    std::string list(spec);
    size_t pos = 0;
    while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        for (const SubsysName& s : kSubsysNames) {
            if (strcasecmp(item.c_str(), s.name) == 0) mask |= s.bit;
        }
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return invert ? ~mask : mask;
}

void log_expand_path(const char* pattern, char* out, unsigned out_len) {
    char host[64] = "unknown";
    gethostname(host, sizeof(host) - 1);
    std::string result;
    for (const char* p = pattern; *p; ++p) {
        if (p[0] == '%' && p[1] == 'h') {
            result += host;
            ++p;
        } else if (p[0] == '%' && p[1] == 'p') {
            result += std::to_string(getpid());
            ++p;
        } else {
            result += *p;
        }
    }
    snprintf(out, out_len, "%s", result.c_str());
}

bool log_enabled(LogLevel level, uint32_t subsys) {
    ensure_init();
    LogState& s = state();
    return level != LogLevel::None && level <= s.level && (level == LogLevel::Warn || (s.subsys & subsys) != 0);
}

void log_message(LogLevel level, uint32_t subsys, const char* file, int line, const char* fmt, ...) {
    ensure_init();
    LogState& s = state();
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char* level_name = level == LogLevel::Warn ? "WARN" : level == LogLevel::Info ? "INFO" : "TRACE";
    const char* base = strrchr(file, '/');
    base = base ? base + 1 : file;
    double t = double(now_ns()) / 1e9;
    // Wall clock, not monotonic: fault injectors, other hosts and `date` speak it (the fault tests' timelines).
    char stamp[40] = "";
    if (s.timestamps) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(stamp, sizeof(stamp), " [%lld.%06ld]", (long long)ts.tv_sec, long(ts.tv_nsec / 1000));
    }
    std::lock_guard<std::mutex> lock(s.mutex);
    if (level == LogLevel::Trace) {
        fprintf(s.out, "%s:%d%s [%.6f] vccl %s %s %s:%d %s\n", s.host, getpid(), stamp, t, level_name,
                subsys_label(subsys), base, line, msg);
    } else {
        fprintf(s.out, "%s:%d%s vccl %s %s %s\n", s.host, getpid(), stamp, level_name, subsys_label(subsys), msg);
    }
}

void log_reinit() {
    LogState& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    init_locked(s);
}

} // namespace vccl

/* SPDX-License-Identifier: BSD-3-Clause */
/* The only code in vccl that reads VCCL_* environment variables (see env_defs.h). */
#include "env.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "log.h"

namespace vccl {
namespace env {

namespace {

const Var kVars[] = {
#define VCCL_ENV_DEF(id, name, type, def, doc) {id, name, Type::type, def, doc},
#include "env_defs.h"
#undef VCCL_ENV_DEF
};

struct Cache {
    std::mutex mutex;
    bool loaded[kNumVars] = {};
    bool set[kNumVars] = {};
    std::string text[kNumVars];
};

Cache& cache() {
    static Cache* c = new Cache(); // never destroyed: may be used from atexit paths
    return *c;
}

/* Reads a variable once and caches its text. */
std::string load(Id id, bool* was_set) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (!c.loaded[id]) {
        const char* value = getenv(kVars[id].name);
        c.set[id] = value != nullptr;
        c.text[id] = value != nullptr ? value : kVars[id].default_value;
        c.loaded[id] = true;
    }
    if (was_set) *was_set = c.set[id];
    return c.text[id];
}

void warn_malformed(Id id, const std::string& text) {
    VCCL_WARN(kLogEnv, "%s=\"%s\" is not a valid %s; using the default \"%s\"", kVars[id].name, text.c_str(),
              type_name(kVars[id].type), kVars[id].default_value);
}

} // namespace

const Var* vars(size_t* count) {
    *count = sizeof(kVars) / sizeof(kVars[0]);
    return kVars;
}

const char* type_name(Type type) {
    switch (type) {
    case Type::Int: return "integer";
    case Type::Bool: return "boolean";
    case Type::Str: return "string";
    case Type::Size: return "size";
    }
    return "?";
}

bool parse_int(const char* text, int64_t* out) {
    if (text == nullptr || *text == '\0') return false;
    errno = 0;
    char* end = nullptr;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || end == text) return false;
    while (*end == ' ') end++;
    if (*end != '\0') return false;
    *out = v;
    return true;
}

bool parse_bool(const char* text, bool* out) {
    if (text == nullptr) return false;
    static const char* const kTrue[] = {"1", "y", "yes", "true", "on"};
    static const char* const kFalse[] = {"0", "n", "no", "false", "off"};
    for (const char* t : kTrue) {
        if (strcasecmp(text, t) == 0) { *out = true; return true; }
    }
    for (const char* f : kFalse) {
        if (strcasecmp(text, f) == 0) { *out = false; return true; }
    }
    return false;
}

int64_t get_int(Id id) {
    std::string text = load(id, nullptr);
    int64_t v = 0;
    if (parse_int(text.c_str(), &v)) return v;
    warn_malformed(id, text);
    parse_int(kVars[id].default_value, &v);
    return v;
}

bool get_bool(Id id) {
    std::string text = load(id, nullptr);
    bool v = false;
    if (parse_bool(text.c_str(), &v)) return v;
    warn_malformed(id, text);
    parse_bool(kVars[id].default_value, &v);
    return v;
}

uint64_t get_size(Id id) {
    std::string text = load(id, nullptr);
    uint64_t v = 0;
    if (parse_size(text.c_str(), &v)) return v;
    warn_malformed(id, text);
    parse_size(kVars[id].default_value, &v);
    return v;
}

std::string get_str(Id id) { return load(id, nullptr); }

std::string get_text(Id id) { return load(id, nullptr); }

bool is_set(Id id) {
    bool set = false;
    load(id, &set);
    return set;
}

std::string launcher_job_id() {
    const char* const launcher_vars[] = {"SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"};
    for (const char* var : launcher_vars) {
        const char* v = getenv(var);
        if (v != nullptr && *v != '\0') return v;
    }
    return "";
}

bool ucx_variable_set(const char* name) { return name != nullptr && getenv(name) != nullptr; }

int launcher_world_size() {
    const char* const launcher_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (const char* var : launcher_vars) {
        int64_t n = 0;
        const char* v = getenv(var);
        if (v != nullptr && parse_int(v, &n) && n > 0 && n < (int64_t(1) << 30)) return int(n);
    }
    return 0;
}

void reload() {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    for (int i = 0; i < kNumVars; ++i) c.loaded[i] = false;
}

} // namespace env
} // namespace vccl

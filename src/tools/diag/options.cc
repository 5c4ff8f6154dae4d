/* SPDX-License-Identifier: BSD-3-Clause */
/* Sweep options, shared by `vccl-diag sweep` and the default run under MPI. */
#include <cstdlib>

#include "config.h"
#include "core/env.h"
#include "core/parse_size.h"
#include "tools/diag/diag.h"

namespace vdiag {

namespace {

bool take_value(const std::vector<std::string>& args, size_t* i, std::string* value, std::string* error) {
    if (*i + 1 >= args.size()) {
        *error = "option " + args[*i] + " needs a value";
        return false;
    }
    *value = args[++*i];
    return true;
}

bool positive_int(const std::string& text, int min, int* out) {
    int64_t v = 0;
    if (!vccl::env::parse_int(text.c_str(), &v) || v < min || v > 1000000) return false;
    *out = int(v);
    return true;
}

} // namespace

/* Returns true when args[*i] was a sweep option (consumed, *i on its last word); false with *error empty
 * when it is not one, false with *error set when it is one but malformed. */
bool parse_sweep_option(const std::vector<std::string>& args, size_t* i, SweepOptions* o, std::string* error) {
    const std::string& a = args[*i];
    std::string v;
    if (a == "-b" || a == "--bytes") {
        if (!take_value(args, i, &v, error)) return false;
        uint64_t bytes = 0;
        if (!vccl::parse_size(v.c_str(), &bytes) || bytes == 0 || bytes > (uint64_t(1) << 34)) {
            *error = "--bytes: expected a size such as 8M (1 byte to 16 GiB), got '" + v + "'";
            return false;
        }
        o->bytes = size_t(bytes);
    } else if (a == "-n" || a == "--iters") {
        if (!take_value(args, i, &v, error)) return false;
        if (!positive_int(v, 1, &o->iters)) {
            *error = "--iters: expected a positive integer, got '" + v + "'";
            return false;
        }
    } else if (a == "-w" || a == "--warmup") {
        if (!take_value(args, i, &v, error)) return false;
        if (!positive_int(v, 0, &o->warmup)) {
            *error = "--warmup: expected an integer >= 0, got '" + v + "'";
            return false;
        }
    } else if (a == "--fraction") {
        if (!take_value(args, i, &v, error)) return false;
        char* end = nullptr;
        double f = strtod(v.c_str(), &end);
        if (end == v.c_str() || *end != '\0' || !(f >= 0 && f <= 1)) {
            *error = "--fraction: expected a number from 0 to 1, got '" + v + "'";
            return false;
        }
        o->fraction = f;
    } else if (a == "--device") {
#if VCCL_HAVE_CUDA
        o->device = true;
#else
        *error = "--device: this vccl-diag was built without CUDA; use host memory (the default)";
        return false;
#endif
    } else if (a == "--netns-prefix") {
        if (!take_value(args, i, &v, error)) return false;
        if (v.empty() || v.find('/') != std::string::npos) {
            *error = "--netns-prefix: expected a namespace name prefix without '/', got '" + v + "'";
            return false;
        }
        o->netns_prefix = v;
    } else {
        error->clear();
        return false;
    }
    return true;
}

} // namespace vdiag

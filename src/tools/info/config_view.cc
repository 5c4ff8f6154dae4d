/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-info -c: the environment variables of vccl, straight from the registry (core/env_defs.h). */
#include <algorithm>
#include <cstring>
#include <string>

#include "core/env.h"
#include "tools/info/info.h"

namespace vinfo {

using vccl::env::Var;

std::string json_quote(const char* text) {
    std::string s = "\"";
    for (const char* p = text; *p; ++p) {
        unsigned char c = static_cast<unsigned char>(*p);
        switch (c) {
        case '"': s += "\\\""; break;
        case '\\': s += "\\\\"; break;
        case '\n': s += "\\n"; break;
        case '\t': s += "\\t"; break;
        default:
            if (c < 0x20) {
                char buf[8];
                snprintf(buf, sizeof(buf), "\\u%04x", c);
                s += buf;
            } else {
                s += char(c);
            }
        }
    }
    return s + "\"";
}

void print_config_table(FILE* out) {
    size_t count = 0;
    const Var* vars = vccl::env::vars(&count);
    size_t name_w = 4, default_w = 7, value_w = 5;
    for (size_t i = 0; i < count; ++i) {
        name_w = std::max(name_w, strlen(vars[i].name));
        default_w = std::max(default_w, strlen(vars[i].default_value) ? strlen(vars[i].default_value) : 2);
        if (vccl::env::is_set(vars[i].id))
            value_w = std::max(value_w, vccl::env::get_text(vars[i].id).size());
    }
    fprintf(out, "# vccl environment variables (%zu). VALUE: as set in this environment, - when unset.\n", count);
    fprintf(out, "# %-*s  %-7s  %-*s  %s\n", int(name_w), "NAME", "TYPE", int(default_w), "DEFAULT", "VALUE");
    for (size_t i = 0; i < count; ++i) {
        const Var& v = vars[i];
        std::string value = vccl::env::is_set(v.id) ? "\"" + vccl::env::get_text(v.id) + "\"" : "-";
        const char* def = *v.default_value ? v.default_value : "\"\"";
        fprintf(out, "  %-*s  %-7s  %-*s  %s\n", int(name_w), v.name, vccl::env::type_name(v.type),
                int(default_w), def, value.c_str());
        fprintf(out, "      %s\n", v.doc);
    }
}

void print_config_json(FILE* out) {
    size_t count = 0;
    const Var* vars = vccl::env::vars(&count);
    fprintf(out, "[");
    for (size_t i = 0; i < count; ++i) {
        const Var& v = vars[i];
        bool set = vccl::env::is_set(v.id);
        fprintf(out, "%s\n    {\"name\": %s, \"type\": %s, \"default\": %s, \"set\": %s, \"value\": %s, \"doc\": %s}",
                i ? "," : "", json_quote(v.name).c_str(), json_quote(vccl::env::type_name(v.type)).c_str(),
                json_quote(v.default_value).c_str(), set ? "true" : "false",
                set ? json_quote(vccl::env::get_text(v.id).c_str()).c_str() : "null", json_quote(v.doc).c_str());
    }
    fprintf(out, "\n  ]");
}

} // namespace vinfo

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vccl-info: what this vccl build is and how it is configured.
 *   main.cc         command line and dispatch
 *   config_view.cc  -c: every environment variable of the registry (core/env_defs.h), table or JSON
 *   features.cc     -v: version and build features; -a: registered algorithms
 *   topology_view.cc -t: GPUs, NICs, path matrix and rail choices (src/topo), table or JSON
 */
#ifndef VCCL_TOOLS_INFO_INFO_H_
#define VCCL_TOOLS_INFO_INFO_H_

#include <cstdio>
#include <string>

namespace vinfo {

/* Each printer writes one section. The JSON variants write a JSON value (no trailing newline) so that
 * main.cc can combine several sections into one object. */
void print_config_table(FILE* out);
void print_config_json(FILE* out);
void print_version(FILE* out);
void print_version_json(FILE* out);
void print_algorithms(FILE* out);
void print_algorithms_json(FILE* out);
/* False (after a message on stderr) when the topology cannot be loaded or a VCCL_* override is malformed. */
bool print_topology(FILE* out);
bool print_topology_json(FILE* out);

/* A JSON string literal for text. */
std::string json_quote(const char* text);

} // namespace vinfo

#endif

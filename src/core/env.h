/* SPDX-License-Identifier: BSD-3-Clause */
/* The environment-variable registry: typed, cached access to the variables declared in env_defs.h. */
#ifndef VCCL_CORE_ENV_H_
#define VCCL_CORE_ENV_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/parse_size.h"
#include "vccl.h"

namespace vccl {
namespace env {

enum class Type { Int, Bool, Str, Size };

enum Id : int {
#define VCCL_ENV_DEF(id, name, type, def, doc) id,
#include "env_defs.h"
#undef VCCL_ENV_DEF
    kNumVars
};

struct Var {
    Id id;
    const char* name;
    Type type;
    const char* default_value;
    const char* doc;
};

/* All declared variables, in declaration order. */
const Var* vars(size_t* count);
const char* type_name(Type type);

/* Typed values. A malformed value logs a warning once and yields the default. */
int64_t get_int(Id id);
bool get_bool(Id id);
uint64_t get_size(Id id);
std::string get_str(Id id);
/* True when the user set the variable (to anything). */
bool is_set(Id id);
/* The raw text in effect: the user's value if set, else the default. */
std::string get_text(Id id);

/* Parsers, exposed for tests. They return false on malformed text and leave *out untouched. Sizes are read
 * by the parser the tools share (core/parse_size.h). */
bool parse_int(const char* text, int64_t* out);
bool parse_bool(const char* text, bool* out);
using ::vccl::parse_size;

/* The job id the launcher exports (Slurm, Open MPI 4, PMIx), or "" outside a launcher. Not a VCCL_* setting:
 * read here so that this file stays the only reader of the process environment. */
std::string launcher_job_id();

/* The number of processes the launcher started for this job (Open MPI's mpirun, PMI-2 launchers such as
 * srun --mpi=pmi2), or 0 when this process was not started by one. Lets a tool decide whether to call
 * MPI_Init at all. Not a VCCL_* setting; read here for the same reason as launcher_job_id(). */
int launcher_world_size();

/* True when the user exported the UCX variable `name` (e.g. "UCX_TCP_CONN_NB"): vccl then leaves that UCX
 * setting to the user. Not a VCCL_* setting; read here for the same reason as launcher_job_id(). */
bool ucx_variable_set(const char* name);

/* Forget cached values so the next get_* reads the process environment again (tests). */
void reload();

} // namespace env
} // namespace vccl

#endif

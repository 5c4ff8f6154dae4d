/*
 * Until the communicator lands on this branch, libvccl_core's error_api.o (pulled in through
 * set_last_error -> vcclGetErrorString) refers to comm_is_live(), which nothing here defines. A weak stand-in
 * lets the algorithm tests link; once comm_registry.cc provides the real (strong) definition, the linker
 * prefers that one, and this file can be deleted.
 */
struct vcclComm;

namespace vccl {
__attribute__((weak)) bool comm_is_live(const vcclComm*) { return false; }
} // namespace vccl

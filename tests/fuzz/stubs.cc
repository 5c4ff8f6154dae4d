// Link stubs for the fuzz targets: src/core/status.cc names results through the public vcclGetErrorString,
// which lives in src/api/error_api.cc together with entry points that pull in the whole communicator. The
// fuzz targets only need a name for log lines.
#include "vccl.h"

extern "C" const char* vcclGetErrorString(vcclResult_t result) { return result == vcclSuccess ? "success" : "error"; }

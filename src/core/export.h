/* Marks the few internal C++ symbols that libvccl_mpi.so uses as visible (see src/libvccl.map). */
#ifndef VCCL_CORE_EXPORT_H_
#define VCCL_CORE_EXPORT_H_
#define VCCL_INTERNAL_API __attribute__((visibility("default")))
#endif

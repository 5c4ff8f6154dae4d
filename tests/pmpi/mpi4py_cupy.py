#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""mpi4py on CuPy arrays through libvccl-pmpi.so (run by gpu-mpi4py-cupy.sh under mpirun, with the
interposer preloaded): each collective the interposer takes, on device arrays, checked against values
computed here, and its route read from the test library (libvccl_testing, preloaded with the interposer). Prints one line per case on rank 0, then
"N passed, N failed"; exits 1 when anything failed on any rank."""
import ctypes
import sys

import cupy as cp
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
cp.cuda.Device(rank % cp.cuda.runtime.getDeviceCount()).use()

try:
    _get = ctypes.CDLL(None).vccl_testing_pmpi_routes
except AttributeError:
    if rank == 0:
        print("vccl_testing_pmpi_routes not found: libvccl_testing.so is not preloaded")
    sys.exit(1)


def counts():
    v, p, s = ctypes.c_ulonglong(), ctypes.c_ulonglong(), ctypes.c_ulonglong()
    _get(ctypes.byref(v), ctypes.byref(p), ctypes.byref(s))
    return v.value, p.value, s.value


results = []


def case(name, route, fn):
    """Runs fn (which returns True when its result is right); route: 0 vccl, 2 staged through host copies."""
    cp.cuda.get_current_stream().synchronize()  # MPI reads the arrays when called
    before = counts()
    ok = bool(fn())
    after = counts()
    routed = after[route] - before[route] >= 1
    mine = ok and routed
    every = comm.allreduce(1 if mine else 0, op=MPI.MIN)
    results.append((name, every == 1, "" if mine else ("wrong result" if not ok else "wrong route")))


n = (1 << 20) + 3  # 4 MiB of float32 and an odd count
base = cp.arange(n, dtype=cp.float32) % 7


def allreduce():
    x, y = base + rank, cp.empty(n, dtype=cp.float32)
    comm.Allreduce(x, y, op=MPI.SUM)
    return cp.all(y == base * size + size * (size - 1) / 2)


def allreduce_in_place():
    x = base * (rank + 1)
    comm.Allreduce(MPI.IN_PLACE, x, op=MPI.MAX)
    return cp.all(x == base * size)


def bcast():
    x = cp.arange(n, dtype=cp.int32) if rank == 0 else cp.zeros(n, dtype=cp.int32)
    comm.Bcast(x, root=0)
    return cp.all(x == cp.arange(n, dtype=cp.int32))


def allgather():
    x, y = cp.full(1000, rank, dtype=cp.float64), cp.empty(1000 * size, dtype=cp.float64)
    comm.Allgather(x, y)
    return cp.all(y == cp.repeat(cp.arange(size, dtype=cp.float64), 1000))


def alltoall():
    x = cp.arange(size * 257, dtype=cp.int64) + 1000 * rank
    y = cp.empty_like(x)
    comm.Alltoall(x, y)
    want = cp.concatenate([cp.arange(rank * 257, (rank + 1) * 257, dtype=cp.int64) + 1000 * q for q in range(size)])
    return cp.all(y == want)


def reduce_scatter_block():
    x, y = cp.arange(size * 333, dtype=cp.float32) * (rank + 1), cp.empty(333, dtype=cp.float32)
    comm.Reduce_scatter_block(x, y, op=MPI.SUM)
    return cp.all(y == cp.arange(rank * 333, (rank + 1) * 333, dtype=cp.float32) * (size * (size + 1) // 2))


def reduce():
    x, y = base + rank, cp.zeros(n, dtype=cp.float32)
    comm.Reduce(x, y, op=MPI.MIN, root=size - 1)
    return rank != size - 1 or cp.all(y == base)


def iallreduce():
    x, y = base + rank, cp.empty(n, dtype=cp.float32)
    comm.Iallreduce(x, y, op=MPI.SUM).Wait()
    return cp.all(y == base * size + size * (size - 1) / 2)


def maxloc():
    # a pair type vccl has no equivalent of: the MPI library on host copies
    x = cp.zeros(2 * 64, dtype=cp.int32)
    x[0::2] = (cp.arange(64, dtype=cp.int32) * 7 + rank) % 5
    x[1::2] = rank
    y = cp.empty_like(x)
    comm.Allreduce([x, MPI.INT_INT], [y, MPI.INT_INT], op=MPI.MAXLOC)
    v = (cp.arange(64, dtype=cp.int32)[:, None] * 7 + cp.arange(size, dtype=cp.int32)[None, :]) % 5
    return cp.all(y[0::2] == v.max(axis=1)) and cp.all(y[1::2] == v.argmax(axis=1))


case("Allreduce float32 sum", 0, allreduce)
case("Allreduce in place max", 0, allreduce_in_place)
case("Bcast int32", 0, bcast)
case("Allgather float64", 0, allgather)
case("Alltoall int64", 0, alltoall)
case("Reduce_scatter_block float32", 0, reduce_scatter_block)
case("Reduce float32 min", 0, reduce)
case("Iallreduce float32 (host copies)", 2, iallreduce)
case("Allreduce MPI_MAXLOC (host copies)", 2, maxloc)

failed = sum(1 for _, ok, _ in results if not ok)
if rank == 0:
    for name, ok, why in results:
        print(("PASS " if ok else "FAIL ") + name + ("" if ok else " (" + why + " on some rank)"))
    print(f"{len(results) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)

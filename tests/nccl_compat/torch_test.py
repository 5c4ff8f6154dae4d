#!/usr/bin/env python3
"""torch.distributed (backend "nccl") on libvccl-nccl: collective correctness and a tiny DDP run.

Launch with torchrun (torchrun --nproc-per-node 2 torch_test.py) or mpirun -np 2 (the Open MPI environment
is translated). Which libnccl.so.2 torch uses is decided by the environment: run_torch_test.sh runs this
twice, once with LD_PRELOAD=<build>/src/nccl_compat/libvccl-nccl.so.2 and once with the real NCCL, and
compares the losses. Exits 77 (skipped) without torch, CUDA or enough GPUs.

Options: --steps N (20), --losses FILE (rank 0 writes "step loss ms" lines), --expect-lib SUBSTRING (fail
unless the libnccl.so.2 mapped into the process has this in its real path).
"""
import argparse
import os
import sys
import time

SKIP = 77


def log(msg):
    print(f"[rank {os.environ.get('RANK', '?')}] {msg}", flush=True)


def mapped_nccl():
    """Real paths of the mapped libraries that provide libnccl.so.2 (ours or NVIDIA's)."""
    paths = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and ("nccl" in os.path.basename(parts[5])):
                    paths.add(os.path.realpath(parts[5]))
    except OSError:
        pass
    return sorted(paths)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--losses", default="")
    ap.add_argument("--expect-lib", default="")
    args = ap.parse_args()

    # mpirun: translate Open MPI's environment into torch.distributed's.
    if "RANK" not in os.environ and "OMPI_COMM_WORLD_RANK" in os.environ:
        os.environ["RANK"] = os.environ["OMPI_COMM_WORLD_RANK"]
        os.environ["WORLD_SIZE"] = os.environ["OMPI_COMM_WORLD_SIZE"]
        os.environ["LOCAL_RANK"] = os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")

    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("SKIP: torch is not installed", flush=True)
        return SKIP
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
        print("SKIP: no CUDA GPU visible to torch", flush=True)
        return SKIP
    if world < 2:
        print("SKIP: run with 2 ranks (torchrun --nproc-per-node 2 or mpirun -np 2)", flush=True)
        return SKIP
    if torch.cuda.device_count() <= local:
        print(f"SKIP: local rank {local} but only {torch.cuda.device_count()} GPU(s)", flush=True)
        return SKIP

    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    try:  # device_id (torch >= 2.3) creates the NCCL communicator eagerly
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    except TypeError:
        dist.init_process_group("nccl", rank=rank, world_size=world)
    ver = torch.cuda.nccl.version()
    libs = mapped_nccl()
    log(f"torch {torch.__version__} nccl version {ver} mapped: {' '.join(libs) or '(none found)'}")
    if args.expect_lib and not any(args.expect_lib in p for p in libs):
        log(f"FAIL: expected a libnccl.so.2 whose path contains '{args.expect_lib}'")
        return 1

    failures = 0

    def check(name, got, want, tol=0.0):
        nonlocal failures
        ok = torch.allclose(got.float(), want.float(), rtol=tol, atol=tol) if tol else torch.equal(got, want)
        if not ok:
            failures += 1
            log(f"FAIL {name}: max abs diff {(got.float() - want.float()).abs().max().item()}")
        elif rank == 0:
            log(f"ok   {name}")

    n = 1 << 20
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        base = torch.arange(n, device=dev).to(dtype)
        # all_reduce sum / max / avg
        t = base + rank
        dist.all_reduce(t)
        check(f"all_reduce sum {dtype}", t, base * world + world * (world - 1) // 2, 1e-2 if dtype == torch.bfloat16 else 0)
        t = base + rank
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        check(f"all_reduce max {dtype}", t, base + (world - 1))
        if dtype.is_floating_point:
            t = torch.full((n,), float(rank + 1), device=dev, dtype=dtype)
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            check(f"all_reduce avg {dtype}", t, torch.full_like(t, (world + 1) / 2), 1e-2)
        # broadcast from the last rank
        t = base + 7 if rank == world - 1 else torch.zeros_like(base)
        dist.broadcast(t, src=world - 1)
        check(f"broadcast {dtype}", t, base + 7)
        # all_gather (tensor and list forms)
        mine = base[:4096] + 100 * rank
        out = torch.empty(world * 4096, device=dev, dtype=dtype)
        dist.all_gather_into_tensor(out, mine)
        check(f"all_gather_into_tensor {dtype}", out, torch.cat([base[:4096] + 100 * r for r in range(world)]))
        outs = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(outs, mine)
        check(f"all_gather list {dtype}", torch.cat(outs), torch.cat([base[:4096] + 100 * r for r in range(world)]))
        # reduce_scatter
        src = torch.arange(world * 4096, device=dev).to(dtype) + rank
        out = torch.empty(4096, device=dev, dtype=dtype)
        dist.reduce_scatter_tensor(out, src)
        want = (torch.arange(world * 4096, device=dev).to(dtype) * world + world * (world - 1) // 2)[
            rank * 4096:(rank + 1) * 4096]
        check(f"reduce_scatter_tensor {dtype}", out, want, 1e-2 if dtype == torch.bfloat16 else 0)
    # send/recv ring (batched, as pipeline parallelism does) and a blocking pair
    s = torch.full((n,), float(rank), device=dev)
    r = torch.empty(n, device=dev)
    ops = [dist.P2POp(dist.isend, s, (rank + 1) % world), dist.P2POp(dist.irecv, r, (rank - 1) % world)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    check("batch_isend_irecv ring", r, torch.full_like(r, float((rank - 1) % world)))
    if rank == 0:
        dist.send(torch.arange(1000, device=dev, dtype=torch.float32), dst=1)
    elif rank == 1:
        got = torch.empty(1000, device=dev, dtype=torch.float32)
        dist.recv(got, src=0)
        check("send/recv", got, torch.arange(1000, device=dev, dtype=torch.float32))
    # all_to_all
    a2a_in = torch.arange(world * 1024, device=dev, dtype=torch.float32) + 10000 * rank
    a2a_out = torch.empty_like(a2a_in)
    dist.all_to_all_single(a2a_out, a2a_in)
    want = torch.cat([torch.arange(rank * 1024, (rank + 1) * 1024, device=dev, dtype=torch.float32) + 10000 * p
                      for p in range(world)])
    check("all_to_all_single", a2a_out, want)

    # A tiny DDP training run: 2-layer MLP, fixed seed, every rank its own data shard.
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator(device="cpu").manual_seed(42 + rank)
    x_all = torch.randn(args.steps, 64, 256, generator=gen).to(dev)
    y_all = torch.randint(0, 10, (args.steps, 64), generator=gen).to(dev)
    lines = []
    for step in range(args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(ddp(x_all[step]), y_all[step])
        loss.backward()
        opt.step()
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss, op=dist.ReduceOp.AVG)
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        if rank == 0:
            print(f"step {step:3d} loss {global_loss.item():.6f} time {ms:.3f} ms", flush=True)
            lines.append(f"{step} {global_loss.item():.9g} {ms:.4f}\n")
    # Parameters must agree across ranks after DDP.
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    check("DDP parameters identical on all ranks", flat, ref)
    if rank == 0 and args.losses:
        with open(args.losses, "w") as f:
            f.writelines(lines)

    dist.barrier()
    dist.destroy_process_group()
    if failures:
        log(f"{failures} check(s) failed")
        return 1
    if rank == 0:
        log("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

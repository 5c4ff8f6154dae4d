#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""torch.distributed (backend "nccl") on libvccl-nccl: collective correctness (also of a send/recv ring captured
with torch.cuda.graph) and a tiny DDP run.

Modes:
  distributed (default): launch with torchrun (torchrun --nproc-per-node 2 torch_test.py) or mpirun -np 2
    (the Open MPI environment is translated). Rank r uses cuda:LOCAL_RANK. Which libnccl.so.2 torch uses is
    decided by the environment: run_torch_test.sh runs this twice, once with
    LD_PRELOAD=<build>/src/nccl_compat/libvccl-nccl.so.2 and once with the real NCCL, and compares the losses.
  distributed with --share-gpu: as above, but every rank uses cuda:0 (several ranks on one GPU). vccl
    supports that; the real NCCL refuses it ("Duplicate GPU detected").
  --reference: one process, no torch.distributed. Computes on cuda:0 what the DDP loop of a --world N
    (default 2) rank run must produce: same model init, every rank's data shard generated as that rank does,
    per step the gradients of all shards averaged, the same SGD step, the loss averaged over the shards.
    run_torch_test.sh compares a --share-gpu vccl run against it when only one GPU is available.
Exits 77 (skipped) without torch, CUDA or enough GPUs.

Options: --steps N (20), --losses FILE (rank 0, or the reference process, writes "step loss ms" lines),
--expect-lib SUBSTRING (fail unless the libnccl.so.2 mapped into the process has this in its real path;
ignored by --reference), --share-gpu, --reference, --world N (ranks to emulate with --reference, 2).
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


def build_model(torch, dev):
    """The DDP test model. Built on the CPU right after manual_seed, then moved: the initial weights depend
    only on the CPU RNG, not on what ran before (collectives, CUDA RNG use)."""
    torch.manual_seed(1234)
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)


def make_shard(torch, steps, rank, dev):
    """Rank `rank`'s training data: its own CPU generator, inputs first, then labels."""
    gen = torch.Generator(device="cpu").manual_seed(42 + rank)
    x_all = torch.randn(steps, 64, 256, generator=gen).to(dev)
    y_all = torch.randint(0, 10, (steps, 64), generator=gen).to(dev)
    return x_all, y_all


def reference(args, torch):
    """What the DDP loop of main() must produce with args.world ranks, computed in one process on cuda:0
    without torch.distributed. DDP scales every rank's gradient by 1/world and sums them over the ranks
    (allreduce); every shard has the same batch size, so that is the average gradient, done here in the
    same way in rank order. The printed loss is the mean of the per-rank losses (main's all_reduce AVG).
    Only the order of float additions can differ from a real run (none at all for 2 ranks on one kind of
    GPU, up to cuBLAS kernel choices)."""
    world = args.world
    if world < 1:
        print("FAIL: --world must be at least 1", flush=True)
        return 1
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    print(f"[reference] torch {torch.__version__} on {dev}: {world} rank(s) emulated in one process, "
          f"no torch.distributed", flush=True)
    model = build_model(torch, dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    params = list(model.parameters())
    shards = [make_shard(torch, args.steps, r, dev) for r in range(world)]
    lines = []
    for step in range(args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        losses = []
        grads = None
        for x_all, y_all in shards:
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x_all[step]), y_all[step])
            loss.backward()
            losses.append(loss.detach().clone())
            scaled = [p.grad * (1.0 / world) for p in params]  # as DDP's reducer does before the allreduce
            grads = scaled if grads is None else [g + s for g, s in zip(grads, scaled)]
        for p, g in zip(params, grads):
            p.grad = g
        opt.step()
        global_loss = torch.stack(losses).mean()
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        print(f"step {step:3d} loss {global_loss.item():.6f} time {ms:.3f} ms", flush=True)
        lines.append(f"{step} {global_loss.item():.9g} {ms:.4f}\n")
    if args.losses:
        with open(args.losses, "w") as f:
            f.writelines(lines)
    print("[reference] done", flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--losses", default="")
    ap.add_argument("--expect-lib", default="")
    ap.add_argument("--share-gpu", action="store_true", help="every rank uses cuda:0")
    ap.add_argument("--reference", action="store_true",
                    help="one process, no torch.distributed: compute the losses the DDP run must produce")
    ap.add_argument("--world", type=int, default=2, help="ranks emulated by --reference")
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
    if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
        print("SKIP: no CUDA GPU visible to torch", flush=True)
        return SKIP
    if args.reference:
        return reference(args, torch)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if world < 2:
        print("SKIP: run with 2 ranks (torchrun --nproc-per-node 2 or mpirun -np 2)", flush=True)
        return SKIP
    if not args.share_gpu and torch.cuda.device_count() <= local:
        print(f"SKIP: local rank {local} but only {torch.cuda.device_count()} GPU(s) (--share-gpu puts every "
              f"rank on cuda:0)", flush=True)
        return SKIP

    gpu = 0 if args.share_gpu else local  # the CUDA device index this rank uses
    torch.cuda.set_device(gpu)
    dev = torch.device("cuda", gpu)
    try:  # device_id (torch >= 2.3) creates the NCCL communicator eagerly
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    except TypeError:
        dist.init_process_group("nccl", rank=rank, world_size=world)
    ver = torch.cuda.nccl.version()
    libs = mapped_nccl()
    shared = " (shared by all ranks)" if args.share_gpu else ""
    log(f"torch {torch.__version__} nccl version {ver} on {dev}{shared} mapped: {' '.join(libs) or '(none found)'}")
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
    # PreMulSum (what FSDP and DDP's gradient scaling ask for): the factor given as a Python number (NCCL's
    # host-immediate scalar) and as a one-element tensor on the GPU (its device scalar). torch only exposes it
    # through a private helper; a torch without it skips these checks. Not bfloat16: ProcessGroupNCCL hands
    # NCCL a 4-byte float as the factor of bfloat16 data (unpackPreMulSum<float, ncclBfloat16>), NCCL reads
    # its first two bytes (the float's low half), and a factor of 0.25 becomes 0 with NCCL itself (seen with
    # torch 2.11 and NCCL 2.28; vccl gives the same).
    make_premul = getattr(dist, "_make_nccl_premul_sum", None) or getattr(
        getattr(dist, "distributed_c10d", None), "_make_nccl_premul_sum", None)
    if make_premul is None and rank == 0:
        log("skip premul_sum: this torch has no dist._make_nccl_premul_sum")
    for dtype in ((torch.float32, torch.float16) if make_premul is not None else ()):
        tol = 1e-3 if dtype == torch.float16 else 1e-6
        # 1021 elements (one kernel) and 2^24 + 3 (64 MiB of float: vccl's copy-engine path); values below
        # 1021, so with the 2 ranks run_torch_test.sh starts every sum stays under 2048 and is exact in half
        for count in (1021, (1 << 24) + 3):
            base = (torch.arange(count, device=dev) % 1021).to(dtype)
            want = ((base * world + world * (world - 1) // 2).double() * 0.25).to(dtype)
            t = base + rank
            dist.all_reduce(t, op=make_premul(0.25))
            check(f"all_reduce premul_sum host factor {dtype} x {count}", t, want, tol)
            t = base + rank
            dist.all_reduce(t, op=make_premul(torch.tensor([0.25], device=dev, dtype=dtype)))
            check(f"all_reduce premul_sum device factor {dtype} x {count}", t, want, tol)
        src = torch.arange(world * 509, device=dev).to(dtype) + rank
        out = torch.empty(509, device=dev, dtype=dtype)
        dist.reduce_scatter_tensor(out, src, op=make_premul(0.5))
        want = ((torch.arange(world * 509, device=dev).double() * world + world * (world - 1) // 2) * 0.5)[
            rank * 509:(rank + 1) * 509].to(dtype)
        check(f"reduce_scatter_tensor premul_sum {dtype}", out, want, tol)
    # send/recv ring (batched, as pipeline parallelism does) and a blocking pair
    s = torch.full((n,), float(rank), device=dev)
    r = torch.empty(n, device=dev)
    ops = [dist.P2POp(dist.isend, s, (rank + 1) % world), dist.P2POp(dist.irecv, r, (rank - 1) % world)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    check("batch_isend_irecv ring", r, torch.full_like(r, float((rank - 1) % world)))
    # The same ring captured with torch.cuda.graph (pipeline parallelism in graph mode) and replayed 1,000 times
    # with new inputs, each result checked; the eager ring above made the communicator, so the capture creates none.
    gs = torch.zeros(4097, device=dev)
    gr = torch.empty(4097, device=dev)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            ops = [dist.P2POp(dist.isend, gs, (rank + 1) % world), dist.P2POp(dist.irecv, gr, (rank - 1) % world)]
            for req in dist.batch_isend_irecv(ops):
                req.wait()
        bad = 0
        for k in range(1000):
            gs.fill_(float(rank * 1000 + k))
            graph.replay()
            bad += int(not torch.equal(gr, torch.full_like(gr, float(((rank - 1) % world) * 1000 + k))))
        check("batch_isend_irecv ring captured with torch.cuda.graph, 1000 replays (replays wrong)",
              torch.tensor(bad), torch.tensor(0))
    except RuntimeError as e:
        failures += 1
        log(f"FAIL batch_isend_irecv captured with torch.cuda.graph: {e}")
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

    # A tiny DDP training run: 2-layer MLP, fixed seed, every rank its own data shard. (reference() mirrors
    # the model and data construction exactly; keep the two in step.)
    model = build_model(torch, dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[gpu])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    x_all, y_all = make_shard(torch, args.steps, rank, dev)
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

    dist.barrier(device_ids=[gpu])
    dist.destroy_process_group()
    if failures:
        log(f"{failures} check(s) failed")
        return 1
    if rank == 0:
        log("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

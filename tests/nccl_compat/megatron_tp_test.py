#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Megatron-style tensor and sequence parallelism on torch.distributed (backend "nccl"), checked against the
same model computed whole on each rank.

The layer is Megatron's parallel MLP: a column-parallel linear (each rank holds ffn/world rows of W1), GELU,
and a row-parallel linear (each rank holds ffn/world columns of W2), with the communication Megatron-LM puts
around them (megatron/core/tensor_parallel/mappings.py):
  tp    input copied to every rank (backward: all_reduce of the input gradient), output all_reduce (backward:
        identity);
  tp+sp sequence parallel: each rank holds seq/world rows of the input; all_gather_into_tensor along the
        sequence before W1 (backward: reduce_scatter_tensor), reduce_scatter_tensor after W2 (backward:
        all_gather_into_tensor).
Groups are made as Megatron makes them: a tensor-parallel group of all ranks and one data-parallel group per
rank (a group of one), every rank creating every group, plus a broadcast of the initial weights from rank 0.
Each step compares, on every rank, the loss, this rank's shards of the weight gradients and the input
gradient with the whole model's (relative 1e-4), then takes an SGD step on both.

Launch: contrib/megatron/launch-megatron.sh python3 megatron_tp_test.py [--share-gpu] under mpirun -np 2 (or
torchrun); tests/nccl_compat/run_megatron_tp_test.sh does that. Exits 77 (skipped) without torch, CUDA or
enough GPUs. Options: --steps N (10), --share-gpu (every rank on cuda:0), --expect-lib SUBSTRING (fail unless
the mapped libnccl.so.2 has it in its real path), --times FILE (rank 0 writes "mode step ms" lines).
"""
import argparse
import os
import sys
import time

SKIP = 77
HIDDEN, FFN, SEQ, BATCH = 512, 2048, 256, 4
RTOL, ATOL = 1e-4, 1e-6


def log(msg):
    print(f"[rank {os.environ.get('RANK', '?')}] {msg}", flush=True)


def mapped_nccl():
    paths = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and "nccl" in os.path.basename(parts[5]):
                paths.add(os.path.realpath(parts[5]))
    return sorted(paths)


def mappings(torch, dist, group, world, rank):
    """Megatron's four communication functions as autograd functions, over `group`."""

    def gather_seq(x):
        out = torch.empty((x.shape[0] * world,) + tuple(x.shape[1:]), device=x.device, dtype=x.dtype)
        dist.all_gather_into_tensor(out, x.contiguous(), group=group)
        return out

    def scatter_seq(x):
        out = torch.empty((x.shape[0] // world,) + tuple(x.shape[1:]), device=x.device, dtype=x.dtype)
        dist.reduce_scatter_tensor(out, x.contiguous(), group=group)
        return out

    def all_reduce(x):
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    class CopyToTensorParallel(torch.autograd.Function):
        forward = staticmethod(lambda ctx, x: x.view_as(x))
        backward = staticmethod(lambda ctx, g: all_reduce(g))

    class ReduceFromTensorParallel(torch.autograd.Function):
        forward = staticmethod(lambda ctx, x: all_reduce(x))
        backward = staticmethod(lambda ctx, g: g)

    class GatherFromSequenceParallel(torch.autograd.Function):
        forward = staticmethod(lambda ctx, x: gather_seq(x))
        backward = staticmethod(lambda ctx, g: scatter_seq(g))

    class ReduceScatterToSequenceParallel(torch.autograd.Function):
        forward = staticmethod(lambda ctx, x: scatter_seq(x))
        backward = staticmethod(lambda ctx, g: gather_seq(g))

    return (CopyToTensorParallel.apply, ReduceFromTensorParallel.apply, GatherFromSequenceParallel.apply,
            ReduceScatterToSequenceParallel.apply)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--share-gpu", action="store_true")
    ap.add_argument("--expect-lib", default="")
    ap.add_argument("--times", default="")
    args = ap.parse_args()
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("SKIP: torch is not installed", flush=True)
        return SKIP
    if not torch.cuda.is_available():
        print("SKIP: no CUDA GPU visible to torch", flush=True)
        return SKIP
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if world < 2 or FFN % world or SEQ % world:
        print(f"SKIP: needs 2 or more ranks dividing {FFN} and {SEQ} (launch-megatron.sh under mpirun -np 2)",
              flush=True)
        return SKIP
    if not args.share_gpu and torch.cuda.device_count() <= local:
        print(f"SKIP: local rank {local} but {torch.cuda.device_count()} GPU(s); --share-gpu puts every rank on "
              f"cuda:0", flush=True)
        return SKIP
    gpu = 0 if args.share_gpu else local
    torch.cuda.set_device(gpu)
    dev = torch.device("cuda", gpu)
    torch.backends.cuda.matmul.allow_tf32 = False  # the comparison is in plain fp32
    try:
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    except TypeError:
        dist.init_process_group("nccl", rank=rank, world_size=world)
    libs = mapped_nccl()
    log(f"torch {torch.__version__} nccl {torch.cuda.nccl.version()} on {dev}; world {world} "
        f"(MASTER_ADDR={os.environ.get('MASTER_ADDR')}); mapped: {' '.join(libs) or '(none)'}")
    if args.expect_lib and not any(args.expect_lib in p for p in libs):
        log(f"FAIL: expected a libnccl.so.2 whose path contains '{args.expect_lib}'")
        return 1

    # Megatron's groups: tensor parallel = all ranks; data parallel = one group per rank, of one rank.
    tp_group = dist.new_group(list(range(world)))
    dp_groups = [dist.new_group([r]) for r in range(world)]
    failures = 0

    def fail(what):
        nonlocal failures
        failures += 1
        log(f"FAIL {what}")

    probe = torch.full((3,), float(rank + 1), device=dev)
    dist.all_reduce(probe, group=dp_groups[rank])  # a group of one leaves the data as it is
    if not torch.equal(probe, torch.full_like(probe, float(rank + 1))):
        fail(f"all_reduce in a group of one rank changed the data: {probe.tolist()}")

    # Weights: drawn on rank 0 (others start from garbage) and broadcast, as Megatron syncs initial weights.
    gen = torch.Generator(device="cpu").manual_seed(1234)
    w1 = (torch.randn(FFN, HIDDEN, generator=gen) * 0.02).to(dev)
    w2 = (torch.randn(HIDDEN, FFN, generator=gen) * 0.02).to(dev)
    mine1, mine2 = (w1.clone(), w2.clone()) if rank == 0 else (torch.full_like(w1, 7.0), torch.full_like(w2, 7.0))
    dist.broadcast(mine1, src=0, group=tp_group)
    dist.broadcast(mine2, src=0, group=tp_group)
    if not (torch.equal(mine1, w1) and torch.equal(mine2, w2)):
        fail("broadcast of the initial weights")
    rows = slice(rank * FFN // world, (rank + 1) * FFN // world)
    seq = slice(rank * SEQ // world, (rank + 1) * SEQ // world)
    copy_in, reduce_out, gather_seq, scatter_seq = mappings(torch, dist, tp_group, world, rank)
    gelu = torch.nn.functional.gelu

    def close(name, got, want, step, mode):
        if not torch.allclose(got, want, rtol=RTOL, atol=ATOL):
            err = ((got - want).abs() / (want.abs() + ATOL)).max().item()
            fail(f"{mode} step {step}: {name} differs from the whole model (max relative error {err:.3g})")

    times = []
    for mode in ("tp", "tp+sp"):
        full1, full2 = w1.clone().requires_grad_(), w2.clone().requires_grad_()
        part1 = w1[rows].clone().requires_grad_()
        part2 = w2[:, rows].clone().requires_grad_()
        data = torch.Generator(device="cpu").manual_seed(99)
        for step in range(args.steps):
            x = torch.randn(SEQ, BATCH, HIDDEN, generator=data).to(dev)
            target = torch.randn(SEQ, BATCH, HIDDEN, generator=data).to(dev)
            # The whole model on this rank.
            x_full = x.clone().requires_grad_()
            loss_full = ((gelu(x_full @ full1.t()) @ full2.t() - target) ** 2).mean()
            loss_full.backward()
            # The parallel model.
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            if mode == "tp":
                x_in = x.clone().requires_grad_()
                y = reduce_out(gelu(copy_in(x_in) @ part1.t()) @ part2.t())
                loss = ((y - target) ** 2).mean()
                loss.backward()
                loss_value = loss.detach()
                x_grad_want = x_full.grad
            else:
                x_in = x[seq].clone().requires_grad_()
                y_mine = scatter_seq(gelu(gather_seq(x_in) @ part1.t()) @ part2.t())
                loss = ((y_mine - target[seq]) ** 2).sum() / target.numel()
                loss.backward()
                loss_value = loss.detach().clone()
                dist.all_reduce(loss_value, group=tp_group)
                x_grad_want = x_full.grad[seq]
            torch.cuda.synchronize()
            times.append((mode, step, (time.perf_counter() - t0) * 1e3))
            close("loss", loss_value, loss_full.detach(), step, mode)
            close("W1 gradient (column-parallel shard)", part1.grad, full1.grad[rows], step, mode)
            close("W2 gradient (row-parallel shard)", part2.grad, full2.grad[:, rows], step, mode)
            close("input gradient", x_in.grad, x_grad_want, step, mode)
            with torch.no_grad():
                for p in (full1, full2, part1, part2):
                    p -= 0.5 * p.grad
                    p.grad = None
            if rank == 0:
                log(f"{mode:6s} step {step:2d} loss {loss_value.item():.7f} whole model {loss_full.item():.7f} "
                    f"{times[-1][2]:.3f} ms")
        close("final W1 shard", part1.detach(), full1.detach()[rows], args.steps, mode)
        close("final W2 shard", part2.detach(), full2.detach()[:, rows], args.steps, mode)

    if rank == 0 and args.times:
        with open(args.times, "w") as f:
            f.writelines(f"{m} {s} {ms:.4f}\n" for m, s, ms in times)
    total = torch.tensor([failures], device=dev)
    dist.all_reduce(total)
    dist.destroy_process_group()
    if rank == 0:
        print(f"{'PASS' if total.item() == 0 else 'FAIL'}: Megatron-style tp and tp+sp on {world} ranks, "
              f"{args.steps} steps each, {int(total.item())} mismatch(es)", flush=True)
    return 0 if total.item() == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

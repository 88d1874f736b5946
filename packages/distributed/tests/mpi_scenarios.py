"""Scenarios that run in several MPI ranks: ``mpiexec -n 2 python mpi_scenarios.py NAME... OUT``.

Each scenario runs in every rank and returns facts (JSON) that rank writes to
``OUT/<name>.rank<r>.json``; test_multiprocess.py launches this script and checks the facts.
``all`` runs every correctness scenario in one launch (MPI start-up is paid once). The fault
scenarios (``dying_rank``, ``raising_rank``, ``exiting_rank``, ``lingering_rank``,
``raising_before_init``) end the job and run alone.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import sadl
import sadl_distributed as dist
from sadl_models.gpt import GPT
from sadl_optim import AdamW

VOCAB, BLOCK = 23, 16


def tiny_gpt(seed=0):
    return GPT(VOCAB, BLOCK, n_layer=2, n_head=2, n_embd=16, rng=seed).to(dtype=np.float64)


def tokens():
    return np.random.default_rng(7).integers(0, VOCAB, size=2000)


def grads_of(model):
    return {n: (None if p.grad is None else np.array(p.grad)) for n, p in model.named_parameters()}


def max_diff(a, b):
    return max(float(np.max(np.abs(a[k] - b[k]))) for k in a if a[k] is not None)


# ---------------------------------------------------------------------------------- scenarios
def collectives():
    r, size = dist.rank(), dist.world_size()
    facts = {}
    a = np.arange(6, dtype=np.float64) + r
    dist.all_reduce(a)
    facts["sum"] = a.tolist()
    m = np.full(3, float(r), dtype=np.float16)
    dist.all_reduce(m, "mean")
    facts["mean_f16"] = [m.dtype.name, m.tolist()]
    strided = (np.arange(12, dtype=np.float32).reshape(3, 4) * (r + 1))[:, ::2]
    dist.all_reduce(strided, "max")
    facts["max_strided"] = strided.tolist()
    t = sadl.Parameter(np.full(2, float(r + 1)))
    dist.all_reduce(t, "prod")
    facts["prod_tensor"] = t.tolist()
    b = np.full(4, r, dtype=np.int64)
    dist.broadcast(b, src=1)
    facts["broadcast_from_1"] = b.tolist()
    g = dist.all_gather(sadl.tensor(np.array([r, 10 * r], dtype=np.int32)))
    facts["all_gather"] = [type(g).__name__, g.tolist()]
    s = dist.reduce_scatter(np.arange(4 * size, dtype=np.float64).reshape(2 * size, 2) * (r + 1))
    facts["reduce_scatter"] = s.tolist()
    w = dist.all_reduce(np.ones(5) * r, async_op=True)
    w.wait()
    facts["async_completed"] = w.is_completed()
    try:
        dist.check_same(f"config of rank {r}", "the configuration")
        facts["check_same"] = "no error"
    except dist.MismatchError as exc:
        facts["check_same"] = str(exc)
    dist.barrier()
    return facts


def ddp_gradients():
    """2 ranks x batch B/2 against 1 process x batch B, float64."""
    data = tokens()
    rng = np.random.default_rng(1)
    x_all, y_all = sadl.data.windows(data, BLOCK, 8, rng)
    reference = tiny_gpt(seed=5)  # one process, the whole batch, rank 0's initial weights
    _, loss = reference(x_all, y_all)
    loss.backward()
    # Small buckets: many all-reduces, launched while backward runs.
    wrapped = dist.DistributedDataParallel(tiny_gpt(seed=dist.rank() + 5), bucket_cap_mb=0.004)
    x, y = dist.windows(data, BLOCK, 8, np.random.default_rng(1))
    _, local_loss = wrapped(x, y)
    local_loss.backward()
    mine = grads_of(wrapped.module)
    return {
        "max_grad_diff": max_diff(grads_of(reference), mine),
        "buckets": wrapped.bucket_sizes,
        "local_batch": list(x.shape),
        "grad_digest": float(sum(float(np.sum(g)) for g in mine.values())),
    }


def ddp_adamw(steps=20):
    """Parameters identical on every rank after AdamW steps; close to one process."""
    data = tokens()
    model = dist.DistributedDataParallel(tiny_gpt(seed=dist.rank()))  # rank 0's weights win
    opt = AdamW(model.parameters(), lr=3e-3)
    single = tiny_gpt(seed=0)
    single_opt = AdamW(single.parameters(), lr=3e-3)
    rng, rng_single = np.random.default_rng(3), np.random.default_rng(3)
    for _ in range(steps):
        x, y = dist.windows(data, BLOCK, 8, rng)
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        xs, ys = sadl.data.windows(data, BLOCK, 8, rng_single)
        _, loss_s = single(xs, ys)
        single_opt.zero_grad()
        loss_s.backward()
        single_opt.step()
    flat = np.concatenate([p.numpy().ravel() for p in model.parameters()])
    everyone = dist.all_gather(flat)
    single_flat = np.concatenate([p.numpy().ravel() for p in single.parameters()])
    return {
        "max_param_diff_between_ranks": float(np.max(np.abs(everyone - everyone[0]))),
        "max_param_diff_vs_one_process": float(np.max(np.abs(flat - single_flat))),
        "steps": steps,
    }


def sharded_optimizer(steps=20):
    """ShardedOptimizer(AdamW) against AdamW: identical parameters, half the state."""
    data = tokens()
    plain = dist.DistributedDataParallel(tiny_gpt(seed=0))
    plain_opt = AdamW(plain.parameters(), lr=3e-3, weight_decay=0.1)
    sharded = dist.DistributedDataParallel(tiny_gpt(seed=0))
    sharded_opt = dist.ShardedOptimizer(AdamW(sharded.parameters(), lr=3e-3, weight_decay=0.1))
    rng = np.random.default_rng(4)
    for _ in range(steps):
        x, y = dist.windows(data, BLOCK, 8, rng)
        for model, opt in ((plain, plain_opt), (sharded, sharded_opt)):
            _, loss = model(x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    diff = max(
        float(np.max(np.abs(a.numpy() - b.numpy())))
        for a, b in zip(plain.parameters(), sharded.parameters())
    )
    full_state = sharded_opt.state_dict()
    reference_state = plain_opt.state_dict()
    state_equal = all(
        np.array_equal(full_state["state"][i][k], v)
        for i, entry in reference_state["state"].items()
        for k, v in entry.items()
    ) and sorted(full_state["state"]) == sorted(reference_state["state"])
    return {
        "max_param_diff": diff,
        "state_bytes": _state_bytes(sharded_opt.state),
        "unsharded_state_bytes": _state_bytes(plain_opt.state),
        "full_state_equal": state_equal,
    }


def _state_bytes(state):
    return int(
        sum(v.nbytes for entry in state.values() for v in entry.values() if hasattr(v, "nbytes"))
    )


def no_sync_and_unused():
    """Accumulation under no_sync; parameters without a gradient on one or all ranks."""
    data = tokens()
    x_all, y_all = sadl.data.windows(data, BLOCK, 8, np.random.default_rng(2))
    reference = tiny_gpt(seed=0)
    _, loss = reference(x_all, y_all)
    loss.backward()

    model = dist.DistributedDataParallel(tiny_gpt(seed=0))
    x, y = dist.windows(data, BLOCK, 8, np.random.default_rng(2))
    half = len(x) // 2
    with model.no_sync():
        _, first = model(x[:half], y[:half])
        (first * 0.5).backward()
    no_sync_grads = grads_of(model.module)
    _, second = model(x[half:], y[half:])
    (second * 0.5).backward()
    accumulated = max_diff(grads_of(reference), grads_of(model.module))

    class TwoBranches(sadl.Module):
        def __init__(self):
            self.a = sadl.Parameter(np.ones(3))
            self.b = sadl.Parameter(np.full(3, 2.0))
            self.never = sadl.Parameter(np.zeros(3))

        def forward(self, use_b):
            out = (self.a * 3.0).sum()
            return out + (self.b * self.b).sum() if use_b else out

    branches = dist.DistributedDataParallel(TwoBranches())
    branches(dist.rank() == 0).backward()  # only rank 0 uses b
    m = branches.module
    return {
        "accumulated_grad_diff": accumulated,
        "no_sync_grads_local": max_diff(no_sync_grads, no_sync_grads) == 0.0,
        "a_grad": m.a.grad.tolist(),
        "b_grad": m.b.grad.tolist(),
        "never_grad_is_none": m.never.grad is None,
    }


def checkpoint_resume(out):
    """Train 3 steps, checkpoint, train 3 more; resume from the checkpoint: bit-identical."""
    data = tokens()
    path = Path(out) / "resume.sadl"

    def setup():
        model = dist.DistributedDataParallel(tiny_gpt(seed=0))
        opt = dist.ShardedOptimizer(AdamW(model.parameters(), lr=3e-3))
        return model, opt

    def train(model, opt, rng, n):
        for _ in range(n):
            x, y = dist.windows(data, BLOCK, 8, rng)
            _, loss = model(x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()

    model, opt = setup()
    rng = np.random.default_rng(5)
    train(model, opt, rng, 3)
    dist.save_checkpoint(path, model=model, optimizer=opt, step=3, rng=rng)
    written = path.exists()  # every rank returns after rank 0 has written it
    train(model, opt, rng, 3)
    straight = [p.numpy().copy() for p in model.parameters()]

    model2, opt2 = setup()
    rng2 = np.random.default_rng(999)
    info = dist.load_checkpoint(path, model=model2, optimizer=opt2, rng=rng2)
    train(model2, opt2, rng2, 3)
    resumed = [p.numpy() for p in model2.parameters()]
    # A file only rank 1 lacks: every rank raises rank 1's error, none waits for the other.
    where = path if dist.get_group().rank == 0 else Path(out) / "missing.sadl"
    try:
        dist.load_checkpoint(where)
        failure = ""
    except dist.DistributedError as exc:
        failure = str(exc)
    return {
        "one_rank_failed": failure,
        "written_before_return": written,
        "step": info["step"],
        "bit_identical": all(np.array_equal(a, b) for a, b in zip(straight, resumed)),
        "state_entries_here": len(opt2.state),
    }


def sampler():
    s = dist.DistributedSampler(10, seed=3)
    s.set_epoch(2)
    mine = s.indices().tolist()
    facts = {"indices": mine, "len": len(s)}
    try:
        dist.windows(tokens(), BLOCK, 4, np.random.default_rng(dist.rank()))
        facts["different_seeds"] = "no error"
    except dist.MismatchError as exc:
        facts["different_seeds"] = str(exc)
    try:
        dist.windows(tokens(), BLOCK, 3, np.random.default_rng(0))
    except ValueError as exc:
        facts["indivisible_batch"] = str(exc)
    return facts


def mismatched_models():
    if dist.rank() == 0:
        model = tiny_gpt()
    else:
        model = GPT(VOCAB, BLOCK, n_layer=2, n_head=2, n_embd=8, rng=0).to(dtype=np.float64)
    try:
        dist.DistributedDataParallel(model)
        return {"error": "no error"}
    except dist.MismatchError as exc:
        return {"error": str(exc)}


# ---------------------------------------------------------------------------------- faults
def dying_rank():
    """Rank 1 is killed (SIGKILL: no chance to say anything); rank 0 waits for it."""
    dist.barrier()
    if dist.rank() == 1:
        os.kill(os.getpid(), 9)
    time.sleep(0.5)
    print(f"rank {dist.rank()}: waiting in all_reduce at {time.time():.3f}", flush=True)
    dist.all_reduce(np.ones(4))
    print("rank 0: all_reduce returned (it must not)", flush=True)


def raising_rank():
    dist.barrier()
    if dist.rank() == 1:
        raise ValueError("a bug in rank 1's code")
    dist.all_reduce(np.ones(4))


def exiting_rank():
    """Rank 1 calls sys.exit(3) while rank 0 goes on to wait for it."""
    dist.barrier()
    if dist.rank() == 1:
        sys.exit(3)
    dist.all_reduce(np.ones(4))


def lingering_rank():
    """The launcher's signal arrives while the failed process is still there (not yet gone)."""
    group = dist.get_group()
    dist.barrier()
    if dist.rank() == 1:
        os.kill(group._peers.pids[0], signal.SIGUSR1)  # as hydra does when a process fails
        time.sleep(0.5)  # still visible when rank 0 looks the first time
        os._exit(1)
    dist.all_reduce(np.ones(4))


def ddp_parameter_order():
    """The same parameters, defined in another order on rank 1."""

    class Two(sadl.Module):
        def __init__(self, flip):
            if flip:
                self.b = sadl.Parameter(np.zeros(2))
                self.a = sadl.Parameter(np.zeros(2))
            else:
                self.a = sadl.Parameter(np.zeros(2))
                self.b = sadl.Parameter(np.zeros(2))

    try:
        dist.DistributedDataParallel(Two(flip=dist.rank() == 1))
        return {"error": "no error"}
    except dist.MismatchError as exc:
        return {"error": str(exc)}


CORRECTNESS = {
    "collectives": collectives,
    "ddp_gradients": ddp_gradients,
    "ddp_adamw": ddp_adamw,
    "sharded_optimizer": sharded_optimizer,
    "no_sync_and_unused": no_sync_and_unused,
    "checkpoint_resume": checkpoint_resume,
    "sampler": sampler,
    "mismatched_models": mismatched_models,
    "ddp_parameter_order": ddp_parameter_order,
}
FAULTS = {
    "dying_rank": dying_rank,
    "raising_rank": raising_rank,
    "exiting_rank": exiting_rank,
    "lingering_rank": lingering_rank,
}


def sadl_killed_after_checkpoint(argv):
    """``sadl ARGV`` (``train gpt``), rank 0 killed just after writing step 3's checkpoint."""
    from sadl.cli import main as sadl_main
    from sadl_models.train import parallel

    write = parallel.DataParallel.save_checkpoint

    def write_then_die(self, path, **parts):
        write(self, path, **parts)
        if parts["step"] == 3 and self.rank == 0:
            os.kill(os.getpid(), signal.SIGKILL)

    parallel.DataParallel.save_checkpoint = write_then_die
    return sadl_main(argv)


def main(argv):
    if argv[:1] == ["sadl_killed_after_checkpoint"]:
        return sadl_killed_after_checkpoint(argv[1:])
    *names, out = argv
    if names == ["raising_before_init"]:
        if os.environ.get("PMI_RANK") == "1":
            raise ValueError("a bug in rank 1's code, before init")
        names = []  # rank 0 would wait for rank 1 in MPI's start-up
    dist.init()
    if names == ["all"]:
        names = list(CORRECTNESS)
    for name in names:
        if name in FAULTS:
            FAULTS[name]()
            continue
        fn = CORRECTNESS[name]
        start = time.perf_counter()
        facts = fn(out) if name == "checkpoint_resume" else fn()
        facts["seconds"] = time.perf_counter() - start
        facts["world_size"] = dist.world_size()
        target = Path(out) / f"{name}.rank{dist.rank()}.json"
        target.write_text(json.dumps(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

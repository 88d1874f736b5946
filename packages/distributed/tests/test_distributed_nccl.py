"""The NCCL group's bookkeeping against a stand-in for cupy.cuda.nccl (no GPU needed).

Two NcclGroups (rank 0 and rank 1) live in this process; the stand-in communicator completes a
collective once both ranks have called it, reading and writing the "device" buffers through the
pointers NCCL would get. What this cannot show: real NCCL on real GPUs (see docs/distributed.md).
"""

from types import SimpleNamespace

import numpy as np
import pytest
from sadl_distributed import DistributedError
from sadl_distributed.nccl import _DTYPES, _OPS, NcclGroup


class DeviceArray:
    """A "GPU" array: NumPy memory reachable by pointer, on device ``device``."""

    def __init__(self, hub, values, device=0):
        self.host = np.ascontiguousarray(values)
        self.data = SimpleNamespace(ptr=hub.register(self.host))
        self.device = SimpleNamespace(id=device)
        self.size, self.nbytes, self.dtype = self.host.size, self.host.nbytes, self.host.dtype


class Hub:
    """The stand-in NCCL library: constants, unique ids, and two-rank collectives."""

    def __init__(self):
        self.memory, self.pending, self.uids = {}, {}, []
        for i, name in enumerate([*_DTYPES.values(), *_OPS.values()]):
            setattr(self, name, 100 + i)

    def register(self, array):
        self.memory[id(array)] = array
        return id(array)

    def get_unique_id(self):
        return tuple(range(-64, 64))

    def NcclCommunicator(self, size, uid, rank):
        self.uids.append(uid)
        return Communicator(self, size, rank)

    def bytes_of(self, ptr, nbytes):
        return self.memory[ptr].reshape(-1).view(np.uint8)[:nbytes]


class Communicator:
    def __init__(self, hub, size, rank):
        self.hub, self.size, self.rank, self.calls = hub, size, rank, 0
        self.destroyed = False

    def _join(self, kind, args, finish):
        key = (kind, self.calls)
        self.calls += 1
        entries = self.hub.pending.setdefault(key, {})
        entries[self.rank] = args
        if len(entries) == self.size:
            finish(entries)
            del self.hub.pending[key]

    def allReduce(self, send, recv, count, dtype, op, stream):
        def finish(e):
            assert op == self.hub.NCCL_SUM and {e[r][2] for r in e} == {count}
            total = sum(self.hub.memory[e[r][0]] for r in e)
            for r in e:
                self.hub.memory[e[r][1]][...] = total

        self._join("allReduce", (send, recv, count, dtype), finish)

    def broadcast(self, send, recv, nbytes, dtype, root, stream):
        assert dtype == self.hub.NCCL_UINT8

        def finish(e):
            source = self.hub.bytes_of(e[root][0], nbytes).copy()
            for r in e:
                self.hub.bytes_of(e[r][1], nbytes)[...] = source

        self._join("broadcast", (send, recv), finish)

    def allGather(self, send, recv, nbytes, dtype, stream):
        def finish(e):
            for r in e:
                out = self.hub.bytes_of(e[r][1], nbytes * self.size)
                for s in e:
                    out[s * nbytes : (s + 1) * nbytes] = self.hub.bytes_of(e[s][0], nbytes)

        self._join("allGather", (send, recv), finish)

    def reduceScatter(self, send, recv, recvcount, dtype, op, stream):
        def finish(e):
            total = sum(self.hub.memory[e[r][0]] for r in e).reshape(-1)
            for r in e:
                chunk = total[r * recvcount : (r + 1) * recvcount]
                self.hub.memory[e[r][1]].reshape(-1)[...] = chunk

        self._join("reduceScatter", (send, recv), finish)

    def destroy(self):
        self.destroyed = True


class World:
    """The MPI world as the NCCL group sees it: rank 0's broadcast reaches rank 1."""

    def __init__(self, rank, shared, local_size=2):
        self.rank, self.size, self.local_rank, self.local_size = rank, 2, rank, local_size
        self.timeout, self.shared = 5.0, shared
        self.aborted = False

    def broadcast(self, buffer, src):
        if self.rank == src:
            self.shared["uid"] = buffer.copy()
        else:
            buffer[...] = self.shared["uid"]
        return SimpleNamespace(wait=lambda: None)

    def check_peers(self, what):
        pass

    def failure_reported(self):
        return False


def fake_cupy(devices=2):
    stream = SimpleNamespace(ptr=7, record=lambda: SimpleNamespace(done=True))

    class Device:
        def __init__(self, index):
            self.index = index

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    cuda = SimpleNamespace(
        runtime=SimpleNamespace(getDeviceCount=lambda: devices),
        Device=Device,
        get_current_stream=lambda: stream,
    )
    return SimpleNamespace(cuda=cuda)


@pytest.fixture
def pair():
    hub, shared = Hub(), {}
    groups = [NcclGroup(World(r, shared), nccl=hub, cupy=fake_cupy()) for r in range(2)]
    return hub, groups


def test_ranks_share_nccls_unique_id_and_use_one_gpu_each(pair):
    hub, (g0, g1) = pair
    assert hub.uids == [tuple(range(-64, 64))] * 2
    assert (g0.device, g1.device) == (0, 1)
    assert (g0.backend, g0.rank, g1.rank, g0.size) == ("nccl", 0, 1, 2)


def test_collectives_reach_nccl_with_the_right_counts_and_layout(pair):
    hub, (g0, g1) = pair
    a = [DeviceArray(hub, np.array([1.0, 2.0], np.float32), device=r) for r in range(2)]
    b = [DeviceArray(hub, np.array([10.0, 20.0], np.float32), device=r) for r in range(2)]
    g0.all_reduce(a[0], "sum")
    g1.all_reduce(b[1], "sum").wait()
    np.testing.assert_array_equal(a[0].host, [11.0, 22.0])
    np.testing.assert_array_equal(b[1].host, [11.0, 22.0])

    src = [DeviceArray(hub, np.array([r, r, r], np.int64), device=r) for r in range(2)]
    g0.broadcast(src[0], 1)
    g1.broadcast(src[1], 1)
    np.testing.assert_array_equal(src[0].host, [1, 1, 1])

    mine = [DeviceArray(hub, np.full(2, r + 1.0), device=r) for r in range(2)]
    outs = [DeviceArray(hub, np.zeros((2, 2)), device=r) for r in range(2)]
    g0.all_gather(mine[0], outs[0])
    g1.all_gather(mine[1], outs[1])
    np.testing.assert_array_equal(outs[1].host, [[1.0, 1.0], [2.0, 2.0]])

    full = [DeviceArray(hub, np.arange(4.0) * (r + 1), device=r) for r in range(2)]
    parts = [DeviceArray(hub, np.zeros(2), device=r) for r in range(2)]
    g0.reduce_scatter(full[0], parts[0], "sum")
    g1.reduce_scatter(full[1], parts[1], "sum")
    np.testing.assert_array_equal(parts[1].host, [6.0, 9.0])
    g0.close()
    assert g0.comm.destroyed


def test_wrong_gpu_unsupported_dtype_and_too_few_gpus(pair):
    hub, (g0, _) = pair
    with pytest.raises(DistributedError, match="uses GPU 0"):
        g0.all_reduce(DeviceArray(hub, np.ones(2, np.float32), device=1), "sum")
    with pytest.raises(TypeError, match="NCCL cannot reduce complex64"):
        g0.all_reduce(DeviceArray(hub, np.ones(2, np.complex64)), "sum")
    with pytest.raises(DistributedError, match="has 1 GPU"):
        NcclGroup(World(0, {}), nccl=hub, cupy=fake_cupy(devices=1))

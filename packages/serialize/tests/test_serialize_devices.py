"""The device matrix for sadl-serialize: device tensors save to the host formats and load back to
the device asked for (.sadl with and without mmap, bytes, safetensors, training checkpoints).

``device`` is "cpu", "strict" (the strict CuPy stand-in) or "cuda" (where a GPU is).
"""

import numpy as np
import pytest
import sadl
import sadl_serialize as ss
from sadl.backends import device_of
from sadl.testing import assert_close


def entries(device):
    rng = np.random.default_rng(0)
    host = {
        "w": rng.standard_normal((3, 4)).astype(np.float32),
        "b": rng.standard_normal(4),
        "steps": np.arange(5, dtype=np.int64),
        "mask": np.array([True, False, True]),
        "scalar": np.array(2.5),
    }
    on_device = {k: sadl.tensor(v, device=device) for k, v in host.items()}
    on_device["view"] = on_device["w"].T[1:]  # non-contiguous
    host["view"] = host["w"].T[1:]
    on_device["raw"] = on_device["b"].data  # a bare device array
    host["raw"] = host["b"]
    return host, on_device


@pytest.mark.parametrize("suffix", [".sadl", ".safetensors"])
@pytest.mark.parametrize("mmap", [False, True], ids=["read", "mmap"])
def test_device_tensors_round_trip_to_the_device_asked_for(tmp_path, suffix, mmap, device):
    host, on_device = entries(device)
    path = tmp_path / f"weights{suffix}"
    sadl.save(on_device, path)
    to_host = sadl.load(path, mmap=mmap)
    assert all(t.device == "cpu" for t in to_host.values())
    assert_close({k: t.numpy() for k, t in to_host.items()}, host, device="cpu", rtol=0, atol=0)
    back = sadl.load(path, device=device, mmap=mmap)
    assert_close(back, on_device, device=device, rtol=0, atol=0)


def test_a_single_device_tensor_and_bytes(tmp_path, device):
    t = sadl.tensor(np.linspace(0, 1, 7), device=device)
    sadl.save(t, tmp_path / "one.sadl")
    loaded = sadl.load(tmp_path / "one.sadl", device=device)
    assert_close(loaded, t, device=device, rtol=0, atol=0)
    blob = ss.dumps({"t": t, "n": t.data[2:]})
    again = ss.loads(blob, device=device)
    assert_close(again, {"t": t, "n": t[2:]}, device=device, rtol=0, atol=0)


class Tiny(sadl.Module):
    def __init__(self, device):
        super().__init__()
        rng = np.random.default_rng(1)
        self.weight = sadl.Parameter(rng.standard_normal((4, 3)), device=device)
        self.bias = sadl.Parameter(np.zeros(4), device=device)

    def forward(self, x):
        return (x @ self.weight.T + self.bias).tanh()


def trained(device, steps=3):
    model = Tiny(device)
    opt = sadl.Adam(model.parameters(), lr=0.1, amsgrad=True)
    x = sadl.tensor(np.random.default_rng(2).standard_normal((5, 3)), device=device)
    for _ in range(steps):
        opt.zero_grad()
        (model(x) ** 2).sum().backward()
        opt.step()
    return model, opt, x


def test_checkpoint_of_a_device_run_resumes_on_the_device(tmp_path, device):
    model, opt, x = trained(device)
    rng = np.random.default_rng(9)
    path = tmp_path / "run.ckpt.sadl"
    ss.save_checkpoint(
        path, model=model, optimizer=opt, step=3, rng=rng, extra={"last": model.bias.data}
    )
    fresh = Tiny(device)
    fresh_opt = sadl.Adam(fresh.parameters(), lr=0.1, amsgrad=True)
    restored_rng = np.random.default_rng(0)
    state = ss.load_checkpoint(path, model=fresh, optimizer=fresh_opt, rng=restored_rng)
    assert state["step"] == 3
    assert_close(fresh.state_dict(), model.state_dict(), device=device, rtol=0, atol=0)
    for p_old, p_new in zip(model.parameters(), fresh.parameters()):
        saved, loaded = opt.state[p_old], fresh_opt.state[p_new]
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            assert device_of(loaded[key]).type == device
            assert_close(loaded[key], saved[key], device=device, rtol=0, atol=0)
    assert restored_rng.random() == rng.random()
    # The resumed run continues exactly like the original one.
    for m, o in ((model, opt), (fresh, fresh_opt)):
        o.zero_grad()
        (m(x) ** 2).sum().backward()
        o.step()
    assert_close(fresh.state_dict(), model.state_dict(), device=device, rtol=0, atol=0)


def test_a_cpu_checkpoint_resumes_on_the_device_and_back(tmp_path, device):
    model, opt, _ = trained("cpu")
    path = tmp_path / "cpu.ckpt.sadl"
    ss.save_checkpoint(path, model=model, optimizer=opt)
    there = Tiny(device)
    there_opt = sadl.Adam(there.parameters(), lr=0.1, amsgrad=True)
    ss.load_checkpoint(path, model=there, optimizer=there_opt)
    assert_close(there.state_dict(), model.state_dict(), device=device, rtol=0, atol=0)
    assert all(
        device_of(v).type == device
        for s in there_opt.state.values()
        for v in s.values()
        if hasattr(v, "shape")
    )

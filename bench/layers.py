"""sadl-layers against PyTorch eager: training steps of a small CNN, an attention layer and an
LSTM, and exact GELU against its tanh form.

Usage: python bench/layers.py [--threads N] [--quick]

* cnn: Conv2d(3->16, 3x3, padding=1) + ReLU + MaxPool2d(2) + Flatten + Linear(16*16*16 -> 10) on
  a batch of 64 32x32 images: forward, cross-entropy, backward, SGD update.
* attention: CausalSelfAttention(n_embd=128, n_head=4) on (16, 128, 128): forward, sum loss,
  backward, SGD update. The PyTorch side is the same module written the nanoGPT way
  (c_attn, F.scaled_dot_product_attention(is_causal=True), c_proj).

* lstm: LSTM(64 -> 256) over (64 steps, batch 32, 64 features), loss sum(output * w): forward,
  backward, SGD update. PyTorch's CPU LSTM in float32 is oneDNN's fused kernel.
* gelu: sadl.ops.gelu on 1M float32 values, exact (erf) against approximate="tanh", forward
  alone and forward + backward (budget: exact <= 2x the tanh form); PyTorch's exact GELU as the
  reference column.

Both frameworks get the same weights and data, in float32, in the same process.
"""

from __future__ import annotations

from typing import Any

from _common import best_time, best_times, header, optional_torch, parse_args, row, verdict


def cnn_workloads(np: Any, sadl: Any, torch: Any) -> tuple[Any, Any]:
    from sadl_layers import Conv2d, Flatten, Linear, MaxPool2d, ReLU, Sequential, cross_entropy

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 3, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, size=64)
    model = Sequential(
        Conv2d(3, 16, 3, padding=1, rng=0),
        ReLU(),
        MaxPool2d(2),
        Flatten(),
        Linear(16 * 16 * 16, 10, rng=1),
    )
    opt = sadl.optim.SGD(model.parameters(), lr=0.01)
    xs = sadl.Tensor(x)

    def sadl_step() -> None:
        opt.zero_grad()
        loss = cross_entropy(model(xs), y)
        loss.backward()
        opt.step()

    if torch is None:
        return sadl_step, None
    nn = torch.nn
    tmodel = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 16 * 16, 10),
    )
    tmodel.load_state_dict(
        {k: torch.from_numpy(v.numpy().copy()) for k, v in model.state_dict().items()}
    )
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.01)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def torch_step() -> None:
        topt.zero_grad()
        loss = nn.functional.cross_entropy(tmodel(tx), ty)
        loss.backward()
        topt.step()

    return sadl_step, torch_step


def attention_workloads(np: Any, sadl: Any, torch: Any) -> tuple[Any, Any]:
    from sadl_layers import CausalSelfAttention

    B, T, C, H = 16, 128, 128, 4
    rng = np.random.default_rng(0)
    x = rng.standard_normal((B, T, C)).astype(np.float32)
    layer = CausalSelfAttention(C, H, rng=0)
    opt = sadl.optim.SGD(layer.parameters(), lr=1e-6)
    xs = sadl.Tensor(x, requires_grad=True)

    def sadl_step() -> None:
        opt.zero_grad()
        xs.grad = None
        layer(xs).sum().backward()
        opt.step()

    if torch is None:
        return sadl_step, None
    nn, F = torch.nn, torch.nn.functional

    class TorchCausalSelfAttention(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)

        def forward(self, x: Any) -> Any:
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    tlayer = TorchCausalSelfAttention()
    tlayer.load_state_dict(
        {k: torch.from_numpy(v.numpy().copy()) for k, v in layer.state_dict().items()}
    )
    topt = torch.optim.SGD(tlayer.parameters(), lr=1e-6)
    tx = torch.from_numpy(x).requires_grad_()

    def torch_step() -> None:
        topt.zero_grad()
        tx.grad = None
        tlayer(tx).sum().backward()
        topt.step()

    return sadl_step, torch_step


def lstm_workloads(np: Any, sadl: Any, torch: Any) -> tuple[Any, Any]:
    from sadl_layers import LSTM

    T, B, In, H = 64, 32, 64, 256
    rng = np.random.default_rng(0)
    x = rng.standard_normal((T, B, In)).astype(np.float32)
    w = rng.standard_normal((T, B, H)).astype(np.float32)
    layer = LSTM(In, H, rng=0)
    opt = sadl.optim.SGD(layer.parameters(), lr=1e-6)
    xs = sadl.Tensor(x, requires_grad=True)

    def sadl_step() -> None:
        opt.zero_grad()
        xs.grad = None
        out, _ = layer(xs)
        (out * w).sum().backward()
        opt.step()

    if torch is None:
        return sadl_step, None
    tlayer = torch.nn.LSTM(In, H)
    tlayer.load_state_dict(
        {k: torch.from_numpy(v.numpy().copy()) for k, v in layer.state_dict().items()}
    )
    topt = torch.optim.SGD(tlayer.parameters(), lr=1e-6)
    tx, tw = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w)

    def torch_step() -> None:
        topt.zero_grad()
        tx.grad = None
        out, _ = tlayer(tx)
        (out * tw).sum().backward()
        topt.step()

    return sadl_step, torch_step


def gelu_rows(np: Any, sadl: Any, torch: Any, number: int, repeat: int) -> None:
    """Exact GELU against the tanh form (sadl.ops.gelu), forward and forward + backward."""
    x = np.random.default_rng(0).standard_normal(1_000_000).astype(np.float32)
    xs = sadl.Tensor(x, requires_grad=True)

    def forward(approximate: str) -> Any:
        return lambda: sadl.ops.gelu(x, approximate=approximate)

    def both(approximate: str) -> Any:
        def run() -> None:
            xs.grad = None
            sadl.ops.gelu(xs, approximate=approximate).sum().backward()

        return run

    for label, make in (("forward", forward), ("forward + backward", both)):
        t_exact, t_tanh = best_times([make("none"), make("tanh")], number=number, repeat=repeat)
        reference = f"tanh form {t_tanh * 1e3:.2f} ms"
        if torch is not None:
            tx = torch.from_numpy(x).requires_grad_(label != "forward")

            def torch_run(tx: Any = tx, backward: bool = label != "forward") -> None:
                y = torch.nn.functional.gelu(tx)
                if backward:
                    tx.grad = None
                    y.sum().backward()

            t_torch = best_time(torch_run, number=number, repeat=repeat)
            reference += f"; torch exact {t_torch * 1e3:.2f} ms"
        ratio = t_exact / t_tanh
        row(
            f"exact GELU vs tanh GELU, 1M float32, {label}",
            f"{t_exact * 1e3:.2f} ms",
            reference,
            f"{ratio:.2f} (exact / tanh)",
            verdict(ratio <= 2.0, "budget <= 2"),
        )


def main() -> int:
    args = parse_args(__doc__ or "")
    import numpy as np
    import sadl

    torch = optional_torch()
    header("sadl-layers vs PyTorch eager", args.threads)
    number = 3 if args.quick else 10
    repeat = 2 if args.quick else 5
    for name, make in (
        ("cnn step: Conv2d(3->16,3x3)+ReLU+MaxPool2d+Linear, 64x3x32x32", cnn_workloads),
        ("attention step: CausalSelfAttention(128, 4 heads), 16x128", attention_workloads),
        ("lstm step: LSTM(64->256), 64 steps x batch 32", lstm_workloads),
    ):
        sadl_step, torch_step = make(np, sadl, torch)
        if torch_step is None:
            t_sadl = best_time(sadl_step, number=number, repeat=repeat)
            row(name, f"{t_sadl * 1e3:.2f} ms", "n/a", "n/a", "PyTorch not installed")
            continue
        t_sadl, t_torch = best_times([sadl_step, torch_step], number=number, repeat=repeat)
        row(
            name,
            f"{t_sadl * 1e3:.2f} ms",
            f"{t_torch * 1e3:.2f} ms",
            f"{t_sadl / t_torch:.2f}",
            "forward + loss + backward + SGD step, float32",
        )
    gelu_rows(np, sadl, torch, number, repeat)
    return 0


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    raise SystemExit(main())

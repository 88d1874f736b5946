"""Muon against Keller Jordan's reference algorithm (written here in torch, float64) and against
torch.optim.Muon; LAMB against the paper's update rule in NumPy (torch has no LAMB). Step for
step over 30 steps."""

import numpy as np
import pytest
import sadl
from optim_problems import PROBLEMS, assert_same_trajectory, sadl_params, train_sadl
from sadl_optim import LAMB, Muon

STEPS = 30


# ------------------------------------------------------------------------------------ Muon
def _matrix_problem():
    """A 4-8-2 tanh network without biases: every parameter is a matrix, as Muon wants."""
    rng = np.random.default_rng(99)
    x = rng.standard_normal((16, 4))
    y = np.stack([np.sin(x[:, 0]) + x[:, 1], x[:, 2] * x[:, 3]], axis=1)
    init = [rng.standard_normal((8, 4)) * 0.5, rng.standard_normal((2, 8)) * 0.5]

    def loss(params, consts):
        w1, w2 = params
        xs, ys = consts
        return (((xs @ w1.T).tanh() @ w2.T - ys) ** 2).mean()

    return init, [x, y], loss


def zeropower_via_newtonschulz5(G, steps, clamp=False):
    """Keller Jordan's reference (KellerJordan/Muon, muon.py), in float64 instead of bfloat16.

    The reference divides by ``norm + 1e-7``; torch.optim.Muon (whose signature sadl follows,
    with its ``eps``) by ``max(norm, eps)``: ``clamp`` picks torch's form.
    """
    assert G.ndim >= 2
    a, b, c = (3.4445, -4.7750, 2.0315)
    X = G.clone()
    if G.size(-2) > G.size(-1):
        X = X.mT
    norm = X.norm(dim=(-2, -1), keepdim=True)
    X = X / (norm.clamp(min=1e-7) if clamp else norm + 1e-7)
    for _ in range(steps):
        A = X @ X.mT
        B = b * A + c * A @ A
        X = a * X + B @ X
    if G.size(-2) > G.size(-1):
        X = X.mT
    return X


def muon_update(grad, momentum, beta=0.95, ns_steps=5, nesterov=True, clamp=False):
    """The reference's update: momentum, Nesterov, orthogonalisation, shape scaling."""
    momentum.lerp_(grad, 1 - beta)
    update = grad.lerp_(momentum, beta) if nesterov else momentum
    if update.ndim == 4:
        update = update.view(len(update), -1)
    update = zeropower_via_newtonschulz5(update, steps=ns_steps, clamp=clamp)
    update *= max(1, grad.size(-2) / grad.size(-1)) ** 0.5
    return update


def reference_muon(torch, steps, lr, weight_decay, momentum, nesterov, clamp):
    init, consts, loss = _matrix_problem()
    params = [torch.tensor(v, requires_grad=True) for v in init]
    tconsts = [torch.tensor(c) for c in consts]
    buffers = [torch.zeros_like(p) for p in params]
    trajectory = []
    for _ in range(steps):
        for p in params:
            p.grad = None
        loss(params, tconsts).backward()
        with torch.no_grad():
            for p, buf in zip(params, buffers):
                update = muon_update(
                    p.grad.clone(), buf, beta=momentum, nesterov=nesterov, clamp=clamp
                )
                p.mul_(1 - lr * weight_decay)
                p.add_(update.reshape(p.shape), alpha=-lr)
        trajectory.append([p.detach().numpy().copy() for p in params])
    return trajectory


def sadl_muon(steps, **kwargs):
    init, consts, loss = _matrix_problem()
    params = [sadl.Parameter(v.copy()) for v in init]
    opt = Muon(params, **kwargs)
    tconsts = [sadl.tensor(c) for c in consts]
    trajectory = []
    for _ in range(steps):
        opt.zero_grad()
        loss(params, tconsts).backward()
        opt.step()
        trajectory.append([p.data.copy() for p in params])
    return trajectory


@pytest.mark.torch
@pytest.mark.parametrize(
    "kwargs",
    [
        {"lr": 0.02, "weight_decay": 0.0, "momentum": 0.95, "nesterov": True},
        {"lr": 0.01, "weight_decay": 0.1, "momentum": 0.9, "nesterov": True},
        {"lr": 0.02, "weight_decay": 0.01, "momentum": 0.8, "nesterov": False},
    ],
)
@pytest.mark.parametrize(("clamp", "atol"), [(False, 1e-6), (True, 1e-9)], ids=["ref", "torch-eps"])
def test_muon_equals_the_reference_algorithm_step_by_step(kwargs, clamp, atol):
    torch = pytest.importorskip("torch", reason="the reference is written in torch")
    got = sadl_muon(STEPS, **kwargs)
    want = reference_muon(torch, STEPS, clamp=clamp, **kwargs)
    assert_same_trajectory(got, want, atol=atol)


@pytest.mark.torch
def test_muon_equals_torch_optim_muon_up_to_its_bfloat16_iteration():
    torch = pytest.importorskip("torch", reason="torch.optim.Muon is the reference")
    if not hasattr(torch.optim, "Muon"):
        pytest.skip("this torch has no torch.optim.Muon")
    init, consts, loss = _matrix_problem()
    kwargs = {"lr": 0.02, "weight_decay": 0.1, "momentum": 0.95}
    params = [torch.tensor(v, requires_grad=True) for v in init]
    opt = torch.optim.Muon(params, **kwargs)
    tconsts = [torch.tensor(c) for c in consts]
    ours = sadl_muon(1, **kwargs)[0]
    loss(params, tconsts).backward()
    before = [p.detach().numpy().copy() for p in params]
    opt.step()
    for got, p, b in zip(ours, params, before):
        step, tstep = got - b, p.detach().numpy() - b
        # torch orthogonalises in bfloat16 (8 significant bits): agreement to a few percent
        np.testing.assert_allclose(step, tstep, rtol=0, atol=0.05 * np.abs(tstep).max())
        cosine = (step * tstep).sum() / np.linalg.norm(step) / np.linalg.norm(tstep)
        assert cosine > 0.999


def test_muon_update_is_orthogonal_and_shape_scaled():
    g = np.random.default_rng(0).standard_normal((6, 3))
    p = sadl.Parameter(np.zeros((6, 3)))
    opt = Muon([p], lr=1.0, weight_decay=0.0, momentum=0.0, nesterov=False, ns_steps=10)
    p.grad = g
    opt.step()
    o = -p.data / np.sqrt(6 / 3)
    s = np.linalg.svd(o, compute_uv=False)
    assert np.all((s > 0.6) & (s < 1.3)), s  # the quintic drives singular values near 1


def test_muon_flattens_conv_filters_and_refuses_vectors():
    w = sadl.Parameter(np.random.default_rng(1).standard_normal((4, 2, 3, 3)))
    opt = Muon([w], lr=0.01)
    w.grad = np.ones_like(w.data)
    opt.step()
    assert w.shape == (4, 2, 3, 3) and np.isfinite(w.data).all()
    with pytest.raises(ValueError, match=r"shape \(3,\) is not a matrix.*AdamW"):
        Muon([sadl.Parameter(np.ones(3))])
    with pytest.raises(ValueError, match="invalid ns_coefficients"):
        Muon([w], ns_coefficients=(1.0, 2.0))
    with pytest.raises(ValueError, match="invalid adjust_lr_fn"):
        Muon([w], adjust_lr_fn="rms")
    with pytest.raises(ValueError, match=r"invalid momentum=1\.0"):
        Muon([w], momentum=1.0)


@pytest.mark.torch
def test_muon_match_rms_adamw_scaling_equals_torch():
    torch = pytest.importorskip("torch", reason="torch.optim.Muon is the reference")
    if not hasattr(torch.optim, "Muon"):
        pytest.skip("this torch has no torch.optim.Muon")
    from torch.optim._muon import _adjust_lr

    for shape in [(8, 4), (2, 8), (5, 5)]:
        for fn in (None, "original", "match_rms_adamw"):
            p = sadl.Parameter(np.zeros(shape))
            opt = Muon([p], lr=0.1, weight_decay=0.0, momentum=0.0, adjust_lr_fn=fn)
            p.grad = np.eye(*shape)  # orthogonal already: NS keeps its direction
            opt.step()
            ratio = (
                np.abs(p.data).max() / np.abs(np.asarray(sadl_muon_direction(np.eye(*shape)))).max()
            )
            assert ratio == pytest.approx(_adjust_lr(0.1, fn, torch.Size(shape)), rel=1e-12)


def sadl_muon_direction(g):
    from sadl_optim.matrix import NS_COEFFICIENTS, newton_schulz

    return newton_schulz(g, NS_COEFFICIENTS, 5, 1e-7)


# ------------------------------------------------------------------------------------ LAMB
def reference_lamb(problem, lr, betas, eps, weight_decay, steps):
    """You et al. (2019), Algorithm 2, per parameter (layer), with bias-corrected moments."""
    beta1, beta2 = betas
    thetas = [v.copy() for v in problem.init]
    m = [np.zeros_like(v) for v in thetas]
    v = [np.zeros_like(t) for t in thetas]
    trajectory = []
    for t in range(1, steps + 1):
        grads = problem.grad(thetas, problem.consts)
        for i, g in enumerate(grads):
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            m_hat = m[i] / (1 - beta1**t)
            v_hat = v[i] / (1 - beta2**t)
            r = m_hat / (np.sqrt(v_hat) + eps) + weight_decay * thetas[i]
            w_norm, r_norm = np.linalg.norm(thetas[i]), np.linalg.norm(r)
            trust = w_norm / r_norm if w_norm > 0 and r_norm > 0 else 1.0
            thetas[i] = thetas[i] - lr * trust * r
        trajectory.append([x.copy() for x in thetas])
    return trajectory


@pytest.mark.parametrize("problem_name", sorted(PROBLEMS))
@pytest.mark.parametrize(
    "kwargs",
    [
        {"lr": 0.01},
        {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-8, "weight_decay": 0.1},
    ],
)
def test_lamb_equals_the_paper_rule_step_by_step(problem_name, kwargs):
    problem = PROBLEMS[problem_name]()
    params = sadl_params(problem)
    got = train_sadl(problem, params, LAMB(params, **kwargs), STEPS)
    full = {"betas": (0.9, 0.999), "eps": 1e-6, "weight_decay": 0.0, **kwargs}
    assert_same_trajectory(got, reference_lamb(problem, steps=STEPS, **full))


def test_lamb_trust_ratio_is_one_for_a_zero_parameter():
    p = sadl.Parameter(np.zeros(3))
    opt = LAMB([p], lr=0.1)
    p.grad = np.array([1.0, -2.0, 0.5])
    opt.step()
    np.testing.assert_allclose(p.data, -0.1 * np.sign(p.grad), rtol=1e-5)

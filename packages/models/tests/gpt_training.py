"""The training step the models tests run eagerly and under ``sadl.compile``."""


def train_step(model, opt):
    """``step(x, y)``: the loss of ``model`` on inputs x and targets y, its gradients, then
    ``opt.step()``; the step returns the loss (a Tensor)."""

    def step(x, y):
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return step

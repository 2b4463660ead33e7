"""micrograd's torch cross-check, re-written: scalar expressions built from +, *, **, /, relu,
backward, and the values and gradients read back with .data.item() / .grad.item()."""
import autograd_core as torch


def sanity_check():
    x = torch.Tensor([-4.0]).double()
    x.requires_grad = True
    z = 2 * x + 2 + x
    q = z.relu() + z * x
    h = (z * z).relu()
    y = h + q + q * x
    y.backward()
    return y.data.item(), x.grad.item()


def more_ops():
    a = torch.Tensor([-4.0]).double()
    b = torch.Tensor([2.0]).double()
    a.requires_grad = True
    b.requires_grad = True
    c = a + b
    d = a * b + b ** 3
    c = c + c + 1
    c = c + 1 + c + (-a)
    d = d + d * 2 + (b + a).relu()
    d = d + 3 * d + (b - a).relu()
    e = c - d
    f = e ** 2
    g = f / 2.0
    g = g + 10.0 / f
    g.backward()
    return g.data.item(), a.grad.item(), b.grad.item()


def main(init=None):
    y, xg = sanity_check()
    g, ag, bg = more_ops()
    return {"sanity": [y, xg], "more_ops": [g, ag, bg], "init": {}}


if __name__ == "__main__":
    print(main())

"""The autograd tutorial, re-written: a one-layer logistic model's gradients, grad_fn names,
no_grad / detach, and vector-Jacobian products accumulated over repeated backward calls."""
import numpy as np
import autograd_core as torch
from autograd_core.autograd import Variable


def main(init=None):
    rng = np.random.RandomState(0)
    x = torch.ones(5)
    y = torch.zeros(3)
    w0 = rng.randn(5, 3).astype(np.float32) if init is None else init["w"]
    b0 = rng.randn(3).astype(np.float32) if init is None else init["b"]
    w = torch.tensor(w0, requires_grad=True)
    b = Variable(torch.tensor(b0), requires_grad=True)
    z = torch.matmul(x, w) + b
    loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
    names = [type(z.grad_fn).__name__, type(loss.grad_fn).__name__]
    loss.backward()
    out = {"loss": loss.item(), "w_grad": w.grad.numpy().copy(), "b_grad": b.grad.numpy().copy(),
           "names": " ".join(names), "is_variable": str(isinstance(w, Variable))}
    z = torch.matmul(x, w) + b
    req = [z.requires_grad]
    with torch.no_grad():
        z = torch.matmul(x, w) + b
    req.append(z.requires_grad)
    z = torch.matmul(x, w) + b
    z_det = z.detach()
    req.append(z_det.requires_grad)
    out["requires_grad"] = " ".join(map(str, req))

    inp = torch.eye(4, 5, requires_grad=True)
    res = (inp + 1).pow(2).t()
    res.backward(torch.ones_like(res), retain_graph=True)
    first = inp.grad.numpy().copy()
    res.backward(torch.ones_like(res), retain_graph=True)
    second = inp.grad.numpy().copy()
    inp.grad.zero_()
    res.backward(torch.ones_like(res), retain_graph=True)
    out["vjp"] = [first, second, inp.grad.numpy().copy()]
    out["init"] = {"w": w0, "b": b0}
    return out


if __name__ == "__main__":
    print(main())

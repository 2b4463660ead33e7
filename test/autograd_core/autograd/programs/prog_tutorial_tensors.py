"""The tensors tutorial, re-written: creation from data / NumPy / shapes, attributes, indexing,
joining, arithmetic (matmul three ways, mul and out=), in-place ops, the NumPy bridge."""
import numpy as np
import autograd_core as torch


def main(init=None):
    data = [[1, 2], [3, 4]]
    x_data = torch.tensor(data)
    np_array = np.array(data)
    x_np = torch.from_numpy(np_array)
    x_ones = torch.ones_like(x_data)
    x_rand = torch.rand_like(x_data, dtype=torch.float)
    shape = (2, 3,)
    ones_tensor = torch.ones(shape)
    zeros_tensor = torch.zeros(shape)
    out = {"x_data": x_data.numpy(), "x_np": x_np.numpy(), "x_ones": x_ones.numpy(),
           "rand_shape": list(x_rand.shape), "ones": ones_tensor.numpy(), "zeros": zeros_tensor.numpy()}

    tensor = torch.tensor(np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4))
    out["attrs"] = f"{tensor.shape} {tensor.dtype} {tensor.device}"
    device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else "cpu"
    tensor = tensor.to(device)
    out["first_row"] = tensor[0].numpy().copy()
    out["first_col"] = tensor[:, 0].numpy().copy()
    out["last_col"] = tensor[..., -1].numpy().copy()
    out["rows_by_range"] = tensor[range(2)].numpy().copy()
    tensor[:, 1] = 0
    t1 = torch.cat([tensor, tensor, tensor], dim=1)
    out["cat"] = t1.numpy().copy()

    y1 = tensor @ tensor.T
    y2 = tensor.matmul(tensor.T)
    y3 = torch.rand_like(y1)
    torch.matmul(tensor, tensor.T, out=y3)
    y4 = torch.matmul(input=tensor, other=tensor.T)
    z1 = tensor * tensor
    z2 = tensor.mul(tensor)
    z3 = torch.rand_like(tensor)
    torch.mul(tensor, tensor, out=z3)
    out["matmuls"] = [y1.numpy(), y2.numpy(), y3.numpy(), y4.numpy()]
    out["muls"] = [z1.numpy(), z2.numpy(), z3.numpy()]
    agg = tensor.sum()
    agg_item = agg.item()
    out["agg"] = agg_item
    tensor.add_(5)
    out["added"] = tensor.numpy().copy()

    t = torch.ones(5)
    n = t.numpy()
    t.add_(1)
    out["bridge_t2n"] = n.copy()
    n = np.ones(5)
    t = torch.from_numpy(n)
    np.add(n, 1, out=n)
    out["bridge_n2t"] = t.numpy().copy()
    out["tril"] = torch.tril(torch.ones(3, 3)).numpy()
    out["triu"] = torch.ones(3, 4).triu(diagonal=1).numpy()
    vals, idx = torch.topk(torch.tensor([0.5, 2.0, -1.0, 3.0, 1.0]), 3)
    out["topk"] = [vals.numpy(), idx.numpy()]
    out["new"] = [tensor.new_zeros(2, 3).numpy(), tensor.new_ones((2,)).numpy(), tensor.new_full((2, 2), 7.0).numpy(),
                  tensor.new_tensor([1, 2]).numpy(), list(tensor.new_empty(3, 1).shape)]
    out["init"] = {}
    return out


if __name__ == "__main__":
    for k, v in main().items():
        print(k, v)

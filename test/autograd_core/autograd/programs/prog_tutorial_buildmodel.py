"""The build-the-model tutorial, re-written: a module's layers one by one (Flatten, Linear, ReLU,
Sequential, Softmax), named_parameters, and the logits -> probabilities -> class path."""
import numpy as np
import autograd_core as torch
from autograd_core import nn


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(nn.Linear(6 * 6, 24), nn.ReLU(), nn.Linear(24, 24), nn.ReLU(),
                                               nn.Linear(24, 10))

    def forward(self, x):
        x = self.flatten(x)
        return self.linear_relu_stack(x)


def main(init=None):
    model = NeuralNetwork()
    if init is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    start = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    X = torch.tensor(np.random.RandomState(3).rand(1, 6, 6).astype(np.float32))
    logits = model(X)
    pred_probab = nn.Softmax(dim=1)(logits)
    y_pred = pred_probab.argmax(1)
    input_image = torch.tensor(np.random.RandomState(4).rand(3, 6, 6).astype(np.float32))
    flat_image = nn.Flatten()(input_image)
    layer1 = nn.Linear(in_features=6 * 6, out_features=20)
    hidden1 = layer1(flat_image)
    hidden1 = nn.ReLU()(hidden1)
    seq_modules = nn.Sequential(nn.Flatten(), nn.Linear(36, 20), nn.ReLU(), nn.Linear(20, 10))
    logits2 = seq_modules(input_image)
    names = [f"{name} {tuple(param.size())}" for name, param in model.named_parameters()]
    return {"probab": pred_probab.detach().numpy(), "pred": int(y_pred.item()), "flat": list(flat_image.size()),
            "hidden": list(hidden1.shape), "logits2": list(logits2.shape), "names": "; ".join(names),
            "init": start}


if __name__ == "__main__":
    print(main())

"""The quickstart tutorial, re-written on synthetic 8x8 "images": DataLoader over a TensorDataset,
a Flatten + Sequential MLP, CrossEntropyLoss, SGD, train/test loops, save and load the weights."""
import os
import tempfile

import numpy as np
import autograd_core as torch
from autograd_core import nn
from autograd_core.utils.data import DataLoader, TensorDataset

device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"


def make_data(n, seed):
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 10, size=n)
    protos = np.random.RandomState(99).randn(10, 1, 8, 8)
    images = protos[labels] + 0.8 * rng.randn(n, 1, 8, 8)
    return TensorDataset(torch.tensor(images, dtype=torch.float32), torch.tensor(labels))


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(8 * 8, 32),
            nn.ReLU(),
            nn.Linear(32, 32),
            nn.ReLU(),
            nn.Linear(32, 10),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits


def train(dataloader, model, loss_fn, optimizer):
    size = len(dataloader.dataset)
    model.train()
    losses = []
    for batch, (X, y) in enumerate(dataloader):
        X, y = X.to(device), y.to(device)
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        if batch % 4 == 0:
            current = (batch + 1) * len(X)
            _ = f"loss: {loss.item():>7f}  [{current:>5d}/{size:>5d}]"
    return losses


def test(dataloader, model, loss_fn):
    size = len(dataloader.dataset)
    num_batches = len(dataloader)
    model.eval()
    test_loss, correct = 0, 0
    with torch.no_grad():
        for X, y in dataloader:
            X, y = X.to(device), y.to(device)
            pred = model(X)
            test_loss += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).type(torch.float).sum().item()
    test_loss /= num_batches
    correct /= size
    return test_loss, correct


def main(init=None, epochs=3, batch_size=16, order_seed=0):
    training_data, test_data = make_data(160, 1), make_data(64, 2)
    # a fixed shuffled order per epoch (a batch sampler), so another framework can replay it
    order = np.random.RandomState(order_seed)
    batches = [[list(map(int, b)) for b in np.array_split(order.permutation(160), 160 // batch_size)]
               for _ in range(epochs)]
    test_dataloader = DataLoader(test_data, batch_size=batch_size)
    model = NeuralNetwork().to(device)
    if init is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    start = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses, tests = [], []
    for t in range(epochs):
        train_dataloader = DataLoader(training_data, batch_sampler=batches[t])
        losses += train(train_dataloader, model, loss_fn, optimizer)
        tests.append(list(test(test_dataloader, model, loss_fn)))
    path = os.path.join(tempfile.mkdtemp(), "model.pth")
    torch.save(model.state_dict(), path)
    model2 = NeuralNetwork().to(device)
    model2.load_state_dict(torch.load(path, weights_only=True))
    model2.eval()
    x, y = test_data[0][0], test_data[0][1]
    with torch.no_grad():
        x = x.to(device)
        pred = model2(x.unsqueeze(0))
    return {"losses": losses, "tests": tests, "reloaded_pred": pred.numpy(), "label": int(y), "init": start}


if __name__ == "__main__":
    r = main()
    print("first/last loss", r["losses"][0], r["losses"][-1], "test (loss, accuracy)", r["tests"][-1])

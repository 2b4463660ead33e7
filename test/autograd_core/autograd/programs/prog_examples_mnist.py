"""pytorch/examples mnist, re-written at 12x12 on synthetic digits: two convs, max-pool, dropout,
flatten, log_softmax + nll_loss, Adadelta with StepLR, train()/eval() and the accuracy loop."""
import numpy as np
import autograd_core as torch
import autograd_core.nn as nn
import autograd_core.nn.functional as F
import autograd_core.optim as optim
from autograd_core.optim.lr_scheduler import StepLR
from autograd_core.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, p1=0.25, p2=0.5):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout1 = nn.Dropout(p1)
        self.dropout2 = nn.Dropout(p2)
        self.fc1 = nn.Linear(128, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def train(model, device, train_loader, optimizer, epoch, log_interval=2):
    model.train()
    losses = []
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if batch_idx % log_interval == 0:
            _ = 'Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item())
    return losses


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    return test_loss, correct


def digits(n, seed):
    rng = np.random.RandomState(seed)
    y = rng.randint(0, 10, n)
    protos = np.random.RandomState(123).rand(10, 1, 12, 12)
    x = (protos[y] + 0.3 * rng.randn(n, 1, 12, 12) - 0.1307) / 0.3081
    return TensorDataset(torch.tensor(x, dtype=torch.float32), torch.tensor(y))


def main(init=None, epochs=2, p1=0.25, p2=0.5, shuffle=False):
    torch.manual_seed(1)
    use_accel = torch.accelerator.is_available()
    device = torch.accelerator.current_accelerator() if use_accel else torch.device("cpu")
    train_kwargs = {'batch_size': 16}
    test_kwargs = {'batch_size': 32}
    if use_accel:
        train_kwargs.update({'num_workers': 1, 'pin_memory': True, 'shuffle': True})
    train_loader = DataLoader(digits(96, 1), shuffle=shuffle, **train_kwargs)
    test_loader = DataLoader(digits(64, 2), **test_kwargs)
    model = Net(p1, p2).to(device)
    if init is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    start = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    losses, tests = [], []
    for epoch in range(1, epochs + 1):
        losses += train(model, device, train_loader, optimizer, epoch)
        tests.append(list(test(model, device, test_loader)))
        scheduler.step()
    return {"losses": losses, "tests": tests, "lr": optimizer.param_groups[0]["lr"], "init": start}


if __name__ == "__main__":
    r = main(shuffle=True)
    print("losses", r["losses"][0], r["losses"][-1], "test (loss, correct)", r["tests"][-1])

"""pytorch/examples mnist_rnn, re-written at 10x10: an LSTM over image rows (batch_first), the last
step through BatchNorm1d, Dropout2d on the 2-D features (torch warns), two Linear layers,
log_softmax, Adadelta + StepLR."""
import warnings

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
        self.rnn = nn.LSTM(input_size=10, hidden_size=16, batch_first=True)
        self.batchnorm = nn.BatchNorm1d(16)
        self.dropout1 = nn.Dropout2d(p1)
        self.dropout2 = nn.Dropout2d(p2)
        self.fc1 = nn.Linear(16, 12)
        self.fc2 = nn.Linear(12, 10)

    def forward(self, input):
        input = input.reshape(-1, 10, 10)
        output, hidden = self.rnn(input)
        output = output[:, -1, :]
        output = self.batchnorm(output)
        output = self.dropout1(output)
        output = self.fc1(output)
        output = F.relu(output)
        output = self.dropout2(output)
        output = self.fc2(output)
        output = F.log_softmax(output, dim=1)
        return output


def main(init=None, epochs=2, p1=0.25, p2=0.5):
    rng = np.random.RandomState(0)
    y = rng.randint(0, 10, 64)
    x = np.random.RandomState(9).rand(10, 1, 10, 10)[y] + 0.2 * rng.randn(64, 1, 10, 10)
    train_loader = DataLoader(TensorDataset(torch.tensor(x, dtype=torch.float32), torch.tensor(y)), batch_size=16)
    model = Net(p1, p2)
    if init is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    start = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = optim.Adadelta(model.parameters(), lr=0.1)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    losses = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for epoch in range(1, epochs + 1):
            model.train()
            for batch_idx, (data, target) in enumerate(train_loader):
                optimizer.zero_grad()
                output = model(data)
                loss = F.nll_loss(output, target)
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            scheduler.step()
    dropout_warnings = sorted({str(w.message)[:60] for w in caught if "dropout2d" in str(w.message)})
    model.eval()
    with torch.no_grad():
        out = model(torch.tensor(x[:8], dtype=torch.float32))
    return {"losses": losses, "eval_out": out.numpy(), "dropout_warnings": dropout_warnings,
            "running_mean": model.batchnorm.running_mean.numpy(), "init": start}


if __name__ == "__main__":
    r = main()
    print("losses", r["losses"][0], r["losses"][-1], r["dropout_warnings"])

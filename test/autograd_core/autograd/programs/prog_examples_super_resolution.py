"""pytorch/examples super_resolution, re-written on synthetic images: four convolutions with
orthogonal init and ReLU, PixelShuffle(3), MSELoss, Adam, PSNR on a test set."""
from math import log10

import numpy as np
import autograd_core as torch
import autograd_core.nn as nn
import autograd_core.nn.init as init
import autograd_core.optim as optim
from autograd_core.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super(Net, self).__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 16, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(16, 16, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(16, 8, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(8, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        x = self.pixel_shuffle(self.conv4(x))
        return x

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv2.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv3.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv4.weight)


def pairs(n, seed, r=3):
    rng = np.random.RandomState(seed)
    hi = np.zeros((n, 1, 6 * r, 6 * r), np.float32)
    yy, xx = np.mgrid[0:6 * r, 0:6 * r] / (6.0 * r)
    for i in range(n):
        fx, fy, ph = rng.uniform(0.5, 2.0, 3)
        hi[i, 0] = 0.5 + 0.5 * np.sin(2 * np.pi * (fx * xx + fy * yy) + ph)
    lo = hi.reshape(n, 1, 6, r, 6, r).mean(axis=(3, 5))
    return TensorDataset(torch.tensor(lo), torch.tensor(hi))


def main(init=None, epochs=2):
    torch.manual_seed(123)
    training_data_loader = DataLoader(dataset=pairs(24, 0), batch_size=8, shuffle=False)
    testing_data_loader = DataLoader(dataset=pairs(8, 1), batch_size=4, shuffle=False)
    model = Net(upscale_factor=3)
    if init is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    start = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    criterion = nn.MSELoss()
    optimizer = optim.Adam(model.parameters(), lr=0.003)
    losses, psnrs = [], []
    for epoch in range(1, epochs + 1):
        for iteration, batch in enumerate(training_data_loader, 1):
            input, target = batch[0], batch[1]
            optimizer.zero_grad()
            loss = criterion(model(input), target)
            losses.append(loss.item())
            loss.backward()
            optimizer.step()
        avg_psnr = 0
        with torch.no_grad():
            for batch in testing_data_loader:
                input, target = batch[0], batch[1]
                prediction = model(input)
                mse = criterion(prediction, target)
                psnr = 10 * log10(1 / mse.item())
                avg_psnr += psnr
        psnrs.append(avg_psnr / len(testing_data_loader))
    unshuffled = nn.PixelUnshuffle(3)(prediction)
    return {"losses": losses, "psnr": psnrs, "out_shape": list(prediction.shape),
            "unshuffled": unshuffled.numpy(), "init": start}


if __name__ == "__main__":
    r = main()
    print("loss", r["losses"][0], "->", r["losses"][-1], "PSNR", r["psnr"])

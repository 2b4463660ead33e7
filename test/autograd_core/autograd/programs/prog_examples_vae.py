"""pytorch/examples vae, re-written on 8x8 synthetic images: encoder/decoder Linear layers, the
reparameterisation trick (randn_like), BCE(reduction='sum') + KL loss, Adam, a test pass and
sampling from the prior under no_grad."""
import numpy as np
import autograd_core as torch
from autograd_core import nn, optim
from autograd_core.nn import functional as F
from autograd_core.utils.data import DataLoader, TensorDataset

D = 64


class VAE(nn.Module):
    def __init__(self):
        super(VAE, self).__init__()
        self.fc1 = nn.Linear(D, 32)
        self.fc21 = nn.Linear(32, 4)
        self.fc22 = nn.Linear(32, 4)
        self.fc3 = nn.Linear(4, 32)
        self.fc4 = nn.Linear(32, D)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, D))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, D), reduction='sum')
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def main(init=None, epochs=2):
    rng = np.random.RandomState(0)
    images = (rng.rand(48, 1, 8, 8) > 0.6).astype(np.float32) * 0.9 + 0.05
    train_loader = DataLoader(TensorDataset(torch.tensor(images[:32]), torch.zeros(32)), batch_size=8)
    test_loader = DataLoader(TensorDataset(torch.tensor(images[32:]), torch.zeros(16)), batch_size=8)
    model = VAE()
    if init is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    start = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    losses, test_losses = [], []
    for epoch in range(1, epochs + 1):
        model.train()
        train_loss = 0
        for batch_idx, (data, _) in enumerate(train_loader):
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data)
            loss = loss_function(recon_batch, data, mu, logvar)
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
            losses.append(loss.item() / len(data))
        model.eval()
        test_loss = 0
        with torch.no_grad():
            for i, (data, _) in enumerate(test_loader):
                recon_batch, mu, logvar = model(data)
                test_loss += loss_function(recon_batch, data, mu, logvar).item()
                if i == 0:
                    n = min(data.size(0), 8)
                    comparison = torch.cat([data[:n], recon_batch.view(8, 1, 8, 8)[:n]])
        test_losses.append(test_loss / len(test_loader.dataset))
        with torch.no_grad():
            sample = torch.randn(16, 4)
            sample = model.decode(sample).cpu()
    return {"losses": losses, "test_losses": test_losses, "comparison": list(comparison.shape),
            "sample": sample.numpy(), "init": start}


if __name__ == "__main__":
    r = main()
    print("train", r["losses"][0], r["losses"][-1], "test", r["test_losses"])

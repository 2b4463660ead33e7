"""pytorch/examples time_sequence_prediction, re-written smaller: two LSTMCells and a Linear in
float64 unrolled over sine waves, MSELoss, LBFGS(lr=0.8) with a closure, then predicting the
future under no_grad."""
import numpy as np
import autograd_core as torch
import autograd_core.nn as nn
import autograd_core.optim as optim

H = 12


class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, H)
        self.lstm2 = nn.LSTMCell(H, H)
        self.linear = nn.Linear(H, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), H, dtype=torch.double)
        c_t = torch.zeros(input.size(0), H, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), H, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), H, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


def main(init=None, steps=2, line_search_fn=None):
    np.random.seed(2)
    T, L, N = 20, 24, 8
    x = np.empty((N, L), 'int64')
    x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
    data = np.sin(x / 1.0 / T).astype('float64')
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    seq = Sequence()
    seq.double()
    if init is not None:
        seq.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    start = {k: v.detach().numpy().copy() for k, v in seq.state_dict().items()}
    criterion = nn.MSELoss()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, line_search_fn=line_search_fn)
    closure_losses, test_losses = [], []
    for i in range(steps):
        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            closure_losses.append(loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
        with torch.no_grad():
            future = 10
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            test_losses.append(loss.item())
            y = pred.detach().numpy()
    return {"closure_losses": closure_losses, "test_losses": test_losses, "prediction": y, "init": start}


if __name__ == "__main__":
    r = main()
    print("closure calls", len(r["closure_losses"]), "test losses", r["test_losses"])

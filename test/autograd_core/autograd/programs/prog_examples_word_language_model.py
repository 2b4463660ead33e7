"""pytorch/examples word_language_model, re-written on a synthetic corpus: batchify with narrow,
Embedding -> LSTM/GRU/RNN_TANH (2 layers, dropout) -> tied Linear decoder, init_hidden with
weight.new_zeros, truncated BPTT with repackaged hidden state, NLLLoss, clip_grad_norm_ and the
manual SGD update p.data.add_(p.grad, alpha=-lr); evaluation perplexity with math.exp."""
import math

import numpy as np
import autograd_core as torch
import autograd_core.nn as nn
import autograd_core.nn.functional as F


class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super(RNNModel, self).__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ['LSTM', 'GRU']:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            nonlinearity = {'RNN_TANH': 'tanh', 'RNN_RELU': 'relu'}[rnn_type]
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            if nhid != ninp:
                raise ValueError('When using the tied flag, nhid must be equal to emsize')
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == 'LSTM':
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))
        else:
            return weight.new_zeros(self.nlayers, bsz, self.nhid)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    data = data.view(bsz, -1).t().contiguous()
    return data


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    else:
        return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def corpus(ntokens, n, seed):
    rng = np.random.RandomState(seed)
    # a Markov chain, so there is something to learn
    trans = rng.dirichlet(np.full(ntokens, 0.3), size=ntokens)
    ids = [0]
    for _ in range(n - 1):
        ids.append(rng.choice(ntokens, p=trans[ids[-1]]))
    return torch.tensor(ids, dtype=torch.long)


def main(init=None, model_type="LSTM", dropout=0.2, epochs=2, lr=20.0, clip=0.25, bptt=7, tied=True):
    torch.manual_seed(1111)
    ntokens = 23
    train_data = batchify(corpus(ntokens, 300, 0), 6)
    val_data = batchify(corpus(ntokens, 80, 1), 4)
    model = RNNModel(model_type, ntokens, 16, 16, 2, dropout, tied)
    if init is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    start = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    criterion = nn.NLLLoss()

    def evaluate(data_source, eval_batch_size):
        model.eval()
        total_loss = 0.
        hidden = model.init_hidden(eval_batch_size)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, bptt):
                data, targets = get_batch(data_source, i, bptt)
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        return total_loss / (len(data_source) - 1)

    losses, val_ppl = [], []
    for epoch in range(1, epochs + 1):
        model.train()
        hidden = model.init_hidden(6)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
            data, targets = get_batch(train_data, i, bptt)
            model.zero_grad()
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            losses.append(loss.item())
        val_ppl.append(math.exp(evaluate(val_data, 4)))
        lr /= 4.0
    return {"losses": losses, "val_ppl": val_ppl, "keys": " ".join(model.state_dict().keys()), "init": start}


if __name__ == "__main__":
    for kind in ("LSTM", "GRU", "RNN_TANH"):
        r = main(model_type=kind)
        print(kind, "loss", r["losses"][0], "->", r["losses"][-1], "valid ppl", r["val_ppl"])

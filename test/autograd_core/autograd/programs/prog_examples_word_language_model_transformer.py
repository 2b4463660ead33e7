"""pytorch/examples word_language_model, the Transformer variant, re-written: a model that
subclasses nn.Transformer (and replaces its decoder by a Linear), sinusoidal PositionalEncoding as
a buffer, the causal mask as log(tril(ones)), Embedding scaled by sqrt(d), log_softmax + NLLLoss,
clip_grad_norm_ and the manual SGD update."""
import math

import numpy as np
import autograd_core as torch
import autograd_core.nn as nn
import autograd_core.nn.functional as F


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=64):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer('pe', pe)

    def forward(self, x):
        x = x + self.pe[:x.size(0), :]
        return self.dropout(x)


class TransformerModel(nn.Transformer):
    """Container module with an encoder, a recurrent or transformer module, and a decoder."""

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super(TransformerModel, self).__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid,
                                               num_encoder_layers=nlayers, num_decoder_layers=1, dropout=dropout)
        self.model_type = 'Transformer'
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        self.init_weights()

    def _generate_square_subsequent_mask(self, sz):
        return torch.log(torch.tril(torch.ones(sz, sz)))

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.input_emb.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, src, has_mask=True):
        if has_mask:
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                mask = self._generate_square_subsequent_mask(len(src))
                self.src_mask = mask
        else:
            self.src_mask = None
        src = self.input_emb(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.encoder(src, mask=self.src_mask)
        output = self.decoder(output)
        return F.log_softmax(output, dim=-1)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)


def main(init=None, dropout=0.2, epochs=2, lr=1.0, clip=0.25, bptt=8):
    torch.manual_seed(1111)
    ntokens = 19
    rng = np.random.RandomState(0)
    ids = np.cumsum(rng.randint(1, 3, 260)) % ntokens  # a learnable walk over the vocabulary
    train_data = batchify(torch.tensor(ids, dtype=torch.long), 4)
    model = TransformerModel(ntokens, 16, 2, 32, 2, dropout)
    if init is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    start = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    criterion = nn.NLLLoss()
    losses = []
    for epoch in range(1, epochs + 1):
        model.train()
        for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
            data, targets = get_batch(train_data, i, bptt)
            model.zero_grad()
            output = model(data)
            output = output.view(-1, ntokens)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        out = model(train_data[:8, :2])
    return {"losses": losses, "eval_logp": out.numpy(), "n_params": sum(p.numel() for p in model.parameters()),
            "keys": " ".join(k for k in model.state_dict().keys() if "layers.0" in k), "init": start}


if __name__ == "__main__":
    r = main()
    print("loss", r["losses"][0], "->", r["losses"][-1], "params", r["n_params"])

"""The datasets & dataloaders tutorial, re-written: a custom map-style Dataset (dict samples) with
transforms (a one-hot target via scatter_), random_split, DataLoader batching/collation with
drop_last, a batch sampler, and iteration with next(iter(loader))."""
import numpy as np
import autograd_core as torch
from autograd_core.utils.data import BatchSampler, DataLoader, Dataset, SequentialSampler, Subset


class CustomImageDataset(Dataset):
    def __init__(self, n, transform=None, target_transform=None):
        rng = np.random.RandomState(5)
        self.images = rng.rand(n, 1, 4, 4).astype(np.float32)
        self.labels = rng.randint(0, 3, size=n)
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        image = torch.tensor(self.images[idx])
        label = int(self.labels[idx])
        if self.transform:
            image = self.transform(image)
        if self.target_transform:
            label = self.target_transform(label)
        return {"image": image, "label": label, "name": f"img{idx}", "stats": (float(self.images[idx].mean()), idx)}


def main(init=None):
    ds = CustomImageDataset(22, transform=lambda im: im * 2.0)
    loader = DataLoader(ds, batch_size=4, shuffle=False, drop_last=True)
    first = next(iter(loader))
    out = {"n_batches": len(loader), "first_image": first["image"].numpy(), "first_label": first["label"].numpy(),
           "names": " ".join(first["name"]), "stats_mean": first["stats"][0].numpy(),
           "stats_idx": first["stats"][1].numpy(), "label_dtype": str(first["label"].dtype),
           "mean_dtype": str(first["stats"][0].dtype)}
    sums = [batch["image"].sum().item() for batch in loader]
    out["sums"] = sums
    sub = Subset(ds, [3, 1, 2])
    sampler = BatchSampler(SequentialSampler(sub), batch_size=2, drop_last=False)
    out["subset_labels"] = [b["label"].numpy() for b in DataLoader(sub, batch_sampler=sampler)]
    parts = torch.utils.data.random_split(ds, [0.5, 0.25, 0.25], generator=torch.Generator().manual_seed(42))
    out["split_sizes"] = [len(p) for p in parts]
    out["split_disjoint"] = str(len(set(parts[0].indices) | set(parts[1].indices) | set(parts[2].indices)) == 22)
    g = torch.Generator()
    g.manual_seed(7)
    a = [b["label"].tolist() for b in DataLoader(ds, batch_size=5, shuffle=True, generator=g)]
    g.manual_seed(7)
    b = [b["label"].tolist() for b in DataLoader(ds, batch_size=5, shuffle=True, generator=g)]
    out["shuffle_repeatable"] = str(a == b)
    out["shuffle_is_permutation"] = str(sorted(sum(a, [])) == sorted(ds.labels.tolist()))
    out["num_workers_ok"] = len(list(DataLoader(ds, batch_size=8, num_workers=2)))
    one_hot = CustomImageDataset(6, target_transform=lambda y: torch.zeros(3, dtype=torch.float).scatter_(
        0, torch.tensor(y), value=1))
    out["one_hot_labels"] = next(iter(DataLoader(one_hot, batch_size=6)))["label"].numpy()
    out["init"] = {}
    return out


if __name__ == "__main__":
    print(main())

"""`autograd_core.utils`: `utils.data` (Dataset, DataLoader, samplers) as torch.utils."""
from . import data  # noqa: F401

"""Shape-only layers: `Identity`, `Flatten`, `Unflatten`."""
from .module import Module

__all__ = ["Identity", "Flatten", "Unflatten"]


class Identity(Module):
    """Returns its input unchanged; constructor arguments are accepted and ignored (as torch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):  # noqa: A002
        return input


class Flatten(Module):
    """Flatten dims start_dim..end_dim: (N, C, H, W) -> (N, C*H*W) with the defaults (1, -1)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):  # noqa: A002
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim `dim` into `unflattened_size`: (N, 12) -> (N, 3, 4) for Unflatten(1, (3, 4))."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if isinstance(dim, str):
            raise TypeError("Unflatten: named dimensions are not supported; pass an integer dim")
        if not isinstance(unflattened_size, (tuple, list)) or \
                not all(isinstance(s, int) and not isinstance(s, bool) for s in unflattened_size):
            raise TypeError("unflattened_size must be a tuple of ints, but found type "
                            f"{type(unflattened_size).__name__}")
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):  # noqa: A002
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"

"""`torch.accelerator` as torch reports it on a machine without one: the CPU is no accelerator.

`device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else "cpu"`
(the tutorials' idiom) then picks the CPU. Calls that need an accelerator raise as torch's do.
"""

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index", "current_device_idx",
           "set_device_index", "set_device_idx", "synchronize", "empty_cache"]

_NONE = "Cannot access accelerator device when none is available."


def is_available():
    return False


def current_accelerator(check_available=False):
    return None


def device_count():
    return 0


def current_device_index():
    raise RuntimeError(_NONE)


current_device_idx = current_device_index


def set_device_index(device):
    raise RuntimeError(_NONE)


set_device_idx = set_device_index


def synchronize(device=None):
    raise RuntimeError(_NONE)


def empty_cache():
    raise RuntimeError(_NONE)

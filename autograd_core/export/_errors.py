"""The exporter's error type (its own module so the recorder and the op table can both raise it)."""

__all__ = ["TraceError"]


class TraceError(RuntimeError):
    """The forward pass cannot be expressed as a static graph (the message names the op)."""

"""anthares44.automation: `from anthares44.automation import workflow, step` (§12). Lazy: importing the package
(every CLI verb does) loads nothing else."""

__all__ = ["workflow", "step"]


def __getattr__(name):
    if name in ("workflow", "step"):
        from . import sdk

        return getattr(sdk, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

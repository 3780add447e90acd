"""The simulator's cost-table module (nkisim's `costs`), wherever the package keeps it."""
try:
    from nkisim.machine import costs  # noqa: F401
except ImportError:
    from nkisim import costs  # noqa: F401

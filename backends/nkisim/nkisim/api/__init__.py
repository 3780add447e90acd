"""The NKI API surface kernels see: `nki`, `nki.language`, `nki.isa`, the decorators, the
grids, collectives, MX and the private names sample kernels import, and `activate`, which
installs them as the `nki` / `neuronxcc.nki` packages."""

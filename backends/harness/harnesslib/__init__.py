"""Building blocks of the autocomp evaluation harness (see ../PROTOCOL.md).

Modules are imported with the harness folder on `sys.path` (the entry point arranges it), so the
package name is `harnesslib` both locally and in the bundle uploaded to a remote host.
"""

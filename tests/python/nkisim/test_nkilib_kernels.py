"""NKI Library kernels (a local checkout, evaluated in place) that verify after a fix made
for them, each through the harness as scripts/nkilib_coverage.py runs it (skipped without a
checkout at $AUTOCOMP_NKI_LIBRARY, default /work/ext/nki-library)."""
import importlib.util
import io
import os
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LIBDIR = os.environ.get("AUTOCOMP_NKI_LIBRARY", "/work/ext/nki-library")

_spec = importlib.util.spec_from_file_location(
    "nkilib_coverage", os.path.join(REPO, "scripts", "nkilib_coverage.py"))
cov = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cov)
PKG = cov.package_dir(LIBDIR)


def verify(name):
    """(verified, failure reason, the script's output line) of one manifest kernel."""
    entries = [e for e in cov.load_manifest() if e["name"] == name]
    assert entries, name
    out = io.StringIO()
    row = cov.run(entries, PKG, cov.HarnessRunner("trn2", 300), bench=False, out=out)[0]
    return row[1], row[4], out.getvalue()


@unittest.skipUnless(PKG, "no NKI Library checkout at %s" % LIBDIR)
class LibraryKernels(unittest.TestCase):
    def assertVerifies(self, name):
        ok, why, line = verify(name)
        self.assertTrue(ok, line)

    def test_attention_tkg(self):  # t.buffer == nl.sbuf; same-count tensor_tensor operands
        self.assertVerifies("attention_tkg")

    def test_attention_cte(self):  # positional dst + keyword data; pinned PSUM banks
        self.assertVerifies("attention_cte")

    def test_cascaded_max(self):  # the indices are uint32 as the kernel documents
        self.assertVerifies("cascaded_max")

    def test_find_nonzero_indices(self):  # identity in SBUF; both documented outputs
        self.assertVerifies("find_nonzero_indices")

    def test_mlp_tkg(self):  # dtypes print as names; .ap() of a TensorView; the caller's SBM
        self.assertVerifies("mlp_tkg")

    def test_moe_tkg(self):  # nisa.local_gather modelled
        self.assertVerifies("moe_tkg")

    def test_output_projection_tkg(self):  # the output is [B * S, H] as documented
        self.assertVerifies("output_projection_tkg")


if __name__ == "__main__":
    unittest.main()

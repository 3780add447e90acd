"""NKI 0.7 tile and block grids: nl.tiles, nl.blocks, nl.alloc_tiles, nl.alloc_blocks."""
import unittest

import numpy as np

from . import _util  # noqa: F401  (activates the simulator)
import nkisim
import nki
import nki.isa as nisa
import nki.language as nl


def rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


@nki.jit
def tile_copy_kernel(src):
    """Copy through SBUF one (128, 96) tile at a time; the last column of tiles is partial."""
    src_tiles = nl.tiles(src, tile_shape=(128, 96))
    dst = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    dst_tiles = nl.tiles(dst, tile_shape=(128, 96))
    for i in range(src_tiles.shape[0]):
        for j in range(src_tiles.shape[1]):
            t = src_tiles[i, j]
            buf = nl.ndarray(t.element_shape, dtype=src.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=buf, src=t.data)
            nisa.dma_copy(dst=dst_tiles[i, j].data, src=nl.multiply(buf, 2.0))
    return dst


@nki.jit
def block_scale_kernel(src):
    """Block-grained loads (2 tiles of (128, 64) per block) into an alloc_blocks SBUF grid,
    compute per tile, store per block."""
    src_blocks = nl.blocks(src, tile_shape=(128, 64), block_shape=(1, 2))
    dst = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    dst_blocks = nl.blocks(dst, tile_shape=(128, 64), block_shape=(1, 2))
    for j in range(src_blocks.shape[1]):
        b = src_blocks[0, j]
        sb = nl.alloc_blocks(tile_shape=b.tile_shape, block_shape=b.block_shape,
                             element_shape=b.element_shape, buffer=nl.sbuf, dtype=src.dtype)
        nisa.dma_copy(dst=sb.data, src=b.data)
        t = nl.tiles(sb[0, 0])
        for k in range(t.shape[1]):
            t[0, k].data[...] = nl.add(t[0, k].data, float(k))
        nisa.dma_copy(dst=dst_blocks[0, j].data, src=sb.data)
    return dst


@nki.jit
def dense_tiles_kernel(src):
    """An SBUF tile grid taller than 128 rows (dense layout): fill tile by tile, then store."""
    g = nl.alloc_tiles(tile_shape=(128, 64), element_shape=(256, 64), buffer=nl.sbuf,
                       dtype=src.dtype)
    s = nl.tiles(src, tile_shape=(128, 64))
    dst = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    d = nl.tiles(dst, tile_shape=(128, 64))
    for i in range(g.shape[0]):
        nisa.dma_copy(dst=g[i, 0].data, src=s[i, 0].data)
    for i in range(g.shape[0]):
        nisa.dma_copy(dst=d[i, 0].data, src=g[i, 0].data)
    return dst


@nki.jit
def dense_whole_kernel(src):
    g = nl.alloc_tiles(tile_shape=(128, 64), element_shape=(256, 64), buffer=nl.sbuf,
                       dtype=src.dtype)
    return g.data


class GridTest(unittest.TestCase):
    def test_tiles_cover_a_tensor_with_partial_last_tiles(self):
        x = rand(256, 200)
        (out,) = nkisim.simulate(tile_copy_kernel, {"src": x}).outputs
        np.testing.assert_array_equal(out, 2 * x)

    def test_blocks_group_tiles_for_transfers(self):
        x = rand(128, 512)
        (out,) = nkisim.simulate(block_scale_kernel, {"src": x}).outputs
        ref = x + np.repeat(np.tile([0.0, 1.0], 4), 64)[None, :].astype(np.float32)
        np.testing.assert_allclose(out, ref, rtol=1e-6)

    def test_dense_layout_grid_taller_than_the_partitions(self):
        x = rand(256, 64)
        (out,) = nkisim.simulate(dense_tiles_kernel, {"src": x}).outputs
        np.testing.assert_array_equal(out, x)
        with self.assertRaises(nkisim.NkiCompileError) as cm:
            nkisim.simulate(dense_whole_kernel, {"src": x})
        self.assertIn("not one access pattern", cm.exception.message)

    def test_geometry(self):
        x = nkisim.TensorSpec((3, 300, 700))

        @nki.jit
        def k(src):
            g = nl.tiles(src, tile_shape=(128, 256))
            self.assertEqual(g.shape, (3, 3, 3))
            t = g[1, 2, 2]
            self.assertEqual(t.shape, ())
            self.assertEqual(t.element_shape, (44, 188))
            self.assertTrue(t.is_remainder)
            self.assertEqual(t.data.shape, (44, 188))
            b = nl.blocks(src, tile_shape=(128, 256), block_shape=(2, 2))
            self.assertEqual(b.shape, (3, 2, 2))
            self.assertEqual(b[0, 1, 0].element_shape, (44, 512))
            self.assertEqual(nl.tiles(b[0, 0, 0]).shape, (2, 2))
            self.assertEqual(g[:, 0:2, :].shape, (3, 2, 3))
            self.assertEqual(g.index_step_elements, (1, 128, 256))
            return src

        nkisim.simulate(k, {"src": x}, numerics=False)


if __name__ == "__main__":
    unittest.main()


class GridSandboxTest(unittest.TestCase):
    """Grids through the harness's record/replay path."""

    def test_record_and_replay(self):
        import os
        import tempfile
        import textwrap
        from nkisim.sandbox import replay
        from nkisim import sandbox
        body = textwrap.dedent('''
            import nki
            import nki.isa as nisa
            import nki.language as nl


            @nki.jit
            def k(x):
                src = nl.tiles(x, tile_shape=(128, 96))
                dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
                d = nl.tiles(dst, tile_shape=(128, 96))
                for j in range(src.shape[1]):
                    t = src[0, j]
                    buf = nl.ndarray(t.element_shape, dtype=x.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=buf, src=t.data)
                    nisa.dma_copy(dst=d[0, j].data, src=nl.exp(buf))
                return dst
            ''')
        x = rand(128, 200)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "grid_kernel.py")
            with open(path, "w") as f:
                f.write(body)
            trace = sandbox.record_trace({
                "kernel_path": path, "target": "trn2", "input_names": ["x"],
                "loader": _util.kernel_loader(),
                "kernel_name": None, "problem_kernel": None,
                "inputs": {"x": {"shape": [128, 200], "dtype": "float32"}},
                "input_dtypes": {}, "grid": None})
            self.assertTrue(trace["ok"], trace)
            res = replay.replay(trace, {"x": x}, target="trn2", kernel_path=path)
        np.testing.assert_allclose(res.outputs[0], np.exp(x), rtol=1e-6)

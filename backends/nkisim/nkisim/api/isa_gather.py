"""`nki.isa` data movement inside SBUF/PSUM by index (NKI 0.3+ API, dst first):

- `nc_n_gather(dst, data, indices)` (GpSimdE): per partition, dst[p, j] = the flattened free
  elements of data[p] at indices[p, j] (uint32, in [0, free size)).
- `local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None)`
  (GpSimdE): each GpSimd core (16 partitions) reads its 16-partition slice of index,
  partition axis first, keeps the first num_valid_indices; every partition p of the core
  then takes, for each of those indices i, the num_elem_per_idx elements of its own flattened
  src_buffer row starting at element i: dst[p, j, :] = src[p].flatten()[i_j : i_j + n].
- `nonzero_with_count(dst, src, index_offset=0, padding_val=-1)` (GpSimdE, trn2+): on the
  first partition of each GpSimd core (0, 16, ..., 112) dst[p] = the positions of src[p]'s
  nonzero elements + index_offset, then padding_val, then their count (dst has one more
  element than src); the other partitions of dst are not written.
- `nc_match_replace8(dst, data, vals, imm, dst_idx=None)` (VectorE): dst = data with the
  first occurrence of each of the 8 values per partition replaced by imm; dst_idx gets the
  matched positions (duplicate values are paired with their matches from the last slot down).
- `nc_stream_shuffle(dst, src, shuffle_mask)` (VectorE): within each quadrant of 32
  partitions, dst partition i takes src partition shuffle_mask[i] (255: left unmodified).
"""
import numpy as np

from ..data import dtypes as D
from ..data.buffers import Tensor
from ..errors import compile_error
from ..machine import runtime
from ..machine.core import check_onchip, compute, free_size, gpsimd_cost, vector_cost
from ..machine.timing import GPSIMD, VECTOR
from .isa_base import _bind, _f32

_QUADRANT = 32
_CORE_PARTITIONS = 16


def _tile(opname, what, t, kinds=("sbuf", "psum")):
    if not isinstance(t, Tensor):
        raise compile_error("nisa.%s: %s must be a tile" % (opname, what))
    check_onchip(t, "nisa." + opname)
    if t.st.kind not in kinds:
        raise compile_error("nisa.%s: %s must be in %s (it is in %s)"
                            % (opname, what, " or ".join(k.upper() for k in kinds),
                               t.st.kind.upper()))
    return t


def _flat(t, v):
    return np.asarray(v).reshape(t.shape[0], -1)


def nc_n_gather(*args, **kw):
    """Per-partition gather: dst[p, j] = data[p].flatten()[indices[p, j]] (GpSimdE)."""
    p = _bind("nc_n_gather", args, kw, ["data", "indices", "name"], True)
    op = "nc_n_gather"
    dst = _tile(op, "dst", p.get("dst"), ("sbuf",))
    data = _tile(op, "data", p.get("data"), ("sbuf",))
    idx = _tile(op, "indices", p.get("indices"), ("sbuf",))
    if not (data.shape[0] == idx.shape[0] == dst.shape[0]):
        raise compile_error("nisa.nc_n_gather: data, indices and dst must have the same "
                            "partitions (%d, %d, %d)" % (data.shape[0], idx.shape[0],
                                                         dst.shape[0]))
    if free_size(dst) != free_size(idx):
        raise compile_error("nisa.nc_n_gather: dst %s must have as many elements per partition "
                            "as indices %s" % (list(dst.shape), list(idx.shape)))
    if dst.st.dt is not data.st.dt:
        raise compile_error("nisa.nc_n_gather: dst (%s) must have data's dtype (%s)"
                            % (dst.st.dt.name, data.st.dt.name))
    if not idx.st.dt.is_int:
        raise compile_error("nisa.nc_n_gather: indices must be uint32, got %s"
                            % idx.st.dt.name)
    n = free_size(data)

    def run():
        i = _flat(idx, idx.read()).astype(np.int64)
        if i.size and (i.min() < 0 or i.max() >= n):
            raise compile_error("nisa.nc_n_gather: an index is outside [0, %d)" % n)
        return np.take_along_axis(_flat(data, data.read()), i, axis=1).reshape(dst.shape)
    k = runtime.CUR.costs
    compute(GPSIMD, gpsimd_cost(free_size(dst), dst.st.dt.itemsize, k.nc_n_gather_streams),
            [data, idx], [dst], run, "nisa.nc_n_gather")
    return None


def local_gather(*args, **kw):
    """Gather within each GpSimd core's 16 partitions by that core's indices (GpSimdE)."""
    p = _bind("local_gather", args, kw, ["src_buffer", "index", "num_elem_per_idx",
                                         "num_valid_indices", "name"], True)
    op = "local_gather"
    dst = _tile(op, "dst", p.get("dst"), ("sbuf",))
    src = _tile(op, "src_buffer", p.get("src_buffer"), ("sbuf",))
    idx = _tile(op, "index", p.get("index"), ("sbuf",))
    rows = src.shape[0]
    if not (rows == idx.shape[0] == dst.shape[0]) or rows % _CORE_PARTITIONS:
        raise compile_error("nisa.local_gather: src_buffer, index and dst must have the same "
                            "partitions, a multiple of 16 (%d, %d, %d)"
                            % (rows, idx.shape[0], dst.shape[0]))
    if not idx.st.dt.is_int:
        raise compile_error("nisa.local_gather: index must be an integer tile, got %s"
                            % idx.st.dt.name)
    if dst.st.dt is not src.st.dt:
        raise compile_error("nisa.local_gather: dst (%s) must have src_buffer's dtype (%s)"
                            % (dst.st.dt.name, src.st.dt.name))
    per_core = _CORE_PARTITIONS * free_size(idx)
    nv = p.get("num_valid_indices")
    nv = per_core if nv is None else int(nv)
    ne = int(p.get("num_elem_per_idx", 1) or 1)
    if not 0 < nv <= per_core or ne < 1:
        raise compile_error("nisa.local_gather: num_valid_indices must be in [1, %d] and "
                            "num_elem_per_idx >= 1 (got %d, %d)" % (per_core, nv, ne))
    if free_size(dst) != nv * ne:
        raise compile_error("nisa.local_gather: dst %s must hold num_valid_indices x "
                            "num_elem_per_idx = %d elements per partition"
                            % (list(dst.shape), nv * ne))
    n = free_size(src)

    def run():
        v = _flat(src, src.read())
        ix = _flat(idx, idx.read()).astype(np.int64)
        out = np.empty((rows, nv, ne), dtype=v.dtype)
        span = np.arange(ne, dtype=np.int64)
        for c in range(0, rows, _CORE_PARTITIONS):
            ids = ix[c:c + _CORE_PARTITIONS].flatten(order="F")[:nv]
            cols = ids[:, None] + span[None, :]
            if cols.size and (cols.min() < 0 or cols.max() >= n):
                raise compile_error("nisa.local_gather: an index reads outside the %d "
                                    "elements of a src_buffer partition" % n)
            out[c:c + _CORE_PARTITIONS] = v[c:c + _CORE_PARTITIONS][:, cols]
        return out.reshape(dst.shape)
    # streams as nc_n_gather's (indices, data, output: the same GpSimd gather pass)
    k = runtime.CUR.costs
    compute(GPSIMD, gpsimd_cost(free_size(dst), dst.st.dt.itemsize, k.nc_n_gather_streams),
            [src, idx], [dst], run, "nisa.local_gather")
    return None


def nonzero_with_count(*args, **kw):
    """Positions of the nonzero elements, padding and the count, on partitions 0, 16, ...,
    112 (GpSimdE)."""
    p = _bind("nonzero_with_count", args, kw, ["src", "index_offset", "padding_val", "name"], True)
    op = "nonzero_with_count"
    s = runtime.CUR
    if s is not None and s.target.name == "trn1":
        raise compile_error("nisa.nonzero_with_count is available only on NeuronCore-v3 or "
                            "newer (trn2, trn3)")
    dst = _tile(op, "dst", p.get("dst"), ("sbuf",))
    src = _tile(op, "src", p.get("src"), ("sbuf",))
    if src.shape[0] != dst.shape[0] or free_size(dst) != free_size(src) + 1:
        raise compile_error("nisa.nonzero_with_count: dst must have src's partitions and one "
                            "more element per partition (src %s, dst %s)"
                            % (list(src.shape), list(dst.shape)))
    if dst.st.dt is not D.INT32:
        raise compile_error("nisa.nonzero_with_count: dst must be int32, got %s"
                            % dst.st.dt.name)
    if src.st.dt not in (D.INT32, D.FLOAT32):
        raise compile_error("nisa.nonzero_with_count: src must be float32 or int32, got %s"
                            % src.st.dt.name)
    off, pad = int(p.get("index_offset", 0) or 0), p.get("padding_val", -1)
    pad = -1 if pad is None else int(pad)

    def run():
        v = _flat(src, src.read())
        out = np.empty((v.shape[0], v.shape[1] + 1), dtype=np.int64)
        for r in range(v.shape[0]):
            nz = np.flatnonzero(v[r]) + off
            out[r, :len(nz)] = nz
            out[r, len(nz):-1] = pad
            out[r, -1] = len(nz)
        rows = (np.arange(dst.shape[0]) % _CORE_PARTITIONS == 0)
        mask = np.broadcast_to(rows.reshape((-1,) + (1,) * (len(dst.shape) - 1)), dst.shape)
        dst.write(out.reshape(dst.shape), mask=mask)
        return None
    compute(GPSIMD, gpsimd_cost(free_size(src), 4, s.costs.nonzero_with_count_streams), [src],
            [dst], run, "nisa.nonzero_with_count")
    return None


def nc_match_replace8(*args, **kw):
    """data with the first occurrence of each of vals' 8 values per partition replaced by imm;
    the matched positions into dst_idx (VectorE)."""
    p = _bind("nc_match_replace8", args, kw, ["data", "vals", "imm", "dst_idx", "name"], True)
    op = "nc_match_replace8"
    dst = _tile(op, "dst", p.get("dst"))
    data = _tile(op, "data", p.get("data"))
    vals = _tile(op, "vals", p.get("vals"))
    if dst.shape[0] != data.shape[0] or free_size(dst) != free_size(data):
        raise compile_error("nisa.nc_match_replace8: dst %s and data %s differ in size"
                            % (list(dst.shape), list(data.shape)))
    if vals.shape[0] != data.shape[0] or free_size(vals) != 8:
        raise compile_error("nisa.nc_match_replace8: vals must be [%d, 8], got %s"
                            % (data.shape[0], list(vals.shape)))
    imm = p.get("imm")
    if not isinstance(imm, (int, float, np.integer, np.floating)):
        raise compile_error("nisa.nc_match_replace8: imm must be a number")
    di = p.get("dst_idx")
    outs = [dst]
    if di is not None:
        _tile(op, "dst_idx", di)
        if di.shape[0] != data.shape[0] or free_size(di) != 8:
            raise compile_error("nisa.nc_match_replace8: dst_idx must be [%d, 8], got %s"
                                % (data.shape[0], list(di.shape)))
        outs.append(di)

    def run():
        d = _flat(data, _f32(data.read())).copy()
        v = _flat(vals, _f32(vals.read()))
        idx = np.zeros(v.shape, dtype=np.int64)
        taken = np.zeros(d.shape, dtype=bool)
        for r in range(d.shape[0]):
            for j in range(7, -1, -1):  # vals in reverse order (the duplicates' pairing)
                hits = np.flatnonzero((d[r] == v[r, j]) & ~taken[r])
                if hits.size:
                    taken[r, hits[0]] = True
                    idx[r, j] = hits[0]
        d[taken] = imm
        if di is not None:
            di.write(idx.reshape(di.shape))
        return d.reshape(dst.shape)
    k = runtime.CUR.costs
    compute(VECTOR, vector_cost(free_size(data), k.nc_match_replace8_cycles_per_elem),
            [data, vals], outs, run, "nisa.nc_match_replace8")
    return None


def nc_stream_shuffle(*args, **kw):
    """Within each 32-partition quadrant, dst partition i = src partition shuffle_mask[i]
    (255 leaves it); the same mask applies to every quadrant (VectorE)."""
    p = _bind("nc_stream_shuffle", args, kw, ["src", "shuffle_mask", "name"], True)
    op = "nc_stream_shuffle"
    dst = _tile(op, "dst", p.get("dst"))
    src = _tile(op, "src", p.get("src"))
    mask = p.get("shuffle_mask")
    try:
        mask = [int(m) for m in mask]
    except (TypeError, ValueError):
        raise compile_error("nisa.nc_stream_shuffle: shuffle_mask must be a list of 32 "
                            "integers, got %r" % (mask,)) from None
    if len(mask) != _QUADRANT or any(not (0 <= m < _QUADRANT or m == 255) for m in mask):
        raise compile_error("nisa.nc_stream_shuffle: shuffle_mask must hold 32 partition "
                            "indices in [0, 32) or 255, got %r" % (mask,))
    if dst.st.dt is not src.st.dt:
        raise compile_error("nisa.nc_stream_shuffle: dst (%s) must have src's dtype (%s)"
                            % (dst.st.dt.name, src.st.dt.name))
    if free_size(dst) != free_size(src):
        raise compile_error("nisa.nc_stream_shuffle: dst %s and src %s must have the same "
                            "elements per partition" % (list(dst.shape), list(src.shape)))
    np_src, np_dst = src.shape[0], dst.shape[0]
    active = -(-max(np_src, np_dst) // _QUADRANT) * _QUADRANT

    def run():
        v = _flat(src, src.read())
        old = _flat(dst, dst.read())
        out = np.array(old, copy=True) if old is not None else np.zeros((np_dst, v.shape[1]))
        written = np.zeros(np_dst, dtype=bool)
        for q in range(0, active, _QUADRANT):
            for i, m in enumerate(mask):
                o, s_ = q + i, q + m
                if m == 255 or o >= np_dst:
                    continue
                if s_ >= np_src:
                    raise compile_error("nisa.nc_stream_shuffle: partition %d of dst reads "
                                        "partition %d of src, which has %d" % (o, s_, np_src))
                out[o] = v[s_]
                written[o] = True
        rows = np.broadcast_to(written.reshape((-1,) + (1,) * (len(dst.shape) - 1)), dst.shape)
        dst.write(out.reshape(dst.shape), mask=rows, exact=True)
        return None
    k = runtime.CUR.costs
    compute(VECTOR, vector_cost(free_size(dst), k.nc_stream_shuffle_cycles_per_elem), [src],
            [dst], run, "nisa.nc_stream_shuffle")
    return None

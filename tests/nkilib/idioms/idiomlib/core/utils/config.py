"""Config objects and Enums of the package, as the library writes them."""
from dataclasses import dataclass
from enum import Enum
from typing import Optional

import nki
import nki.language as nl

from ._tiles import _PMAX


class ScaleMode(Enum):
    DOUBLE = 0
    HALVE = 1


@dataclass(frozen=True)
class ScaleConfig(nl.NKIObject):
    """Frozen dataclass config with defaults and a check after construction."""

    mode: ScaleMode = ScaleMode.DOUBLE
    dtype: nki.dtype = nl.float32
    tile_rows: Optional[int] = None

    def __post_init__(self):
        assert self.tile_rows is None or 0 < self.tile_rows <= _PMAX

    def factor(self) -> float:
        return 2.0 if self.mode == ScaleMode.DOUBLE else 0.5


class TileShape(nl.NKIObject):
    """NKIObject without @dataclass: annotated fields, keyword construction, defaults."""

    rows: int
    cols: int = 512


class Tiler:
    """A helper object with private state read from outside its methods (`t._pmax`)."""

    def __init__(self, rows):
        self._pmax = min(rows, _PMAX)

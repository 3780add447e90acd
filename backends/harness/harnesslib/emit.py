"""Writing the result line so that kernel code cannot forge or alter it.

`ResultChannel.open()` runs at harness start, before any kernel or problem code: it moves the
real stdout to a private, close-on-exec descriptor at a high number and points fd 1 at stderr, so
whatever the kernel prints (or writes to fd 1) lands on stderr. The result is encoded by `encode`
below, which uses only functions captured when this module was imported (no `json`, whose
`dumps` or encoder a kernel could patch), and written with a captured `os.write`.
"""
import math
import os

_write = os.write
_dup = os.dup
_dup2 = os.dup2
_close = os.close
_isfinite = math.isfinite
_repr = repr
_str = str
_int = int
_float = float
_bool = bool
_dict = dict
_list = list
_tuple = tuple
_isinstance = isinstance
_sorted = sorted
_ord = ord
_join = "".join
_comma = ",".join

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b",
            "\f": "\\f"}
_PRIVATE_FD_FLOOR = 200


def _string(s):
    out = []
    for ch in s:
        esc = _ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif _ord(ch) < 0x20:
            out.append("\\u%04x" % _ord(ch))
        elif 0xD800 <= _ord(ch) <= 0xDFFF:
            # a lone surrogate (kernel text decoded with surrogateescape, or "\ud800" in a
            # message) has no UTF-8 form: shown as the six characters \udXXX
            out.append("\\\\u%04x" % _ord(ch))
        else:
            out.append(ch)
    return '"' + _join(out) + '"'


def encode(value):
    """Compact JSON text of dicts, lists, str, int, float, bool and None (non-finite floats
    are refused: the harness cleans them to null before)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if _isinstance(value, _str):
        return _string(value)
    if _isinstance(value, _int):
        return _int.__repr__(value)
    if _isinstance(value, _float):
        if not _isfinite(value):
            raise ValueError("non-finite float in the result")
        return _float.__repr__(value)
    if _isinstance(value, _dict):
        return "{" + _comma([_string(_str(k)) + ":" + encode(v) for k, v in value.items()]) + "}"
    if _isinstance(value, (_list, _tuple)):
        return "[" + _comma([encode(v) for v in value]) + "]"
    raise TypeError("cannot encode %s in the result" % type(value).__name__)


class ResultChannel:
    """The real stdout, kept where kernel code does not look for it."""

    def __init__(self):
        self.fd = None

    def open(self):
        """Move stdout to a private descriptor and point fd 1 at stderr."""
        try:
            import fcntl  # noqa: PLC0415
            self.fd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC,
                                  _PRIVATE_FD_FLOOR + (os.getpid() % 97))
        except (ImportError, AttributeError, OSError):
            try:
                self.fd = _dup(1)  # no fcntl (or no F_DUPFD_CLOEXEC): an ordinary duplicate
            except OSError:
                return self  # no stdout at all: write_line falls back to fd 1
        try:
            _dup2(2, 1)
        except OSError:
            pass
        return self

    def restore(self):
        """Give fd 1 back its original target (in-process callers)."""
        if self.fd is not None:
            _dup2(self.fd, 1)
            _close(self.fd)
            self.fd = None

    def write_line(self, obj):
        try:
            text = encode(obj)
        except (TypeError, ValueError, RecursionError) as e:
            text = encode({"schema": obj.get("schema"), "status": "failed",
                           "command": obj.get("command"), "failure": {
                               "kind": "harness_error", "stage": "load", "line": None,
                               "message": "result not encodable: %s" % e}})
        data = (text + "\n").encode("utf-8", "backslashreplace")
        fd = self.fd if self.fd is not None else 1
        while data:
            n = _write(fd, data)
            data = data[n:]

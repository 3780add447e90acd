"""Formats of the real Neuron SDK tools, read tolerantly (pure functions, tested on fixtures).

* Targets per namespace: NKI 0.3+ (the `nki` namespace, SDK 2.29+) supports trn2 and trn3 only;
  trn1 kernels need an older SDK and the `neuronxcc.nki` namespace, which knows no trn3. A
  kernel's namespace is read from its imports.
* Profiles: `summary-json` (`{"n_<id>": {...}}`, the cheap path), Neuron Explorer's full-profile
  JSON (`{"summary": [...], "instruction": [...]}` plus metadata naming the profile schema; last
  supported in SDK 2.33), and the Parquet digest: a small JSON the Trainium host writes from the
  Explorer's Parquet tables (`digest_from_tables`, run where pyarrow exists), so nothing here or
  in C++ parses Parquet. `parse_profile` says which format it read and the schema version.
* `neuron-ls`: `-j`/`--json-output` (a list of devices) and, from SDK 2.34, `--output-format
  json` (an object with instance fields and the device list).
"""
import json
import re

DIGEST_ID = "autocomp-parquet-digest/1"
SCHEMA_KEYS = ("profile_schema_version", "profile_schema", "schema_version", "schemaVersion")
METADATA_KEYS = ("metadata", "Metadata", "profile_metadata")


# ------------------------------------------------------------------ targets

_NS_NEW = re.compile(r"^\s*(import\s+nki\b|from\s+nki(\.|\s+import)\b)", re.M)
_NS_OLD = re.compile(
    r"^\s*(import\s+neuronxcc\.nki\b|from\s+neuronxcc(\.nki)?(\.\w+)*\s+import\b)", re.M)


def detect_namespace(source):
    """'neuronxcc' when the kernel imports neuronxcc.nki, 'nki' when it imports nki, else None."""
    if _NS_OLD.search(source):
        return "neuronxcc"
    if _NS_NEW.search(source):
        return "nki"
    return None


def target_problem(target, namespace, device="neuron"):
    """(failure kind, why) when this target cannot run a kernel of this namespace, else None.
    trn3 with a `neuronxcc.nki` kernel is the kernel's fault on any device (no SDK builds one
    for trn3): `compile_error`, so a search repairs or drops it. trn1 with an `nki` kernel is
    the host's (trn1 needs an SDK too old for that namespace): `unavailable`, on the real SDK
    only; the simulator (`device` "sim") models trn1 for either namespace, so that trn1
    figures exist for kernels written against the newer API."""
    if namespace == "neuronxcc" and target == "trn3":
        return ("compile_error",
                "trn3 needs the `nki` namespace (NKI 0.3+, Neuron SDK 2.29+); `neuronxcc.nki` "
                "kernels run on trn1 and trn2 only: import nki, nki.isa and nki.language instead")
    if namespace == "nki" and target == "trn1" and device != "sim":
        return ("unavailable",
                "the `nki` namespace (NKI 0.3+, Neuron SDK 2.29+) supports trn2 and trn3 only; "
                "trn1 needs Neuron SDK 2.28 or older and a kernel written against "
                "`neuronxcc.nki`")
    return None


# ------------------------------------------------------------------ JSON helpers

def load_json_tolerant(text):
    """The JSON value in text, skipping noise around the outermost object/array, or None."""
    if isinstance(text, (dict, list)):
        return text
    text = text or ""
    try:
        return json.loads(text)
    except ValueError:
        pass
    for open_ch, close_ch in (("{", "}"), ("[", "]")):
        start, end = text.find(open_ch), text.rfind(close_ch)
        if start >= 0 and end > start:
            try:
                return json.loads(text[start:end + 1])
            except ValueError:
                continue
    return None


def _find_schema(obj, depth=0):
    """A profile schema version found under the usual keys (top level or metadata)."""
    if not isinstance(obj, dict) or depth > 3:
        return None
    for key in SCHEMA_KEYS:
        value = obj.get(key)
        if isinstance(value, (str, int, float)) and str(value).strip():
            return str(value).strip()
    for key in METADATA_KEYS + ("summary",):
        inner = obj.get(key)
        if isinstance(inner, list):
            inner = next((x for x in inner if isinstance(x, dict)), None)
        found = _find_schema(inner, depth + 1)
        if found:
            return found
    if len(obj) == 1:
        return _find_schema(next(iter(obj.values())), depth + 1)
    return None


# ------------------------------------------------------------------ profiles

def detect_profile_format(obj):
    """'parquet-digest', 'explorer-json', 'summary-json' or None for a parsed JSON value."""
    if not isinstance(obj, dict):
        return "summary-json" if isinstance(obj, list) and obj else None
    if obj.get("digest") == DIGEST_ID or obj.get("format") == "parquet-digest":
        return "parquet-digest"
    if "instruction" in obj or "instructions" in obj or any(k in obj for k in METADATA_KEYS):
        return "explorer-json"
    return "summary-json"


def parse_profile(text, summary_parser):
    """(metrics, profile_format, profile_schema) of any supported profile output.

    summary_parser(obj, percent_mode) flattens a summary-like value (neuron.parse_summary_json).
    Parquet documents `*_percent` as 0-100, so the digest is read in percent mode; the JSON
    formats are scaled when they hold fractions."""
    obj = load_json_tolerant(text)
    if obj is None:
        return {}, None, None
    fmt = detect_profile_format(obj)
    schema = _find_schema(obj) if isinstance(obj, dict) else None
    if fmt == "parquet-digest":
        return summary_parser(obj.get("summary") or {}, "percent"), fmt, schema
    if fmt == "explorer-json":
        summary = obj.get("summary")
        if summary is None:
            summary = {k: v for k, v in obj.items()
                       if k not in METADATA_KEYS and not isinstance(v, (list, dict))}
        return summary_parser({"summary": summary} if isinstance(summary, list) else summary,
                              "auto"), fmt, schema
    return summary_parser(obj, "auto"), fmt, schema


def _rows(table):
    """Rows of a table given as a list of dicts or a dict of columns."""
    if isinstance(table, list):
        return [r for r in table if isinstance(r, dict)]
    if isinstance(table, dict) and table and all(isinstance(v, list) for v in table.values()):
        n = min(len(v) for v in table.values())
        return [{k: v[i] for k, v in table.items()} for i in range(n)]
    if isinstance(table, dict):
        return [table]
    return []


def digest_from_tables(tables, schema=None):
    """The Parquet digest (a small JSON-able dict) from Explorer tables read on the host.

    tables: {table name: rows (list of dicts) or columns (dict of lists)}; `Summary` gives the
    flat metrics, `Metadata` the schema version when not given (and the hardware figures),
    `ActiveTime` per-engine active time when Summary lacks it, `Instruction` the hottest source
    lines (by `nki_source_location` / `bir_debug_info_source_location`)."""
    summary = {}
    for row in _rows(tables.get("Summary")):
        summary.update({k: v for k, v in row.items() if not isinstance(v, (list, dict))})
    metadata = {}
    for row in _rows(tables.get("Metadata")):
        if "key" in row and "value" in row:
            metadata[str(row["key"])] = row["value"]
        else:
            metadata.update(row)
    for row in _rows(tables.get("ActiveTime")):
        engine = str(row.get("engine") or row.get("engine_name") or "").lower()
        value = row.get("active_time") if "active_time" in row else row.get("active_time_ns")
        if engine and value is not None:
            key = "%s_active_time" % (engine if engine == "dma" else engine + "_engine")
            if key not in summary:
                summary[key] = float(value) / (1e9 if "active_time_ns" in row else 1.0)
    lines = {}
    for row in _rows(tables.get("Instruction")):
        loc = row.get("nki_source_location") or row.get("bir_debug_info_source_location")
        m = re.search(r":(\d+)\s*$", str(loc or ""))
        if not m:
            continue
        line = int(m.group(1))
        dur = row.get("duration_ns", row.get("duration", 0)) or 0
        entry = lines.setdefault(line, {"line": line, "instructions": 0, "time_us": 0.0})
        entry["instructions"] += 1
        entry["time_us"] += float(dur) / 1e3
    schema = schema or _find_schema(metadata) or _find_schema(summary)
    return {"digest": DIGEST_ID, "format": "parquet-digest", "profile_schema": schema,
            "summary": summary, "metadata": metadata,
            "lines": sorted(lines.values(), key=lambda r: -r["time_us"])[:20]}


def read_parquet_tables(folder, names=("Summary", "Metadata", "ActiveTime", "Instruction")):
    """{table: rows} from `<folder>/<Table>.parquet` files; needs pyarrow (present on the
    Trainium host); tables that are missing are skipped. Raises ImportError without pyarrow."""
    import os  # noqa: PLC0415

    import pyarrow.parquet as pq  # noqa: PLC0415
    tables = {}
    for name in names:
        path = os.path.join(folder, name + ".parquet")
        if os.path.exists(path):
            tables[name] = pq.read_table(path).to_pylist()
    return tables


# ------------------------------------------------------------------ neuron-ls

def neuron_ls_command(help_text):
    """The JSON form this neuron-ls offers, judged from its --help text."""
    if "--output-format" in (help_text or ""):
        return ["neuron-ls", "--output-format", "json"]
    return ["neuron-ls", "-j"]


def _first_int(row, *keys):
    for k in keys:
        v = row.get(k)
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)):
            return int(v)
        if isinstance(v, str) and v.strip().isdigit():
            return int(v.strip())
    return None


def parse_neuron_ls(text):
    """{"format", "instance_type", "devices", "cores_per_device", "total_cores", "lnc"} from
    either neuron-ls JSON form (fields that are absent are None); None when not JSON."""
    obj = load_json_tolerant(text)
    if obj is None:
        return None
    instance = {}
    if isinstance(obj, list):
        fmt, devices = "neuron-ls -j", obj
    elif isinstance(obj, dict):
        fmt = "neuron-ls --output-format json"
        devices = None
        for key in ("neuron_devices", "devices", "neuron_device_list", "device_info"):
            if isinstance(obj.get(key), list):
                devices = obj[key]
                break
        if devices is None:
            devices = next((v for v in obj.values() if isinstance(v, list)
                            and v and isinstance(v[0], dict)), [])
        instance = obj.get("instance") if isinstance(obj.get("instance"), dict) else obj
    else:
        return None
    devices = [d for d in devices if isinstance(d, dict)]
    cores = [_first_int(d, "nc_count", "neuroncore_count", "logical_neuroncore_count",
                        "neuron_core_count", "core_count") for d in devices]
    known = [c for c in cores if c is not None]
    lnc = None
    for d in devices + [instance]:
        lnc = _first_int(d, "logical_neuroncore_config", "logical_nc_config", "lnc")
        if lnc is not None:
            break
    itype = instance.get("instance_type") or instance.get("instanceType")
    return {"format": fmt, "instance_type": itype if isinstance(itype, str) else None,
            "devices": len(devices), "cores_per_device": known[0] if known else None,
            "total_cores": sum(known) if known else None, "lnc": lnc}

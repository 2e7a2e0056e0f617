"""Structured keys, sorted as numpy.sort(a, order=...) sorts them: by the fields named in order,
then by the remaining fields in the dtype's order. Bytes, unicode strings, raw void keys
(without fields) and complex numbers sort the same way, as rows of one field.

Each field becomes unsigned codes that ascend in the wanted order (keys.py: numbers through
NumericCodec, NaN last; bool, datetime64 and timedelta64 through StandIns, NaT last; bytes and
unicode strings as their bytes and code points; complex numbers in NumPy's order: by real part,
then imaginary, those with a NaN part after all others), written big-endian, and the fields'
codes side by side make one byte key that compares like memcmp, most significant field first.
The key goes in front of each row's own bytes, and the rows sort as byte records
(api.sort_records), which break ties by global input position: the sort is stable.
"""

from __future__ import annotations

import numpy as np

from .errors import DistsortError
from .keys import NumericCodec, StandIns, check_sortable
from .transport import row_bytes

# bool, integers, floats, complex, datetime64, timedelta64, bytes, unicode, void
KINDS = "buifcMmSUV"
COMPLEX_BYTES = (8, 16)  # complex64, complex128: parts that NumericCodec codes (float32, 64)


def sortable(dtype: np.dtype, order=None) -> np.dtype:
    """dtype, if distsort sorts keys of it (structured ones, and bytes and strings, by their
    fields: order naming the first), else DistsortError; order names fields of structured
    keys only."""
    if order is not None and dtype.names is None:
        raise DistsortError(f"order= names fields of structured keys; these are {dtype}")
    if not by_fields(dtype):
        return check_sortable(dtype)
    key_fields(_one_field(dtype), order)
    if dtype.itemsize == 0:
        raise DistsortError(f"cannot sort keys of dtype {dtype}: its rows hold no bytes")
    return dtype


def by_fields(dtype: np.dtype) -> bool:
    """Whether keys of dtype sort by their fields: structured keys, and bytes, unicode strings,
    raw void keys (no fields) and complex numbers, which sort as rows of one field (bytes as
    memcmp compares them, strings by code point, complex numbers as NumPy orders them)."""
    return (dtype.names is not None or dtype.kind in "SUV"
            or (dtype.kind == "c" and dtype.itemsize in COMPLEX_BYTES))


def from_key(dtype: np.dtype) -> bool:
    """Whether rows of dtype come back from their key alone (decoded): bytes, strings and raw
    void keys, whose keys are their bytes. Others travel beside it: a float's key ties -0.0
    with 0.0 and every NaN with the others."""
    return dtype.names is None and dtype.kind in "SUV"


ONE_FIELD = "key"  # the one field that bytes and strings are rows of


def _one_field(dtype: np.dtype) -> np.dtype:
    """A structured dtype as it is; another as the dtype of rows of one field of it."""
    return dtype if dtype.names is not None else np.dtype([(ONE_FIELD, dtype)])


def keyed(rows: np.ndarray, order, descending: bool, carried: list,
          char_bytes: dict | None = None) -> tuple[np.ndarray, int]:
    """(n, key_size + carried bytes) uint8 byte records: each row's key (its fields' codes)
    followed by the bytes of its row of every carried array; and key_size. char_bytes: the
    bytes a character of each unicode field takes in the key (default 4; see char_bytes)."""
    fielded = rows.view(_one_field(rows.dtype))
    key = encode(fielded, key_fields(fielded.dtype, order), descending, char_bytes)
    return np.concatenate([key] + [rows_as_bytes(a) for a in carried], axis=1), key.shape[1]


def char_bytes(rows: np.ndarray) -> dict[str, int]:
    """For each unicode field of rows (bytes and strings: their one field), the fewest bytes
    that hold every character's code point here (1, 2, 3 or 4), so that its key is that much
    shorter: ASCII text's key is its length in bytes, not four times it. The ranks of a sort
    take the largest (a collective's work), and every row's key the same width."""
    fielded = rows.view(_one_field(rows.dtype))
    widths = {}
    for name in fielded.dtype.names:
        values = fielded[name]
        if values.dtype.kind == "U" and values.dtype.itemsize:
            top = int(_code_points(values).max(initial=0))
            widths[name] = next((b for b in (1, 2, 3) if top >> (8 * b) == 0), 4)
    return widths


def decoded(key: np.ndarray, dtype: np.dtype, descending: bool,
            char_bytes: dict | None = None) -> np.ndarray:
    """Bytes, unicode strings or raw void keys of dtype (native byte order) from their keys
    ((n, key bytes) uint8, as keyed made them with these char_bytes): a key is its row's
    bytes, or its code points', coded again, so no row need travel beside it."""
    n = len(key)
    raw = ~key if descending else key
    if dtype.kind == "U":
        chars, width = dtype.itemsize // 4, (char_bytes or {}).get(ONE_FIELD, 4)
        parts = raw.reshape(n, chars, width)  # each code point's bytes, most significant first
        raw = parts[:, :, 0].astype(np.uint32)
        for i in range(1, width):
            raw = (raw << np.uint32(8)) | parts[:, :, i]
    return np.ascontiguousarray(raw).view(dtype.newbyteorder("=")).reshape(n)


def key_fields(dtype: np.dtype, order) -> list[str]:
    """The fields a structured dtype sorts by: those named in order (a name, a list of names or
    None), then the others in the dtype's order. DistsortError for an unknown name or a field
    that cannot be a key."""
    names = list(dtype.names)
    if not names:
        raise DistsortError(f"cannot sort keys of dtype {dtype}: it has no fields")
    wanted = [] if order is None else [order] if isinstance(order, str) else order
    if not isinstance(wanted, (list, tuple)) or not all(isinstance(n, str) for n in wanted):
        raise DistsortError(f"order={order!r}: give a field name or a list of them")
    wanted = list(wanted)
    unknown = [name for name in wanted if name not in names]
    if unknown:
        raise DistsortError(f"order={wanted!r}: the keys have no field {', '.join(unknown)} "
                            f"(their fields: {', '.join(names)})")
    if len(set(wanted)) != len(wanted):
        raise DistsortError(f"order={wanted!r}: name each field at most once "
                            f"(the keys' fields: {', '.join(names)})")
    fields = wanted + [name for name in names if name not in wanted]
    for name in fields:
        field = dtype.fields[name][0]
        sortable = field.kind in KINDS and field.shape == () and field.names is None
        if (not sortable or (field.kind in "iuf" and field.itemsize not in (1, 2, 4, 8))
                or (field.kind == "c" and field.itemsize not in COMPLEX_BYTES)):
            raise DistsortError(
                f"cannot sort by field {name!r} of dtype {field}: fields sort as integers, "
                "float16/32/64, complex64/128, bool, datetime64, timedelta64 or fixed-size "
                "bytes and strings")
    return fields


def encode(records: np.ndarray, fields: list[str], descending: bool,
           char_bytes: dict | None = None) -> np.ndarray:
    """(n, key_size) uint8: every row's key, the fields' big-endian codes side by side; fields
    of no bytes (S0, U0, V0: every row equal) only, one zero byte (a key is never empty).
    char_bytes: as keyed's."""
    widths = char_bytes or {}
    codes = [_field_bytes(records[name], descending, widths.get(name, 4)) for name in fields]
    if not sum(c.shape[1] for c in codes):
        return np.zeros((len(records), 1), np.uint8)
    return np.concatenate(codes, axis=1)


def _field_bytes(values: np.ndarray, descending: bool, char_bytes: int = 4) -> np.ndarray:
    """(n, width) uint8: one field's codes, big-endian, ascending in the wanted order (unicode:
    the low char_bytes bytes of each code point, which hold all of them)."""
    kind, n = values.dtype.kind, len(values)
    if values.dtype.itemsize == 0:  # S0, U0, V0: no bytes to compare (NumPy's view cannot
        return np.zeros((n, 0), np.uint8)  # make rows of them)
    if kind == "c":
        return _complex_bytes(values, descending)
    if kind in "iuf":
        codes = NumericCodec(values.dtype, descending, canonical=True).encode(values, np)
    elif kind in "bMm":
        stand = StandIns(values.dtype, descending)
        codes = stand.encode(np.ascontiguousarray(values).astype(stand.dtype, copy=False))
        codes = ~codes if stand.sort_descending else codes
    elif kind == "U":  # code points, which NumPy compares
        codes = _code_points(values)
        codes = ~codes if descending else codes
        if char_bytes < 4:  # the low bytes, most significant first (the others are the same
            # in every row: zero, complemented all ones), picked out of their little-endian
            # bytes in one copy
            low = codes.astype("<u4", copy=False).view(np.uint8).reshape(codes.shape + (4,))
            return low[:, :, char_bytes - 1 :: -1].reshape(n, codes.shape[1] * char_bytes)
    else:  # "S", "V": bytes, as memcmp compares them
        codes = np.ascontiguousarray(values).view(np.uint8).reshape(n, values.dtype.itemsize)
        codes = ~codes if descending else codes
    big = codes.astype(codes.dtype.newbyteorder(">"), copy=False)
    return rows_as_bytes(big)


def _complex_bytes(values: np.ndarray, descending: bool) -> np.ndarray:
    """(n, 1 + itemsize) uint8: complex numbers' keys in NumPy's order, numbers with a NaN part
    last in either direction: R + Rj, then R + nanj (by real part), nan + Rj (by imaginary),
    nan + nanj; each group by real part, then imaginary, as floats sort (NaN ties NaN)."""
    parts = [values.real, values.imag]
    nan = [np.isnan(part) for part in parts]
    group = (nan[0].astype(np.uint8) << np.uint8(1)) | nan[1]  # 0-3 in NumPy's order
    return np.concatenate([group[:, None]] + [_field_bytes(part, descending) for part in parts],
                          axis=1)


def _code_points(values: np.ndarray) -> np.ndarray:
    """(n, characters) uint32: the code points of unicode strings (of either byte order)."""
    native = values.astype(values.dtype.newbyteorder("="), copy=False)
    points = np.ascontiguousarray(native).view(np.uint32)
    return points.reshape(len(values), values.dtype.itemsize // 4)


def rows_as_bytes(array: np.ndarray) -> np.ndarray:
    """(n, bytes of a row) uint8: each row's bytes (empty arrays too)."""
    return np.ascontiguousarray(array).view(np.uint8).reshape(len(array), row_bytes(array))

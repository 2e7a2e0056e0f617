"""File IO per rank: formats (.npy, raw, records), positioned reads of a rank's range, and the
collective writer of one global output file (temporary name, rename on success)."""

from .formats import (
    FileFormat,
    NpyLayout,
    check_record_sizes,
    detect_format,
    is_npy,
    npy_layout,
    output_format,
    parse_dtype,
)
from .reader import InputFile, open_input, rank_range
from .writer import ShardWriter, npy_header, write_shards

__all__ = [
    "FileFormat",
    "InputFile",
    "NpyLayout",
    "ShardWriter",
    "check_record_sizes",
    "detect_format",
    "is_npy",
    "npy_header",
    "npy_layout",
    "open_input",
    "output_format",
    "parse_dtype",
    "rank_range",
    "write_shards",
]

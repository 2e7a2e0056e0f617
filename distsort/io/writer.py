"""Collective writing of one global output file: each rank writes its own byte range.

Rank 0 creates a temporary file beside the output (``.NAME.distsort-tmp-XXXXXXXX``), writes the
.npy header if any and sizes the file, its blocks allocated where the file system can; every rank
then writes its piece (parallel.FileRange: through a shared mapping where the blocks are
allocated and every rank is on one node, so that every rank's page cache is the one page cache,
else by positioned writes); `commit`
flushes, agrees that every rank succeeded and renames the temporary file to the output name.
On any failure every rank raises (see errors.agree) and neither the output nor the temporary file
is left behind; a rank that dies (SIGKILL included) has a watcher process remove the temporary
file (guard.py), so a job killed while writing leaves nothing either. Write errors (disk full,
I/O errors) are kept until `commit`, which reports them on all ranks, so one rank's failure never
leaves the others waiting in a collective.
"""

from __future__ import annotations

import ctypes
import errno
import io
import os
import secrets
import stat
import tempfile
from collections.abc import Callable

import numpy as np
import numpy.lib.format as npformat

from ..errors import DistsortError, agree
from ..faults import inject_fault
from ..inputs import on_gpu
from ..node import node_place
from . import libc, staging
from .formats import FileFormat
from .guard import TempGuard, remove_later
from .parallel import FileRange, pwrite_from, reserve
from .reader import rank_range

TEMP_MARK = "distsort-tmp"
FREE_LATER = 64 << 20  # bytes: an old output at least this large is freed in the background
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def npy_header(dtype: np.dtype, count: int) -> bytes:
    """The .npy (version 1.0) header of a 1-D C-ordered array of `count` elements of `dtype`."""
    buf = io.BytesIO()
    header = {"descr": npformat.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
              "shape": (int(count),)}
    npformat.write_array_header_1_0(buf, header)
    return buf.getvalue()


def same_file(a: str, b: str) -> bool:
    """Do paths a and b name one file (where either does not exist yet: one resolved path)?"""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def writable(path: str | None, what: str = "the report", others: tuple = ()) -> None:
    """Raise before any work (and before any output is published) where a file the command
    writes at its end (--report, --plot) could not be written (its folder missing, not
    writable or taking no files, as making a file there finds; the name a folder), or would
    overwrite one of the command's other files (`others`: its inputs and outputs, by the files
    the paths name)."""
    if not path:
        return
    clash = next((other for other in others if other and same_file(path, other)), None)
    if clash is not None:
        raise DistsortError(f"{what} {path} would overwrite {clash}: give it another name")
    if os.path.isdir(path):
        raise DistsortError(f"cannot write {what} {path}: it is a folder; give a file name")
    try:
        with tempfile.TemporaryFile(dir=os.path.dirname(os.path.abspath(path))):
            pass
    except OSError as exc:
        raise write_error(path, exc, what=what) from None


def ensure_replaceable(path) -> None:
    """Raise where a new file may not take the output's name: a folder, or a file that is not
    a regular one (a device such as /dev/null, a pipe, a socket). Outputs are published by
    renaming a new file to the name, which would put a file in the device's place."""
    if os.fspath(path).endswith(os.sep):
        raise DistsortError(f"cannot write output {path}: a name that ends in {os.sep} names a "
                            "folder; give a file name")
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # not there: the new file takes the name (where it cannot: write_error says why)
    if stat.S_ISDIR(mode):
        raise write_error(path, OSError(errno.EISDIR, "is a folder"))
    if not stat.S_ISREG(mode):
        raise DistsortError(f"cannot write output {path}: it is not a regular file (a device, a "
                            "pipe or a socket), and distsort publishes an output by renaming a "
                            "new file to its name, which would replace it; give a file name")


def _keep_mode(temp: str, path: str) -> None:
    """Give temp the permission bits of the file at path, if there is one (cp onto a file and
    np.save over it keep them; a new file would take the umask's)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    os.chmod(temp, stat.S_IMODE(mode))


def temp_beside(path) -> str:
    """A new temporary name beside path: .NAME.distsort-tmp-XXXXXXXX, NAME cut where the whole
    would be longer than the folder's file names may be (an output name of 233-255 bytes)."""
    folder, name = os.path.split(os.path.abspath(path))
    mark = f".{TEMP_MARK}-{secrets.token_hex(4)}"
    try:
        longest = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):  # no such folder (write_error says so) or no limit told
        longest = 255
    name = os.fsencode(name)[: max(longest - len(mark) - 1, 1)]
    return os.path.join(folder, f".{os.fsdecode(name)}{mark}")


def write_error(path, exc: OSError, needed: int | None = None,
                what: str = "output") -> DistsortError:
    """An OSError met while writing `path` -> a DistsortError that says what to do."""
    folder = os.path.dirname(os.path.abspath(path))
    code = exc.errno
    if code == errno.ENOENT and not os.path.isdir(folder):
        why = f"the folder {folder} does not exist; create it or choose another output path"
    elif code == errno.ENOENT:  # a folder that holds no files of ours: /proc, /sys
        why = f"{folder} takes no new files; choose another output folder"
    elif code == errno.ENOTDIR:
        why = f"a part of {folder} is a regular file, not a folder; choose another output path"
    elif code in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = f"no permission to write in {folder}; choose a folder you can write to"
    elif code in (errno.ENOSPC, errno.EDQUOT):
        need = f" ({needed} bytes needed)" if needed is not None else ""
        why = f"no space left on the device holding {folder}{need}; free space or write elsewhere"
    elif code == errno.EISDIR:
        why = "it is a folder; give a file name for the output"
    else:
        why = f"{exc.strerror or exc}; check the output folder {folder}"
    return DistsortError(f"cannot write {what} {path}: {why}")


def _check_rows(array, fmt: FileFormat) -> None:
    """Raise ValueError unless array holds the format's elements (either byte order), or their
    bytes as payload.stored gives them (datetime64 as uint64, strings as rows of bytes)."""
    like = fmt.empty_rows()
    elements = (fmt.kind != "records" and array.ndim == 1
                and array.dtype.newbyteorder("=") == fmt.native_dtype)
    stored = array.dtype == like.dtype and array.shape[1:] == like.shape[1:]
    if not (elements or stored):
        raise ValueError(f"expected rows of {fmt.describe()} (or {like.dtype} "
                         f"{('n',) + like.shape[1:]}), got {array.dtype} {array.shape}")


class ShardWriter:
    """Collective writer of one global file of `total_count` elements; see the module doc.

    Use on all ranks of `comm`:  ``with ShardWriter(path, fmt, n, comm) as w:
    w.write(start, piece); w.commit()``.  Leaving the block without commit removes the temp file.
    """

    def __init__(self, path, fmt: FileFormat, total_count: int, comm, durable: bool = False,
                 ahead: bool = True):
        """ahead: fault the rank's share of a mapped output in while the job reads and sorts
        (io/ahead.py), where that leaves the sort its cores (on GPUs; on CPUs the faults took
        the sort's cores: bench/RESULTS.md, session 48)."""
        self.path = os.fspath(path)
        self.durable = durable
        self.fmt = fmt
        self.total = int(total_count)
        self.comm = comm
        self.header = npy_header(fmt.dtype, self.total) if fmt.kind == "npy" else b""
        self.nbytes = len(self.header) + self.total * fmt.itemsize
        self.temp: str | None = None
        self._guard: TempGuard | None = None
        self._fd: int | None = None
        self._target: FileRange | None = None
        self._error: OSError | None = None
        self._committed = self._mapped = False
        try:
            self.temp = comm.bcast(temp_beside(self.path) if comm.Get_rank() == 0 else None,
                                   root=0)
            self._guard = TempGuard(self.temp)  # on every rank, before the file exists
            agree(comm, self._create if comm.Get_rank() == 0 else lambda: None)
            self._sharers = node_place(comm)[1]  # the node's ranks: all write this file
            self._mapped = comm.bcast(self._mapped, root=0) and self._sharers == comm.Get_size()
            agree(comm, self._open_temp)
            self._target = self._data_range(ahead)
        except BaseException:
            self.abort()
            raise

    def _create(self) -> None:
        """Rank 0: make and size the temporary file."""
        ensure_replaceable(self.path)
        try:
            self._check_space(os.path.dirname(self.temp))
            self._fd = os.open(self.temp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
            pwrite_from(self._fd, memoryview(self.header), 0)
            self._mapped = reserve(self._fd, self.nbytes)
        except OSError as exc:
            self.abort()
            raise write_error(self.path, exc, self.nbytes) from None

    def _check_space(self, folder: str) -> None:
        st = os.statvfs(folder)
        if st.f_blocks and st.f_bavail * st.f_frsize < self.nbytes:
            raise OSError(errno.ENOSPC, "no space left on device")

    def _open_temp(self) -> None:
        if self._fd is not None:
            return
        try:
            self._fd = os.open(self.temp, os.O_RDWR)
        except OSError as exc:
            raise DistsortError(
                f"cannot write output {self.path}: rank {self.comm.Get_rank()} cannot open the "
                f"temporary file {self.temp} ({exc.strerror}); the output folder must be on a "
                "file system shared by all ranks"
            ) from None

    def _data_range(self, ahead: bool) -> FileRange:
        """The file's bytes after the header, for every write: one mapping for the writer's
        life where mapped (a mapping a write call, as the out-of-core rounds make, wrote half as
        fast: bench/RESULTS.md, run 223), its pages faulted in ahead (where asked) over this
        rank's even share of the rows (where its shard lies, give or take the sort's balance)."""
        span = self.nbytes - len(self.header)
        rows = rank_range(self.total, self.comm.Get_rank(), self.comm.Get_size())
        share = (rows[0] * self.fmt.itemsize, rows[1] * self.fmt.itemsize)
        try:
            return FileRange(self._fd, len(self.header), span, self._mapped, self._sharers,
                             ahead=share if ahead else None)
        except OSError:  # a file system that maps no files: write them
            return FileRange(self._fd, len(self.header), span, False)

    def write(self, global_start: int, array,
              progress: Callable[[int], None] = lambda n: None) -> None:
        """Write elements (or records) [global_start, global_start + len(array)) of the file.

        array: host or device rows of the format's elements, in native byte order (or, on the
        host, in the file's), or their bytes as payload.stored gives them (see _file_bytes).
        progress(bytes) as pieces are written. I/O errors are not raised here but kept for
        `commit`, which raises them on every rank.
        """
        n = len(array)
        if not 0 <= global_start <= self.total - n:
            raise ValueError(f"elements [{global_start}, {global_start + n}) outside the file's "
                             f"{self.total} elements")
        _check_rows(array, self.fmt)
        if self._error is not None or n == 0:
            return
        offset = int(global_start) * self.fmt.itemsize

        def put(data: np.ndarray, at: int) -> None:
            self._target.write(data, offset + at)
            progress(len(data))

        try:
            if on_gpu(array):
                staging.store(array, lambda raw, at: put(self._file_bytes(raw), at))
            else:
                data = self._file_bytes(array)
                for at in range(0, len(data), staging.STAGE_BYTES):
                    put(data[at : at + staging.STAGE_BYTES], at)
        except OSError as exc:
            self._error = exc
        inject_fault("written", self.comm.Get_rank())  # failure tests: die with a partial file

    def _file_bytes(self, array: np.ndarray) -> np.ndarray:
        """Host rows as the file's bytes (a uint8 array): elements in either byte order go to
        the file's; other rows are the elements' bytes in native order (payload.stored)."""
        array, fmt = np.ascontiguousarray(array), self.fmt
        if fmt.kind != "records" and array.dtype != fmt.dtype:
            if array.dtype.newbyteorder("=") == fmt.native_dtype:
                array = array.astype(fmt.dtype)
            elif not fmt.dtype.isnative:
                array = array.reshape(-1).view(np.uint8).view(fmt.native_dtype).astype(fmt.dtype)
        return array.reshape(-1).view(np.uint8)

    def commit(self) -> None:
        """Collective: flush every rank's writes, check all succeeded, rename temp -> output."""
        try:
            agree(self.comm, self._finish_local)
            agree(self.comm, self._publish if self.comm.Get_rank() == 0 else lambda: None)
        except BaseException:
            self.abort()
            raise
        self._committed = True
        self._release()

    def _finish_local(self) -> None:
        try:
            if self._error is not None:
                raise self._error
            self._target.close()  # its writes are the file's: fsync and close see them
            if self.durable:
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
        except OSError as exc:
            raise write_error(self.path, exc, self.nbytes) from None

    def _publish(self) -> None:
        """Rename the temporary file to the output. Over a large output already there, swap the
        two names instead (as atomic), and free the old file in the background: renaming over
        it would wait while ext4 writes the new file out (it does so on a rename that replaces
        a file, which takes seconds for a large one) and then frees the old one's pages
        (slow too). The new file takes the old one's permissions, as a copy onto it would."""
        try:
            _keep_mode(self.temp, self.path)
            if self._large_file_there() and _exchange(self.temp, self.path):
                remove_later(self.temp)  # the old output, under the temporary name now
            else:
                os.replace(self.temp, self.path)
        except OSError as exc:
            raise write_error(self.path, exc) from None
        if self.durable:
            _sync_folder(os.path.dirname(os.path.abspath(self.path)))

    def _large_file_there(self) -> bool:
        try:
            st = os.lstat(self.path)
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and st.st_size >= FREE_LATER

    def abort(self) -> None:
        """Close and remove the temporary file (not collective; safe to call more than once)."""
        if self._target is not None:
            self._target.close()
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None
        if self.temp is not None and not self._committed:
            try:
                os.unlink(self.temp)
            except OSError:
                pass  # already gone (another rank removed it) or never reached this rank
        self._release()

    def _release(self) -> None:
        if self._guard is not None:
            self._guard.release()

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self._committed:
            self.abort()


def _exchange(a: str, b: str) -> bool:
    """Swap the two names in one step (Linux renameat2 RENAME_EXCHANGE); False where the
    system or the file system cannot."""
    call = libc.function("renameat2", (ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                                        ctypes.c_char_p, ctypes.c_uint))
    if call is None:
        return False
    return call(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0


def _sync_folder(folder: str) -> None:
    """Make a rename durable (best effort: not every file system allows fsync on a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_shards(comm, path, fmt: FileFormat, local) -> None:
    """Collective: write each rank's array, in rank order, as one global file at `path`."""
    counts = comm.allgather(len(local))
    start = sum(counts[: comm.Get_rank()])
    with ShardWriter(path, fmt, sum(counts), comm) as writer:
        writer.write(start, local)
        writer.commit()

"""The output target of a writer: a temporary file beside it, renamed onto it when complete.

Every output is written to a temporary file beside the target, flushed to disk and renamed
onto the target only when the whole output was written: an error, a full disk or Ctrl-C
leaves an existing output as it was and no partial file behind.  Targets that cannot be
replaced by a rename (``/dev/stdout``, ``/dev/null``, a FIFO) are written in place.
"""

from __future__ import annotations

import gzip
import os
import secrets
import stat
from typing import IO

__all__ = ["Destination"]


class Destination:
    """Where one output goes, checked before anything is created.

    A regular file (or a path that does not exist yet) is written to a temporary file in
    the same directory (``.<name>.<random>.part``), fsynced, and renamed onto the target
    only by :meth:`commit`, so the target is either untouched or complete: a rename within
    one directory is atomic.  :meth:`discard` removes only the temporary file this object
    created.  An existing target that is not a regular file (a character device such as
    ``/dev/null`` or ``/dev/full``, a FIFO, ``/dev/stdout`` in a pipe) must never be renamed
    over or deleted; it is opened and written in place, streaming, with no atomicity
    possible.  ``/dev/...`` and ``/proc/...`` paths are always written in place: under a
    shell redirection ``/dev/stdout`` resolves to the regular file the shell opened, which
    must not be replaced behind the shell's back.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        if not self.path:
            raise ValueError("the output path is empty")
        self.compress = self.path.lower().endswith(".gz")
        self.direct = False
        self._mode: int | None = None  # permission bits of a target that exists
        self._tmp: str | None = None
        self._raw: IO[bytes] | None = None
        self._stream: IO[bytes] | None = None
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            info = None
        except OSError as error:
            raise ValueError(f"cannot write results to {self.path!r}: {error.strerror}") \
                from error
        if info is not None and stat.S_ISDIR(info.st_mode):
            raise ValueError(f"cannot write results to {self.path!r}: it is a directory")
        if info is not None and (stat.S_ISBLK(info.st_mode) or stat.S_ISSOCK(info.st_mode)):
            kind = "a block device" if stat.S_ISBLK(info.st_mode) else "a socket"
            raise ValueError(f"refusing to write results to {self.path!r}: it is {kind}")
        absolute = os.path.abspath(self.path)
        if info is not None and (not stat.S_ISREG(info.st_mode)
                                 or absolute.startswith(("/dev/", "/proc/"))):
            self.direct = True
            self.final = self.path
            if not os.access(self.path, os.W_OK):
                raise ValueError(f"cannot write results to {self.path!r}: permission denied")
            return
        # A symlink is followed: the file it points to is replaced, the link stays a link.
        self.final = os.path.realpath(self.path)
        directory = os.path.dirname(self.final)
        if not os.path.isdir(directory):
            raise ValueError(f"cannot write results to {self.path!r}: the directory "
                             f"{directory!r} does not exist")
        if not os.access(directory, os.W_OK | os.X_OK):
            raise ValueError(f"cannot write results to {self.path!r}: the directory "
                             f"{directory!r} is not writable")
        if info is not None:
            if not os.access(self.final, os.W_OK):
                raise ValueError(f"cannot write results to {self.path!r}: the file is not "
                                 f"writable")
            self._mode = stat.S_IMODE(info.st_mode)

    @property
    def opened(self) -> bool:
        return self._raw is not None

    def open(self) -> IO[bytes]:
        """Create the temporary file (or open the stream); returns the binary handle
        that receives the output (a gzip layer for ``.gz`` names)."""
        try:
            if self.direct:
                # Append: for /dev/stdout redirected to a file by the shell (> or >>),
                # opening with truncation would erase what was written there before us.
                self._raw = open(self.final, "ab")  # noqa: SIM115 - closed by commit/discard
            else:
                directory, name = os.path.split(self.final)
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
                while True:
                    tmp = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.part")
                    try:
                        fd = os.open(tmp, flags, 0o666)  # the umask applies, as for open()
                    except FileExistsError:
                        continue
                    self._tmp = tmp
                    break
                self._raw = os.fdopen(fd, "wb")
        except OSError as error:
            raise self.error(error) from error
        if self.compress:
            # mtime 0: the same results give the same bytes.
            self._stream = gzip.GzipFile(filename=os.path.basename(self.final), mode="wb",
                                         fileobj=self._raw, compresslevel=6, mtime=0)
        else:
            self._stream = self._raw
        return self._stream

    @property
    def raw(self) -> IO[bytes]:
        assert self._raw is not None
        return self._raw

    def commit(self) -> None:
        """Finish the output: flush, fsync, and rename the temporary file onto the target."""
        assert self._raw is not None and self._stream is not None
        try:
            if self._stream is not self._raw:
                self._stream.close()  # the gzip trailer
            self._raw.flush()
            if not self.direct:
                os.fsync(self._raw.fileno())
            self._raw.close()
            if not self.direct:
                assert self._tmp is not None
                if self._mode is not None:
                    os.chmod(self._tmp, self._mode)
                os.replace(self._tmp, self.final)
                self._tmp = None
                _fsync_directory(os.path.dirname(self.final))
        except BaseException as error:
            self.discard()
            if isinstance(error, OSError):
                raise self.error(error) from error
            raise

    def discard(self) -> None:
        """Close without committing and remove the temporary file this object created
        (never the target)."""
        for handle in (self._stream, self._raw):
            if handle is not None:
                try:
                    handle.close()
                except Exception:  # noqa: BLE001 - already failing; the first error wins
                    pass
        if self._tmp is not None:
            try:
                os.unlink(self._tmp)
            except FileNotFoundError:
                pass
            self._tmp = None

    def error(self, error: OSError) -> OSError:
        """`error` as an OSError naming the output (unchanged if it already does)."""
        if isinstance(error, _OutputError):
            return error
        reason = error.strerror or str(error)
        return _OutputError(error.errno, f"cannot write results to {self.path!r}: {reason}")


class _OutputError(OSError):
    """An OSError whose message already names the output file."""


def _fsync_directory(directory: str) -> None:
    """Make the rename itself durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
